// tests: the event-loop conformance suite's harness
// (event_loop_conformance_test.cc): the loops of each kind it runs against
// (the simulated loop, the io_uring loop with each wake backend), the stack
// they share, the fixture that builds them, and the time scale every span of
// the suite is multiplied by. Test code only.
#ifndef TETHER_TESTS_LOOP_CONFORMANCE_HARNESS_H_
#define TETHER_TESTS_LOOP_CONFORMANCE_HARNESS_H_

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "loop/event_loop.h"
#include "loop/kernel_probe.h"
#include "loop/simulated_event_loop.h"
#include "loop/uring_event_loop.h"
#include "shm/channel.h"
#include "tests/shm/shm_test_util.h"
#include "tests/transport/framing_test.capnp.h"
#include "transport/channel_set.h"
#include "transport/config.h"
#include "transport/schema_registry.h"

namespace tether::loop::testing {

// `n` ms, times TETHER_TEST_TIME_SCALE (an integer 1..1000; default 1). Real
// loops on a slow machine, such as an emulated guest (`./tether rt-lab`),
// need longer windows for what the tests let happen; every span of the suite
// scales alike, so the simulated loop's exact counts hold at any scale.
inline Duration Ms(int64_t n) {
  static const int64_t scale = [] {
    const char* text = std::getenv("TETHER_TEST_TIME_SCALE");
    const int64_t value = text != nullptr ? std::atoll(text) : 1;
    return value >= 1 && value <= 1000 ? value : int64_t{1};
  }();
  return std::chrono::milliseconds(n) * scale;
}

// The suite's stack: two Scalars channels and a Sample one.
inline constexpr char kStack[] = R"({
  "channels": [
    {"name": "/test/a", "type": "tests/transport/framing_test.capnp:Scalars",
     "maxSize": 256, "queueDepth": 8, "maxPublishers": 4, "maxPinned": 8},
    {"name": "/test/b", "type": "tests/transport/framing_test.capnp:Scalars",
     "maxSize": 256, "queueDepth": 8, "maxPublishers": 4, "maxPinned": 8},
    {"name": "/test/sample", "type": "tests/transport/framing_test.capnp:Sample",
     "maxSize": 1024, "queueDepth": 8, "maxPublishers": 4, "maxPinned": 8}
  ]
})";

// The kinds of EventLoop the suite runs against.
enum class Kind { kSimulated, kUringFutex, kFutexWaitv };

// For INSTANTIATE_TEST_SUITE_P: names the instance after its kind.
inline std::string KindName(const ::testing::TestParamInfo<Kind>& info) {
  switch (info.param) {
    case Kind::kSimulated: return "Simulated";
    case Kind::kUringFutex: return "UringFutex";
    case Kind::kFutexWaitv: return "FutexWaitv";
  }
  return "?";
}

// Builds loops of one kind and runs them for a while.
class Harness {
 public:
  virtual ~Harness() = default;
  virtual EventLoop* MakeLoop(const std::string& name) = 0;
  // Runs every loop for `d` of the loops' time (or until one exits).
  virtual void RunFor(Duration d) = 0;
  virtual void Exit() = 0;
  virtual MonotonicTime Now() = 0;
  // Where the loops' channel files are.
  virtual shm::ChannelOptions channel_options() = 0;
};

class SimHarness : public Harness {
 public:
  SimHarness(const transport::StackConfig& stack,
             const transport::SchemaRegistry& schemas) {
    auto f = SimulatedEventLoopFactory::Create(stack, schemas);
    EXPECT_TRUE(f.ok()) << f.status();
    factory_ = std::move(*f);
  }
  EventLoop* MakeLoop(const std::string& name) override {
    return factory_->MakeEventLoop(name);
  }
  void RunFor(Duration d) override { factory_->RunFor(d); }
  void Exit() override { factory_->Exit(); }
  MonotonicTime Now() override { return factory_->now(); }
  shm::ChannelOptions channel_options() override {
    return factory_->channels().options();
  }

