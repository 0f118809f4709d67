// No lost wakeup between real-time processes: a SCHED_FIFO 50 publisher
// process sends to a SCHED_FIFO 60 subscriber process asleep in its
// UringEventLoop, on two CPUs and on one (where the woken subscriber
// preempts the publisher inside its wake), for every wake backend and
// deadline mode. Every message must arrive, in order, none lost, and none
// later than kStallBound after its send: a loop that slept through a
// message's wake (and was woken only by a later one, or its deadline) shows
// up as a stall, not just as a missing message.
//
// Needs SCHED_FIFO (root outside a user namespace: tagged no-sandbox).
// Without it the test skips, unless TETHER_REQUIRE_RT=1 (./tether rt-lab
// sets it), which makes that a failure.
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "loop/kernel_probe.h"
#include "loop/realtime.h"
#include "loop/uring_event_loop.h"
#include "tests/shm/shm_test_util.h"
#include "tests/transport/framing_test.capnp.h"
#include "transport/channel_set.h"
#include "transport/config.h"
#include "transport/schema_registry.h"

namespace tether::loop {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int kMessages = 1500;
constexpr int kPublisherPriority = 50;
constexpr int kSubscriberPriority = 60;
// A message delivered this long after its send was slept through.
constexpr Duration kStallBound = seconds(1);
// The subscriber gives up (and the test fails) after this.
constexpr Duration kBudget = seconds(20);

constexpr char kStack[] = R"({
  "channels": [
    {"name": "/rt", "type": "tests/transport/framing_test.capnp:Scalars",
     "maxSize": 128, "queueDepth": 4096, "maxPublishers": 2, "maxPinned": 4}
  ]
})";

struct Config {
  const char* name;
  WakeBackend backend;
  DeadlineTimer timer;
  bool same_cpu;
};

const Config kConfigs[] = {
    {"UringFutexRingWaitTwoCpus", WakeBackend::kUringFutex,
     DeadlineTimer::kRingWait, false},
    {"UringFutexHardTwoCpus", WakeBackend::kUringFutex, DeadlineTimer::kHard,
     false},
    {"UringFutexAutoTwoCpus", WakeBackend::kUringFutex, DeadlineTimer::kAuto,
     false},
    {"FutexWaitvTwoCpus", WakeBackend::kFutexWaitv, DeadlineTimer::kAuto,
     false},
    {"UringFutexRingWaitOneCpu", WakeBackend::kUringFutex,
     DeadlineTimer::kRingWait, true},
    {"UringFutexHardOneCpu", WakeBackend::kUringFutex, DeadlineTimer::kHard,
     true},
    {"FutexWaitvOneCpu", WakeBackend::kFutexWaitv, DeadlineTimer::kAuto,
     true},
};

// What the two processes tell the test, in a MAP_SHARED page.
struct Board {
  std::atomic<int> subscriber_ready{0};
  std::atomic<int> subscriber_error{0};  // nonzero: setup step that failed
  std::atomic<int> publisher_error{0};
  std::atomic<int64_t> received{0};
  std::atomic<int64_t> out_of_order{0};
  std::atomic<int64_t> missed{0};
  std::atomic<int64_t> stalls{0};
  std::atomic<int64_t> max_delay_ns{0};
  std::atomic<int> timed_out{0};
  char description[512] = {};
};

bool RequireRt() {
  const char* v = std::getenv("TETHER_REQUIRE_RT");
  return v != nullptr && std::string(v) == "1";
}

std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return {0};
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

// Makes the calling (only) thread SCHED_FIFO `priority` on `cpu`.
bool BecomeRealtime(int cpu, int priority) {
  const int cpus[] = {cpu};
  return SetThreadAffinity(cpus).ok() &&
         SetThreadScheduling(SchedPolicy::kFifo, priority).ok();
}

// Waits for `pid` at most `limit`; kills it (by its pid) if it is still
// running then. Returns its wait status, or -1 if it had to be killed.
int WaitFor(pid_t pid, Duration limit) {
  const MonotonicTime end = MonotonicNow() + limit;
  int status = 0;
  while (MonotonicNow() < end) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    ::usleep(2000);
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return -1;
}

