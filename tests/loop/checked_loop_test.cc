// Loops that check allocations (EventLoop::set_check_allocations) with the
// allocation checker linked: a node's callback that allocates aborts with a
// stack trace; a node that does not (phased loop, sends, typed watcher,
// fetcher) runs; a malformed message is skipped and counted, not fatal.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "loop/event_loop.h"
#include "loop/realtime.h"
#include "loop/simulated_event_loop.h"
#include "loop/uring_event_loop.h"
#include "tests/shm/shm_test_util.h"
#include "tests/transport/framing_test.capnp.h"
#include "transport/channel_set.h"
#include "transport/config.h"
#include "transport/schema_registry.h"

namespace tether::loop {
namespace {

using std::chrono::milliseconds;

constexpr char kStack[] = R"({
  "channels": [
    {"name": "/test/a", "type": "tests/transport/framing_test.capnp:Scalars",
     "maxSize": 256, "queueDepth": 8, "maxPublishers": 2, "maxPinned": 4},
    {"name": "/test/blob", "type": "tests/transport/framing_test.capnp:Sample",
     "maxSize": 65536, "queueDepth": 4, "maxPublishers": 1, "maxPinned": 2}
  ]
})";

void* volatile g_sink = nullptr;

[[gnu::noinline]] void AllocateInACallback() { g_sink = new int[4]; }

class CheckedLoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(AllocationCheckActive());
    schemas_.Register<Scalars>();
    schemas_.Register<Sample>();
    auto stack = transport::ParseStackConfig(kStack, "<test stack>",
                                             schemas_.known_types());
    ASSERT_TRUE(stack.ok()) << stack.status();
    stack_ = std::make_unique<transport::StackConfig>(std::move(*stack));
  }
  // The simulated factory's root (made by Factory(), empty once the factory
  // is gone) is not the ScopedRoot's: remove it too.
  void TearDown() override { ::rmdir((root_.root() + "-sim").c_str()); }
  std::unique_ptr<SimulatedEventLoopFactory> Factory() {
    SimulatedOptions options;
    options.shm_root = root_.root() + "-sim";
    options.check_allocations = true;
    ::mkdir(options.shm_root.c_str(), 0700);
    auto f = SimulatedEventLoopFactory::Create(*stack_, schemas_, options);
    EXPECT_TRUE(f.ok()) << f.status();
    return std::move(*f);
  }

  shm::testing::ScopedRoot root_;
  transport::SchemaRegistry schemas_;
  std::unique_ptr<transport::StackConfig> stack_;
};

TEST_F(CheckedLoopTest, ANodeThatDoesNotAllocateRuns) {
  auto factory = Factory();
  EventLoop* loop = factory->MakeEventLoop("node");
  auto sender = loop->MakeSender<Scalars>("/test/a");
  ASSERT_TRUE(sender.ok());
  auto fetcher = loop->MakeFetcher<Scalars>("/test/a");
  ASSERT_TRUE(fetcher.ok());
  int64_t sum = 0;
  int received = 0;
  ASSERT_TRUE(loop->MakeWatcher<Scalars>(
                      "/test/a",
                      [&](Scalars::Reader m, const MessageContext&) {
                        sum += m.getI64();
                        ++received;
                      })
                  .ok());
  int64_t n = 0;
  loop->AddPhasedLoop(
      [&](int) {
        auto loan = (*sender)->MakeLoan();
        loan.root().setI64(++n);
        (void)(*sender)->Send(std::move(loan));
        Message<Scalars> m;
        (void)(*fetcher)->Latest(&m);
      },
      milliseconds(1));
  factory->RunFor(milliseconds(100));
  EXPECT_EQ(received, 100);
  EXPECT_EQ(sum, 100 * 101 / 2);
  EXPECT_TRUE(loop->check_allocations());
}