 private:
  std::unique_ptr<SimulatedEventLoopFactory> factory_;
};

class UringHarness : public Harness {
 public:
  UringHarness(const transport::StackConfig& stack,
               const transport::SchemaRegistry& schemas,
               const shm::ChannelOptions& options, WakeBackend backend)
      : backend_(backend) {
    auto set = transport::ChannelSet::Create(options, stack, schemas);
    EXPECT_TRUE(set.ok()) << set.status();
    channels_ = std::move(*set);
  }
  EventLoop* MakeLoop(const std::string& name) override {
    UringEventLoopOptions o;
    o.port.backend = backend_;
    auto loop = UringEventLoop::Create(name, channels_.get(), o);
    EXPECT_TRUE(loop.ok()) << loop.status();
    loops_.push_back(std::move(*loop));
    return loops_.back().get();
  }
  void RunFor(Duration d) override {
    const MonotonicTime end = MonotonicNow() + d;
    std::vector<std::thread> threads;
    for (auto& loop : loops_) {
      UringEventLoop* l = loop.get();
      l->AddTimer([l] { l->Exit(); })->Schedule(end);
    }
    for (size_t i = 1; i < loops_.size(); ++i) {
      threads.emplace_back([this, i] { loops_[i]->Run(); });
    }
    loops_[0]->Run();
    for (auto& l : loops_) l->Exit();
    for (auto& t : threads) t.join();
  }
  void Exit() override {
    for (auto& l : loops_) l->Exit();
  }
  MonotonicTime Now() override { return MonotonicNow(); }
  shm::ChannelOptions channel_options() override {
    return channels_->options();
  }

 private:
  WakeBackend backend_;
  std::unique_ptr<transport::ChannelSet> channels_;
  std::vector<std::unique_ptr<UringEventLoop>> loops_;
};

// Each test's stack, and a harness of its parameter's kind (skipped when
// this kernel lacks the wake backend).
class ConformanceTest : public ::testing::TestWithParam<Kind> {
 protected:
  void SetUp() override {
    if (GetParam() != Kind::kSimulated) {
      auto choice = ChooseWakeBackend(
          ProbeKernel(), GetParam() == Kind::kUringFutex
                             ? WakeBackend::kUringFutex
                             : WakeBackend::kFutexWaitv);
      if (!choice.ok()) GTEST_SKIP() << choice.status();
    }
    schemas_.Register<Scalars>();
    schemas_.Register<Sample>();
    auto stack = transport::ParseStackConfig(kStack, "<test stack>",
                                               schemas_.known_types());
    ASSERT_TRUE(stack.ok()) << stack.status();
    stack_ = std::make_unique<transport::StackConfig>(std::move(*stack));
    if (GetParam() == Kind::kSimulated) {
      harness_ = std::make_unique<SimHarness>(*stack_, schemas_);
    } else {
      harness_ = std::make_unique<UringHarness>(
          *stack_, schemas_, root_.options(),
          GetParam() == Kind::kUringFutex ? WakeBackend::kUringFutex
                                          : WakeBackend::kFutexWaitv);
    }
  }
  bool simulated() const { return GetParam() == Kind::kSimulated; }

  shm::testing::ScopedRoot root_;
  transport::SchemaRegistry schemas_;
  std::unique_ptr<transport::StackConfig> stack_;
  std::unique_ptr<Harness> harness_;
};

// Sends one Scalars message holding `v` (a test failure if it is refused).
inline void SendScalar(Sender<Scalars>* s, int64_t v) {
  auto loan = s->MakeLoan();
  loan.root().setI64(v);
  ASSERT_EQ(s->Send(std::move(loan)).status, transport::PublishStatus::kOk);
}

}  // namespace tether::loop::testing

#endif  // TETHER_TESTS_LOOP_CONFORMANCE_HARNESS_H_
