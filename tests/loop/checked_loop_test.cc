// Loops that check allocations (EventLoop::set_check_allocations) with the
// allocation checker linked: a node's callback that allocates aborts with a
// stack trace; a node that does not (phased loop, sends, typed watcher,
// fetcher) runs; a malformed message is skipped and counted, not fatal, on
// both loop kinds, through watchers and fetchers alike.
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "capnp/message.h"
#include "capnp/serialize.h"
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
     "maxSize": 65536, "queueDepth": 4, "maxPublishers": 2, "maxPinned": 2}
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

  // Runs a Scenario (SetUp(loop, exit), then Expect(what the loop wrote to
  // stderr)) on one simulated loop for 10 ms of virtual time. The scenario
  // is made after the loop, so its senders and fetchers die before it.
  template <typename Scenario>
  void RunSimulated() {
    auto factory = Factory();
    Scenario scenario;
    scenario.SetUp(factory->MakeEventLoop("node"), [] {});
    if (HasFatalFailure()) return;
    ::testing::internal::CaptureStderr();
    factory->RunFor(milliseconds(10));
    scenario.Expect(::testing::internal::GetCapturedStderr());
  }
  // The same on a real loop with checking on, until the scenario calls its
  // exit (or 10 s: a set-up that failed).
  template <typename Scenario>
  void RunReal() {
    auto channels = transport::ChannelSet::Create(root_.options(), *stack_,
                                                  schemas_);
    ASSERT_TRUE(channels.ok()) << channels.status();
    UringEventLoopOptions options;
    options.check_allocations = true;
    auto loop = UringEventLoop::Create("node", channels->get(), options);
    ASSERT_TRUE(loop.ok()) << loop.status();
    UringEventLoop* real = loop->get();
    Scenario scenario;
    scenario.SetUp(real, [real] { real->Exit(); });
    if (HasFatalFailure()) return;
    real->AddTimer([real] { real->Exit(); })
        ->Schedule(real->monotonic_now() + std::chrono::seconds(10));
    ::testing::internal::CaptureStderr();
    (void)real->Run();
    scenario.Expect(::testing::internal::GetCapturedStderr());
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

// What a hostile or buggy publisher can send on any channel it may write:
// a valid Scalars message whose root pointer (bytes 8-15, right after the
// one-segment table) is 0xFFFFFFFFFFFFFFFC, a struct of 65535 + 65535
// words: out of bounds. Cap'n Proto's bounds check throws, and its
// exception allocates.
std::vector<capnp::word> ScalarsWords(int64_t value) {
  capnp::MallocMessageBuilder builder;
  builder.initRoot<Scalars>().setI64(value);
  kj::Array<capnp::word> flat = capnp::messageToFlatArray(builder);
  return std::vector<capnp::word>(flat.begin(), flat.end());
}

// One node on `loop` with checking on: a timer sends the corrupt message and
// then a valid one (7); a typed watcher and a typed fetcher (read from a
// later timer, once the watcher had both) see both. `exit` ends the run
// once the fetcher has read.
struct CorruptRootScenario {
  std::vector<capnp::word> bad = ScalarsWords(7);
  std::unique_ptr<RawSender> raw;
  std::unique_ptr<Sender<Scalars>> sender;
  std::unique_ptr<Fetcher<Scalars>> fetcher;
  WatcherHandle* watcher = nullptr;
  int watched = 0;
  int64_t watched_value = 0;
  ReceiveStatus fetched[3] = {ReceiveStatus::kOk, ReceiveStatus::kOk,
                              ReceiveStatus::kOk};
  int fetches = 0;
  int64_t fetched_value = 0;
  TimerHandle* fetch_timer = nullptr;
  MonotonicTime start;

  void SetUp(EventLoop* loop, absl::AnyInvocable<void()> exit) {
    const uint64_t corrupt_root = 0xFFFFFFFFFFFFFFFCull;
    std::memcpy(bad.data() + 1, &corrupt_root, sizeof(corrupt_root));
    auto r = loop->MakeRawSender("/test/a");
    ASSERT_TRUE(r.ok()) << r.status();
    raw = std::move(*r);
    auto s = loop->MakeSender<Scalars>("/test/a");
    ASSERT_TRUE(s.ok()) << s.status();
    sender = std::move(*s);
    auto f = loop->MakeFetcher<Scalars>("/test/a");
    ASSERT_TRUE(f.ok()) << f.status();
    fetcher = std::move(*f);
    auto w = loop->MakeWatcher<Scalars>(
        "/test/a", [this](Scalars::Reader m, const MessageContext&) {
          ++watched;
          watched_value = m.getI64();
        });
    ASSERT_TRUE(w.ok()) << w.status();
    watcher = *w;
    TimerHandle* send = loop->AddTimer([this] {
          std::span<std::byte> slot = raw->Loan();
          const size_t size = bad.size() * sizeof(capnp::word);
          std::memcpy(slot.data(), bad.data(), size);
          (void)raw->Send(size);
          auto loan = sender->MakeLoan();
          loan.root().setI64(7);
          (void)sender->Send(std::move(loan));
        });
    TimerHandle* fetch = loop->AddTimer([this, loop, exit = std::move(
                                                          exit)]() mutable {
          // After the watcher's turn (or a second, on a loaded machine).
          if (watcher->stats().received < 2 &&
              loop->monotonic_now() < start + std::chrono::seconds(1)) {
            return;
          }
          fetch_timer->Disable();
          Message<Scalars> m;
          for (; fetches < 3; ++fetches) {
            fetched[fetches] = fetcher->Next(&m);
            if (fetched[fetches] == ReceiveStatus::kOk) {
              fetched_value = m.root.getI64();
              fetcher->Release();
            }
            if (fetched[fetches] == ReceiveStatus::kNothingNew) break;
          }
          exit();
        });
    // From the start of the run, so the watcher gets its turn in between.
    fetch_timer = fetch;
    loop->OnRun([this, loop, send, fetch] {
      start = loop->monotonic_now();
      send->Schedule(start + milliseconds(1));
      fetch->Schedule(start + milliseconds(2), milliseconds(1));
    });
  }

  // The bad one skipped and reported, the good one delivered.
  void Expect(const std::string& log) {
    EXPECT_EQ(watched, 1);
    EXPECT_EQ(watched_value, 7);
    EXPECT_EQ(watcher->stats().received, 2u);
    EXPECT_EQ(watcher->stats().malformed, 1u);
    ASSERT_EQ(fetches, 2);
    EXPECT_EQ(fetched[0], ReceiveStatus::kMalformed);
    EXPECT_EQ(fetched[1], ReceiveStatus::kOk);
    EXPECT_EQ(fetched[2], ReceiveStatus::kNothingNew);
    EXPECT_EQ(fetched_value, 7);
    EXPECT_EQ(fetcher->malformed(), 1u);
    // One line for the channel, however many readers of this loop met it.
    const std::string line = "channel /test/a: skipped a malformed message";
    const size_t first = log.find(line);
    EXPECT_NE(first, std::string::npos) << log;
    EXPECT_EQ(log.find(line, first + 1), std::string::npos) << log;
    EXPECT_NE(log.find("out-of-bounds"), std::string::npos) << log;
  }
};

TEST_F(CheckedLoopTest,
       ACorruptRootPointerIsSkippedAndReportedOnTheSimulatedLoop) {
  RunSimulated<CorruptRootScenario>();
}

TEST_F(CheckedLoopTest, ACorruptRootPointerIsSkippedAndReportedOnTheRealLoop) {
  RunReal<CorruptRootScenario>();
}

// What a hostile or buggy publisher can send that passes the bounds check:
// a Sample whose label (pointer 0) is a struct, not Text. The watcher's
// callback reads the stamp, then the label, which throws (and Cap'n Proto's
// exception allocates); a valid Sample follows. Before the callback ran in
// a failure-path scope this aborted a node that checks allocations.
struct WrongKindFieldScenario {
  std::unique_ptr<RawSender> raw;
  std::unique_ptr<Sender<Sample>> sender;
  WatcherHandle* watcher = nullptr;
  std::vector<uint64_t> stamps;  // read before the label, by every call
  std::vector<std::string> labels;

  void SetUp(EventLoop* loop, absl::AnyInvocable<void()> exit) {
    auto r = loop->MakeRawSender("/test/blob");
    ASSERT_TRUE(r.ok()) << r.status();
    raw = std::move(*r);
    auto s = loop->MakeSender<Sample>("/test/blob");
    ASSERT_TRUE(s.ok()) << s.status();
    sender = std::move(*s);
    stamps.reserve(4);
    labels.reserve(4);
    auto w = loop->MakeWatcher<Sample>(
        "/test/blob",
        [this, exit = std::move(exit)](Sample::Reader m,
                                       const MessageContext&) mutable {
          stamps.push_back(m.getStamp());
          const capnp::Text::Reader label = m.getLabel();  // throws on the bad
          labels.emplace_back(label.cStr(), label.size());
          if (labels.size() == 1) exit();
        });
    ASSERT_TRUE(w.ok()) << w.status();
    watcher = *w;
    capnp::MallocMessageBuilder wrong;
    StructFirst::Builder b = wrong.initRoot<StructFirst>();
    b.setStamp(41);
    b.initInner().setName("a struct where Sample has Text");
    kj::Array<capnp::word> flat = capnp::messageToFlatArray(wrong);
    std::vector<capnp::word> bad(flat.begin(), flat.end());
    loop->AddTimer([this, bad] {
          std::span<std::byte> slot = raw->Loan();
          const size_t size = bad.size() * sizeof(capnp::word);
          std::memcpy(slot.data(), bad.data(), size);
          (void)raw->Send(size);
          auto loan = sender->MakeLoan();
          loan.root().setStamp(42);
          loan.root().setLabel("fine");
          (void)sender->Send(std::move(loan));
        })
        ->Schedule(loop->monotonic_now() + milliseconds(1));
  }

  // The bad one counted and reported, the good one delivered.
  void Expect(const std::string& log) {
    ASSERT_EQ(stamps.size(), 2u);
    EXPECT_EQ(stamps[0], 41u);  // what the callback did before the bad read
    EXPECT_EQ(stamps[1], 42u);
    ASSERT_EQ(labels.size(), 1u);
    EXPECT_EQ(labels[0], "fine");
    EXPECT_EQ(watcher->stats().received, 2u);
    EXPECT_EQ(watcher->stats().malformed, 1u);
    EXPECT_NE(log.find("channel /test/blob: skipped a malformed message"),
              std::string::npos)
        << log;
    EXPECT_NE(log.find("where text was expected"),
              std::string::npos)
        << log;
  }
};

TEST_F(CheckedLoopTest,
       AFieldOfTheWrongKindIsCountedNotFatalOnTheSimulatedLoop) {
  RunSimulated<WrongKindFieldScenario>();
}

TEST_F(CheckedLoopTest, AFieldOfTheWrongKindIsCountedNotFatalOnTheRealLoop) {
  RunReal<WrongKindFieldScenario>();
}

// The same message through a typed fetcher: Next() passes it (the check
// cannot see the kind), and Fetcher::Read() turns the throw of the label's
// read into kMalformed, inside a timer callback with checking on.
TEST_F(CheckedLoopTest, AFetcherReadOfAFieldOfTheWrongKindIsMalformed) {
  auto factory = Factory();
  EventLoop* loop = factory->MakeEventLoop("node");
  auto raw = loop->MakeRawSender("/test/blob");
  ASSERT_TRUE(raw.ok()) << raw.status();
  auto sender = loop->MakeSender<Sample>("/test/blob");
  ASSERT_TRUE(sender.ok()) << sender.status();
  auto fetcher = loop->MakeFetcher<Sample>("/test/blob");
  ASSERT_TRUE(fetcher.ok()) << fetcher.status();
  capnp::MallocMessageBuilder wrong;
  wrong.initRoot<StructFirst>().initInner().setName("not text");
  kj::Array<capnp::word> flat = capnp::messageToFlatArray(wrong);
  const std::vector<capnp::word> bad(flat.begin(), flat.end());
  ReceiveStatus next[3] = {};
  ReceiveStatus read[2] = {};
  // Read() with no message held: before any Next(), after a kMalformed,
  // after Release(). fn must not run then.
  ReceiveStatus held_none[3] = {};
  int ran_without_message = 0;
  const auto count_run = [&](Sample::Reader) { ++ran_without_message; };
  bool fine = false;
  loop->AddTimer([&] {
        std::span<std::byte> slot = (*raw)->Loan();
        std::memcpy(slot.data(), bad.data(), bad.size() * sizeof(capnp::word));
        (void)(*raw)->Send(bad.size() * sizeof(capnp::word));
        auto loan = (*sender)->MakeLoan();
        loan.root().setLabel("fine");
        (void)(*sender)->Send(std::move(loan));
      })
      ->Schedule(loop->monotonic_now() + milliseconds(1));
  loop->AddTimer([&] {
        Message<Sample> m;
        held_none[0] = (*fetcher)->Read(count_run);
        for (int i = 0; i < 2; ++i) {
          next[i] = (*fetcher)->Next(&m);
          read[i] = (*fetcher)->Read([&](Sample::Reader r) {
            fine = std::strcmp(r.getLabel().cStr(), "fine") == 0;
          });
          if (i == 0) held_none[1] = (*fetcher)->Read(count_run);
        }
        (*fetcher)->Release();
        held_none[2] = (*fetcher)->Read(count_run);
        next[2] = (*fetcher)->Next(&m);
      })
      ->Schedule(loop->monotonic_now() + milliseconds(2));
  ::testing::internal::CaptureStderr();
  factory->RunFor(milliseconds(10));
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(next[0], ReceiveStatus::kOk);
  EXPECT_EQ(read[0], ReceiveStatus::kMalformed);
  EXPECT_EQ(next[1], ReceiveStatus::kOk);
  EXPECT_EQ(read[1], ReceiveStatus::kOk);
  EXPECT_TRUE(fine);
  EXPECT_EQ(next[2], ReceiveStatus::kNothingNew);
  for (const ReceiveStatus s : held_none) EXPECT_EQ(s, ReceiveStatus::kNothingNew);
  EXPECT_EQ(ran_without_message, 0);
  EXPECT_EQ((*fetcher)->malformed(), 1u);
  EXPECT_NE(log.find("channel /test/blob: skipped a malformed message"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("where text was expected"), std::string::npos) << log;
}

TEST_F(CheckedLoopTest, RealLoopCallbacksAreCheckedByDefaultInDebugBuilds) {
  UringEventLoopOptions options;
#ifdef NDEBUG
  EXPECT_FALSE(options.check_allocations);
#else
  EXPECT_TRUE(options.check_allocations);
#endif
}

class CheckedLoopDeathTest : public CheckedLoopTest {
 protected:
  // A real loop with checking on, set up by `setup`, run in a child that
  // must die of the checker's report with AllocateInACallback on its stack.
  void ExpectTheCheckerAborts(
      const std::function<void(UringEventLoop*)>& setup) {
    auto channels = transport::ChannelSet::Create(root_.options(), *stack_,
                                                  schemas_);
    ASSERT_TRUE(channels.ok()) << channels.status();
    EXPECT_DEATH(
        {
          UringEventLoopOptions options;
          options.check_allocations = true;
          auto loop = UringEventLoop::Create("node", channels->get(), options);
          if (!loop.ok()) std::abort();
          setup(loop->get());
          // A checker that let the allocation through: the child exits
          // instead of dying, and the test fails rather than hangs.
          UringEventLoop* l = loop->get();
          l->AddTimer([l] { l->Exit(); })
              ->Schedule(l->monotonic_now() + std::chrono::seconds(5));
          (*loop)->Run();
        },
        "heap allocation in a real-time scope(.|\n)*AllocateInACallback");
  }
};

TEST_F(CheckedLoopDeathTest, AnAllocatingTimerCallbackAborts) {
  ExpectTheCheckerAborts([](UringEventLoop* loop) {
    loop->AddTimer([] { AllocateInACallback(); })
        ->Schedule(loop->monotonic_now() + milliseconds(1));
  });
}

// The watcher's callback runs in a failure-path scope (for the wrong-kind
// reads above); an allocation on its success path is still fatal, with the
// allocation's own stack.
TEST_F(CheckedLoopDeathTest, AnAllocatingWatcherCallbackAborts) {
  std::unique_ptr<Sender<Scalars>> sender;  // the child's, until it dies
  ExpectTheCheckerAborts([&sender](UringEventLoop* loop) {
    auto s = loop->MakeSender<Scalars>("/test/a");
    if (!s.ok()) std::abort();
    sender = std::move(*s);
    if (!loop->MakeWatcher<Scalars>(
                  "/test/a", [](Scalars::Reader, const MessageContext&) {
                    AllocateInACallback();
                  })
             .ok()) {
      std::abort();
    }
    loop->AddTimer([&sender] {
          auto loan = sender->MakeLoan();
          (void)sender->Send(std::move(loan));
        })
        ->Schedule(loop->monotonic_now() + milliseconds(1));
  });
}

}  // namespace
}  // namespace tether::loop