// Blobs (framing.h) are read through Cap'n Proto's reader like any field:
// a message with blobs at two depths must not make the receiving side
// allocate (a reader allocates for every segment but the first).
TEST_F(CheckedLoopTest, MessagesWithBlobsAreSentAndReadWithoutAllocating) {
  auto factory = Factory();
  EventLoop* loop = factory->MakeEventLoop("node");
  auto sender = loop->MakeSender<Sample>("/test/blob");
  ASSERT_TRUE(sender.ok());
  int received = 0;
  uint64_t bytes = 0;
  ASSERT_TRUE(loop->MakeWatcher<Sample>(
                      "/test/blob",
                      [&](Sample::Reader m, const MessageContext&) {
                        bytes += m.getBlob().size() +
                                 m.getChild().getBlob().size();
                        if (m.getBlob().size() == 1000 &&
                            m.getBlob()[999] == 0x5a &&
                            m.getChild().getLabel() == "child") {
                          ++received;
                        }
                      })
                  .ok());
  loop->AddPhasedLoop(
      [&](int) {
        auto loan = (*sender)->MakeLoan();
        auto child = loan.root().initChild();
        child.setLabel("child");
        std::span<std::byte> a = loan.InitBlob("blob", 1000);
        std::span<std::byte> b = loan.InitBlob<Sample>(child, "blob", 3001);
        if (a.empty() || b.empty()) return;
        std::memset(a.data(), 0x5a, a.size());
        std::memset(b.data(), 0x11, b.size());
        (void)(*sender)->Send(std::move(loan));
      },
      milliseconds(1));
  factory->RunFor(milliseconds(50));
  EXPECT_EQ(received, 50);
  EXPECT_EQ(bytes, 50u * (1000 + 3001));
}

TEST_F(CheckedLoopTest, AMalformedMessageIsSkippedNotFatal) {
  auto factory = Factory();
  EventLoop* loop = factory->MakeEventLoop("node");
  auto raw = loop->MakeRawSender("/test/a");
  ASSERT_TRUE(raw.ok());
  int received = 0;
  ASSERT_TRUE(loop->MakeWatcher<Scalars>(
                      "/test/a",
                      [&](Scalars::Reader, const MessageContext&) {
                        ++received;
                      })
                  .ok());
  loop->AddTimer([&] {
        // One segment of one word: a struct pointer far out of bounds.
        std::span<std::byte> slot = (*raw)->Loan();
        const uint64_t words[2] = {uint64_t{1} << 32, 0x0000000100007ff0ull};
        std::memcpy(slot.data(), words, sizeof(words));
        (void)(*raw)->Send(sizeof(words));
      })
      ->Schedule(loop->monotonic_now() + milliseconds(1));
  factory->RunFor(milliseconds(10));
  EXPECT_EQ(received, 0);
  EXPECT_EQ(loop->watcher_stats(0).malformed, 1u);
}

TEST_F(CheckedLoopTest, RealLoopCallbacksAreCheckedByDefaultInDebugBuilds) {
  UringEventLoopOptions options;
#ifdef NDEBUG
  EXPECT_FALSE(options.check_allocations);
#else
  EXPECT_TRUE(options.check_allocations);
#endif
}

using CheckedLoopDeathTest = CheckedLoopTest;

TEST_F(CheckedLoopDeathTest, AnAllocatingTimerCallbackAborts) {
  auto channels = transport::ChannelSet::Create(root_.options(), *stack_,
                                                schemas_);
  ASSERT_TRUE(channels.ok()) << channels.status();
  EXPECT_DEATH(
      {
        UringEventLoopOptions options;
        options.check_allocations = true;
        auto loop = UringEventLoop::Create("node", channels->get(), options);
        if (!loop.ok()) std::abort();
        (*loop)->AddTimer([] { AllocateInACallback(); })
            ->Schedule((*loop)->monotonic_now() + milliseconds(1));
        (*loop)->Run();
      },
      "heap allocation in a real-time scope(.|\n)*AllocateInACallback");
}

}  // namespace
}  // namespace tether::loop