class RtWakeTest : public ::testing::TestWithParam<Config> {
 protected:
  void SetUp() override {
    auto choice = ChooseWakeBackend(ProbeKernel(), GetParam().backend);
    if (!choice.ok()) {
      if (RequireRt()) FAIL() << choice.status();
      GTEST_SKIP() << choice.status();
    }
    const std::vector<int> cpus = AllowedCpus();
    publisher_cpu_ = cpus.front();
    subscriber_cpu_ = GetParam().same_cpu || cpus.size() < 2 ? cpus.front()
                                                              : cpus[1];
    if (!GetParam().same_cpu && cpus.size() < 2) {
      if (RequireRt()) FAIL() << "needs two CPUs";
      GTEST_SKIP() << "needs two CPUs";
    }
    // Can this process's children be SCHED_FIFO at all?
    const pid_t probe = ::fork();
    ASSERT_GE(probe, 0);
    if (probe == 0) {
      ::_exit(BecomeRealtime(publisher_cpu_, kSubscriberPriority) ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(probe, &status, 0), probe);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      const char* why =
          "SCHED_FIFO is not permitted here (root outside a user namespace, "
          "CAP_SYS_NICE or RLIMIT_RTPRIO >= 60 needed)";
      if (RequireRt()) FAIL() << why;
      GTEST_SKIP() << why;
    }
    schemas_.Register<Scalars>();
    auto stack = transport::ParseStackConfig(kStack, "<test stack>",
                                               schemas_.known_types());
    ASSERT_TRUE(stack.ok()) << stack.status();
    stack_ = std::make_unique<transport::StackConfig>(std::move(*stack));
    auto set =
        transport::ChannelSet::Create(root_.options(), *stack_, schemas_);
    ASSERT_TRUE(set.ok()) << set.status();
    channels_ = std::move(*set);
    void* page = ::mmap(nullptr, sizeof(Board), PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(page, MAP_FAILED);
    board_ = new (page) Board();
  }
  void TearDown() override {
    if (board_ != nullptr) ::munmap(board_, sizeof(Board));
  }

  // The subscriber process: a real-time loop that watches /rt.
  [[noreturn]] void Subscriber() {
    if (!BecomeRealtime(subscriber_cpu_, kSubscriberPriority)) {
      board_->subscriber_error = 1;
      ::_exit(1);
    }
    UringEventLoopOptions options;
    options.port.backend = GetParam().backend;
    options.port.deadline_timer = GetParam().timer;
    auto loop = UringEventLoop::Create("subscriber", channels_.get(), options);
    if (!loop.ok()) {
      board_->subscriber_error = 2;
      std::snprintf(board_->description, sizeof(board_->description), "%s",
                    std::string(loop.status().message()).c_str());
      ::_exit(1);
    }
    std::snprintf(board_->description, sizeof(board_->description), "%s",
                  (*loop)->backend_description().c_str());
    UringEventLoop* l = loop->get();
    int64_t expected = 0;
    const absl::StatusOr<WatcherHandle*> watch = l->MakeWatcher<Scalars>(
        "/rt", [&](Scalars::Reader m, const MessageContext& c) {
          if (m.getI64() != expected) board_->out_of_order.fetch_add(1);
          expected = m.getI64() + 1;
          board_->missed.fetch_add(static_cast<int64_t>(c.missed));
          const int64_t delay = c.monotonic_receive_ns - c.monotonic_send_ns;
          if (delay > board_->max_delay_ns.load()) board_->max_delay_ns = delay;
          if (Duration(delay) > kStallBound) board_->stalls.fetch_add(1);
          if (board_->received.fetch_add(1) + 1 == kMessages) l->Exit();
        });
    if (!watch.ok()) {
      board_->subscriber_error = 3;
      ::_exit(1);
    }
    l->AddTimer([&] {
         board_->timed_out = 1;
         l->Exit();
       })
        ->Schedule(l->monotonic_now() + kBudget);
    l->OnRun([&] { board_->subscriber_ready = 1; });
    l->Run();
    loop->reset();
    ::_exit(0);
  }

  // The publisher process: kMessages sends with random gaps, mostly long
  // enough for the subscriber to fall asleep in between.
  [[noreturn]] void Publisher() {
    if (!BecomeRealtime(publisher_cpu_, kPublisherPriority)) {
      board_->publisher_error = 1;
      ::_exit(1);
    }
    auto ch = transport::ChannelHandle::Open(root_.options(), "/rt");
    if (!ch.ok()) {
      board_->publisher_error = 2;
      ::_exit(1);
    }
    auto pub = transport::Publisher<Scalars>::Create(ch->get());
    if (!pub.ok()) {
      board_->publisher_error = 3;
      ::_exit(1);
    }
    std::mt19937 rng(11);
    for (int i = 0; i < kMessages; ++i) {
      auto loan = (*pub)->MakeLoan();
      loan.root().setI64(i);
      if ((*pub)->Send(std::move(loan)).status !=
          transport::PublishStatus::kOk) {
        board_->publisher_error = 4;
        ::_exit(1);
      }
      if (rng() % 4 != 0) {
        const timespec gap = {0, static_cast<long>(rng() % 300) * 1000};
        ::clock_nanosleep(CLOCK_MONOTONIC, 0, &gap, nullptr);
      }
    }
    pub->reset();
    ::_exit(0);
  }

  shm::testing::ScopedRoot root_;
  transport::SchemaRegistry schemas_;
  std::unique_ptr<transport::StackConfig> stack_;
  std::unique_ptr<transport::ChannelSet> channels_;
  Board* board_ = nullptr;
  int publisher_cpu_ = 0;
  int subscriber_cpu_ = 0;
};

TEST_P(RtWakeTest, EveryMessageWakesTheRealTimeSubscriber) {
  const pid_t subscriber = ::fork();
  ASSERT_GE(subscriber, 0);
  if (subscriber == 0) Subscriber();
  const MonotonicTime ready_by = MonotonicNow() + seconds(10);
  while (board_->subscriber_ready == 0 && board_->subscriber_error == 0 &&
         MonotonicNow() < ready_by) {
    ::usleep(1000);
  }
  ::usleep(20000);  // let the loop fall asleep first
  const pid_t publisher = ::fork();
  ASSERT_GE(publisher, 0);
  if (publisher == 0) Publisher();

  const int pub_status = WaitFor(publisher, kBudget + seconds(5));
  const int sub_status = WaitFor(subscriber, kBudget + seconds(5));
  std::printf("%s: %s; max delay %.0f us\n", GetParam().name,
              board_->description, board_->max_delay_ns.load() / 1e3);
  ASSERT_EQ(board_->subscriber_error.load(), 0) << board_->description;
  ASSERT_EQ(board_->publisher_error.load(), 0);
  EXPECT_TRUE(WIFEXITED(pub_status) && WEXITSTATUS(pub_status) == 0);
  EXPECT_TRUE(WIFEXITED(sub_status) && WEXITSTATUS(sub_status) == 0);
  EXPECT_EQ(board_->timed_out.load(), 0)
      << "the subscriber slept through messages until its deadline: got "
      << board_->received.load() << " of " << kMessages;
  EXPECT_EQ(board_->received.load(), kMessages);
  EXPECT_EQ(board_->out_of_order.load(), 0);
  EXPECT_EQ(board_->missed.load(), 0);
  EXPECT_EQ(board_->stalls.load(), 0)
      << "messages delivered more than " << kStallBound.count() / 1e9
      << " s after their send (a wake slept through; max "
      << board_->max_delay_ns.load() / 1e6 << " ms)";
}

INSTANTIATE_TEST_SUITE_P(
    EachBackendAndPlacement, RtWakeTest, ::testing::ValuesIn(kConfigs),
    [](const ::testing::TestParamInfo<Config>& info) {
      return std::string(info.param.name);
    });

}  // namespace
}  // namespace tether::loop
