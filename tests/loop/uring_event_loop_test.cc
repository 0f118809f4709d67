// The io_uring event loop against real processes: a publisher in another
// process wakes a sleeping subscriber loop thousands of times (each wake
// backend), an idle node allocates nothing after start and stays small, and
// SIGTERM ends Run() through the stop fd.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "loop/kernel_probe.h"
#include "loop/signals.h"
#include "loop/uring_event_loop.h"
#include "shm/layout.h"
#include "tests/shm/shm_test_util.h"
#include "tests/transport/framing_test.capnp.h"
#include "tests/util/alloc_counter.h"
#include "tests/util/child_process.h"
#include "transport/channel_set.h"
#include "transport/config.h"
#include "transport/schema_registry.h"

namespace tether::loop {
namespace {

using ::tether::testing::ChildProcess;

using std::chrono::milliseconds;

constexpr char kStack[] = R"({
  "channels": [
    {"name": "/wake", "type": "tests/transport/framing_test.capnp:Scalars",
     "maxSize": 256, "queueDepth": 4096, "maxPublishers": 2, "maxPinned": 4},
    {"name": "/idle", "type": "tests/transport/framing_test.capnp:Scalars",
     "maxSize": 256, "queueDepth": 64, "maxPublishers": 2, "maxPinned": 4}
  ]
})";

class UringEventLoopTest : public ::testing::TestWithParam<WakeBackend> {
 protected:
  void SetUp() override {
    auto choice = ChooseWakeBackend(ProbeKernel(), GetParam());
    if (!choice.ok()) GTEST_SKIP() << choice.status();
    schemas_.Register<Scalars>();
    auto stack = transport::ParseStackConfig(kStack, "<test stack>",
                                               schemas_.known_types());
    ASSERT_TRUE(stack.ok()) << stack.status();
    auto set = transport::ChannelSet::Create(root_.options(), *stack, schemas_);
    ASSERT_TRUE(set.ok()) << set.status();
    channels_ = std::move(*set);
  }
  std::unique_ptr<UringEventLoop> MakeLoop(
      const StopSignals* stop_signals = nullptr) {
    UringEventLoopOptions o;
    o.port.backend = GetParam();
    o.stop_signals = stop_signals;
    auto loop = UringEventLoop::Create("node", channels_.get(), o);
    EXPECT_TRUE(loop.ok()) << loop.status();
    return loop.ok() ? std::move(*loop) : nullptr;
  }

  // A publisher on `name` through a ChannelSet of its own: its own
  // mapping of the channel's files, as another process of a stack has.
  struct OtherPublisher {
    std::unique_ptr<transport::ChannelSet> set;
    transport::ChannelHandle* channel = nullptr;
    std::unique_ptr<transport::Publisher<Scalars>> pub;
    transport::PublishStatus Send(int64_t i) {
      auto loan = pub->MakeLoan();
      loan.root().setI64(i);
      return pub->Send(std::move(loan)).status;
    }
  };
  std::unique_ptr<OtherPublisher> MakeOtherPublisher(const std::string& name) {
    auto o = std::make_unique<OtherPublisher>();
    auto stack = transport::ParseStackConfig(kStack, "<test stack>",
                                             schemas_.known_types());
    EXPECT_TRUE(stack.ok()) << stack.status();
    if (!stack.ok()) return nullptr;
    auto set = transport::ChannelSet::Create(root_.options(), *stack, schemas_);
    EXPECT_TRUE(set.ok()) << set.status();
    if (!set.ok()) return nullptr;
    o->set = std::move(*set);
    o->channel = o->set->Find(name).value();
    auto pub = transport::Publisher<Scalars>::Create(o->channel);
    EXPECT_TRUE(pub.ok()) << pub.status();
    if (!pub.ok()) return nullptr;
    o->pub = std::move(*pub);
    return o;
  }

  shm::testing::ScopedRoot root_;
  transport::SchemaRegistry schemas_;
  std::unique_ptr<transport::ChannelSet> channels_;
};

TEST_P(UringEventLoopTest, PublisherProcessWakesASleepingLoopEveryTime) {
  constexpr int kMessages = 3000;
  auto loop = MakeLoop();
  ASSERT_NE(loop, nullptr);
  int64_t expected = 0;
  int out_of_order = 0;
  uint64_t missed = 0;
  ASSERT_TRUE(loop->MakeWatcher<Scalars>(
                      "/wake",
                      [&](Scalars::Reader m, const MessageContext& c) {
                        if (m.getI64() != expected) ++out_of_order;
                        expected = m.getI64() + 1;
                        missed += c.missed;
                        if (expected == kMessages) loop->Exit();
                      })
                  .ok());
  // A deadline so that a lost wakeup fails instead of hanging.
  bool timed_out = false;
  loop->AddTimer([&] {
        timed_out = true;
        loop->Exit();
      })
      ->Schedule(loop->monotonic_now() + std::chrono::seconds(30));
  const shm::ChannelOptions opts = root_.options();
  ChildProcess child([&](const ChildProcess::Voice&) {
    transport::SchemaRegistry schemas;
    schemas.Register<Scalars>();
    auto ch = transport::ChannelHandle::Open(opts, "/wake");
    if (!ch.ok()) return 1;
    auto pub = transport::Publisher<Scalars>::Create(ch->get());
    if (!pub.ok()) return 2;
    std::mt19937 rng(7);
    ::usleep(20000);  // let the parent go to sleep first
    for (int i = 0; i < kMessages; ++i) {
      auto loan = (*pub)->MakeLoan();
      loan.root().setI64(i);
      if ((*pub)->Send(std::move(loan)).status != transport::PublishStatus::kOk) {
        return 3;
      }
      // Mostly gaps long enough for the loop to fall asleep in between.
      if (rng() % 4 != 0) ::usleep(rng() % 300);
    }
    return 0;
  });
  ASSERT_TRUE(child.started());
  loop->Run();
  EXPECT_EQ(child.ExitCode(), 0);
  EXPECT_FALSE(timed_out) << "lost wakeup: got " << expected << " of "
                          << kMessages;
  EXPECT_EQ(expected, kMessages);
  EXPECT_EQ(out_of_order, 0);
  EXPECT_EQ(missed, 0u);
}

int64_t RssKiB() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  }
  return -1;
}

TEST_P(UringEventLoopTest, IdleNodeAllocatesNothingAfterStartAndStaysSmall) {
  auto loop = MakeLoop();
  ASSERT_NE(loop, nullptr);
  auto sender = loop->MakeSender<Scalars>("/idle");
  auto fetcher = loop->MakeFetcher<Scalars>("/idle");
  ASSERT_TRUE(sender.ok() && fetcher.ok());
  int64_t got = 0;
  ASSERT_TRUE(loop->MakeWatcher<Scalars>(
                      "/idle", [&](Scalars::Reader m, const MessageContext&) {
                        got += m.getI64();
                      })
                  .ok());
  // A 1 kHz control loop that sends and fetches: steady state of a node.
  // Counted by cycles, not by time: allocations between its 50th and its
  // 200th run (a loaded machine runs late cycles once for several).
  int cycles = 0;
  std::unique_ptr<testing_util::AllocationCounter> counter;
  int64_t allocations = -1;
  loop->AddPhasedLoop(
      [&](int) {
        ++cycles;
        if (cycles == 50) {
          counter = std::make_unique<testing_util::AllocationCounter>();
        }
        auto loan = (*sender)->MakeLoan();
        loan.root().setI64(1);
        (void)(*sender)->Send(std::move(loan));
        transport::Message<Scalars> m;
        (void)(*fetcher)->Latest(&m);
        if (cycles == 200) {
          allocations = counter->count();
          loop->Exit();
        }
      },
      milliseconds(1));
  // A bound for a loop that hangs, not a measure.
  loop->AddTimer([&] { loop->Exit(); })
      ->Schedule(loop->monotonic_now() + std::chrono::seconds(30));
  loop->Run();
  counter.reset();
  EXPECT_EQ(cycles, 200);
  EXPECT_EQ(allocations, 0);
  EXPECT_GT(got, 0);
  const int64_t rss = RssKiB();
  std::printf("RSS of the test process with an idle node: %lld KiB\n",
              static_cast<long long>(rss));
#if !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
  EXPECT_LT(rss, 16 * 1024);  // sanitizer runtimes inflate the process
#endif
}

TEST_P(UringEventLoopTest, StopSignalEndsRunCleanly) {
  auto stop = StopSignals::Install();
  ASSERT_TRUE(stop.ok()) << stop.status();
  auto loop = MakeLoop(stop->get());
  ASSERT_NE(loop, nullptr);
  loop->AddTimer([] { ::kill(::getpid(), SIGTERM); })
      ->Schedule(loop->monotonic_now() + milliseconds(5));
  bool late = false;
  loop->AddTimer([&] {
        late = true;
        loop->Exit();
      })
      ->Schedule(loop->monotonic_now() + std::chrono::seconds(10));
  EXPECT_TRUE(loop->Run());
  EXPECT_FALSE(late);
  EXPECT_EQ((*stop)->received(), SIGTERM);
  loop.reset();  // stops watching the word before StopSignals goes
}

std::string BackendName(const ::testing::TestParamInfo<WakeBackend>& info) {
  return info.param == WakeBackend::kUringFutex ? "UringFutex" : "FutexWaitv";
}

// A sender or fetcher must die before its loop: a loop destroyed first
// aborts at once, naming the endpoint's channel, rather than leave it to
// crash in its next Send() or read (which call into the loop). The loop's
// own watchers are readers too, and never count.
TEST_P(UringEventLoopTest, DestroyingTheLoopBeforeItsSenderAbortsNamingIt) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        auto loop = MakeLoop();
        auto sender = loop->MakeSender<Scalars>("/idle");
        auto raw = loop->MakeRawSender("/wake");
        raw->reset();  // gone in time: not counted
        loop.reset();
      },
      "event loop \"node\" destroyed while senders \\(1 on /idle\\) it "
      "made still exist");
  EXPECT_DEATH(
      {
        auto loop = MakeLoop();
        (void)loop->MakeWatcher<Scalars>(
            "/idle", [](Scalars::Reader, const MessageContext&) {});
        auto fetcher = loop->MakeFetcher<Scalars>("/idle");
        auto raw = loop->MakeRawFetcher("/wake");
        auto sender = loop->MakeRawSender("/wake");
        loop.reset();
      },
      "destroyed while senders \\(1 on /wake\\) and fetchers \\(1 on "
      "/idle, 1 on /wake\\) it made still exist: destroy every sender and "
      "fetcher");
  // In order, nothing is said, watchers or not.
  auto loop = MakeLoop();
  ASSERT_NE(loop, nullptr);
  (void)loop->MakeWatcher<Scalars>(
            "/idle", [](Scalars::Reader, const MessageContext&) {});
  auto sender = loop->MakeSender<Scalars>("/idle");
  ASSERT_TRUE(sender.ok());
  auto fetcher = loop->MakeFetcher<Scalars>("/wake");
  ASSERT_TRUE(fetcher.ok());
  sender->reset();
  fetcher->reset();
  loop.reset();
}

// A forked process's own loop on this test's stack: its own ChannelSet
// (a Channel opened before the fork would register the parent's pid).
struct ChildLoop {
  transport::SchemaRegistry schemas;
  std::unique_ptr<transport::ChannelSet> channels;
  std::unique_ptr<UringEventLoop> loop;
};
std::unique_ptr<ChildLoop> MakeChildLoop(const shm::ChannelOptions& options,
                                         WakeBackend backend) {
  auto c = std::make_unique<ChildLoop>();
  c->schemas.Register<Scalars>();
  auto stack = transport::ParseStackConfig(kStack, "<test stack>",
                                           c->schemas.known_types());
  if (!stack.ok()) return nullptr;
  auto set = transport::ChannelSet::Create(options, *stack, c->schemas);
  if (!set.ok()) return nullptr;
  c->channels = std::move(*set);
  UringEventLoopOptions o;
  o.port.backend = backend;
  auto loop = UringEventLoop::Create("child", c->channels.get(), o);
  if (!loop.ok()) return nullptr;
  c->loop = std::move(*loop);
  return c;
}

// The start-up handshake across processes: the sender's first message
// waits (OnReaders) for the other process's watcher, so that watcher sees
// it; Peers() counts both sides meanwhile.
TEST_P(UringEventLoopTest, OnReadersHandshakeDeliversTheFirstMessage) {
  const shm::ChannelOptions opts = root_.options();
  ChildProcess child([&](const ChildProcess::Voice&) {
    ::usleep(50000);  // the parent is waiting by then
    std::unique_ptr<ChildLoop> c = MakeChildLoop(opts, GetParam());
    if (c == nullptr) return 10;
    int got = -1;
    UringEventLoop* l = c->loop.get();
    auto w = l->MakeWatcher<Scalars>(
        "/idle", [&](Scalars::Reader m, const MessageContext&) {
          got = m.getU8();
          l->Exit();
        });
    if (!w.ok()) return 11;
    l->AddTimer([l] { l->Exit(); })
        ->Schedule(l->monotonic_now() + std::chrono::seconds(20));
    l->Run();
    return got == 7 ? 0 : 12;
  });
  ASSERT_TRUE(child.started());
  auto loop = MakeLoop();
  ASSERT_NE(loop, nullptr);
  auto sender = loop->MakeSender<Scalars>("/idle");
  ASSERT_TRUE(sender.ok()) << sender.status();
  auto before = loop->Peers("/idle");
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_EQ(before->publishers, 1);
  EXPECT_EQ(before->readers, 0);
  bool sent = false;
  ASSERT_TRUE(loop->OnReaders("/idle", 1, [&] {
                    auto peers = loop->Peers("/idle");
                    EXPECT_TRUE(peers.ok() && peers->readers == 1);
                    auto loan = (*sender)->MakeLoan();
                    loan.root().setU8(7);
                    sent = (*sender)->Send(std::move(loan)).ok();
                    loop->Exit();
                  }).ok());
  loop->AddTimer([&] { loop->Exit(); })
      ->Schedule(loop->monotonic_now() + std::chrono::seconds(20));
  loop->Run();
  EXPECT_TRUE(sent) << "OnReaders never saw the other process's watcher";
  EXPECT_EQ(child.ExitCode(), 0)
      << "the child's watcher did not get the first message";
  EXPECT_EQ(loop->Peers("/nope").status().code(),
            absl::StatusCode::kNotFound);
}

// A peer killed with SIGKILL: Peers() (a snapshot of the registries)
// counts it until a sweep; LivePeers() sweeps first and does not.
TEST_P(UringEventLoopTest, LivePeersStopsCountingAKilledReader) {
  const shm::ChannelOptions opts = root_.options();
  ChildProcess child([&](const ChildProcess::Voice& voice) {
    std::unique_ptr<ChildLoop> c = MakeChildLoop(opts, GetParam());
    if (c == nullptr) return 10;
    auto w = c->loop->MakeWatcher<Scalars>(
        "/idle", [](Scalars::Reader, const MessageContext&) {});
    if (!w.ok()) return 11;
    if (!voice.Say()) return 12;
    for (;;) ::pause();
  });
  ASSERT_TRUE(child.Heard().has_value())
      << "the child failed at step " << child.ExitCode();
  auto loop = MakeLoop();
  ASSERT_NE(loop, nullptr);
  auto alive = loop->Peers("/idle");
  ASSERT_TRUE(alive.ok()) << alive.status();
  EXPECT_EQ(alive->readers, 1);
  ASSERT_TRUE(child.Kill(SIGKILL));
  EXPECT_EQ(child.ExitCode(), -1);
  auto snapshot = loop->Peers("/idle");
  ASSERT_TRUE(snapshot.ok());
  EXPECT_EQ(snapshot->readers, 1) << "a snapshot does not sweep";
  auto live = loop->LivePeers("/idle");
  ASSERT_TRUE(live.ok()) << live.status();
  EXPECT_EQ(live->readers, 0);
  EXPECT_EQ(loop->LivePeers("/nope").status().code(),
            absl::StatusCode::kNotFound);
}

// A reader with write access truncates the reader-state file while a
// watcher's callback reads a pinned message in place, and a publisher (its
// own mapping, as another process has) sends on. Nothing stops: the
// publisher's sends succeed, the watcher gets what came after, counts what
// was lost, and the loop says once, in words, why the message it was
// reading was overwritten.
TEST_P(UringEventLoopTest, AReaderStateTruncatedUnderAWatcherStopsNothing) {
  constexpr int kMessages = 200;
  std::unique_ptr<OtherPublisher> other = MakeOtherPublisher("/idle");
  ASSERT_NE(other, nullptr);
  const auto send = [&](int64_t i) { return other->Send(i); };
  auto loop = MakeLoop();
  ASSERT_NE(loop, nullptr);
  int64_t last = -1;
  uint64_t received = 0, missed = 0;
  int failed_sends = 0;
  auto watcher = loop->MakeWatcher<Scalars>(
      "/idle", [&](Scalars::Reader m, const MessageContext& c) {
        ++received;
        missed += c.missed;
        last = m.getI64();
        if (last == 0) {
          // The attacker, then every other message, while this one is read.
          EXPECT_EQ(::truncate(
                        channels_->Find("/idle").value()->reader_state_path()
                            .c_str(),
                        0),
                    0);
          for (int i = 1; i < kMessages; ++i) {
            failed_sends += send(i) != transport::PublishStatus::kOk;
          }
        }
        if (last == kMessages - 1) loop->Exit();
      });
  ASSERT_TRUE(watcher.ok()) << watcher.status();
  loop->AddTimer([&] { loop->Exit(); })
      ->Schedule(loop->monotonic_now() + std::chrono::seconds(10));
  loop->OnRun([&] { EXPECT_EQ(send(0), transport::PublishStatus::kOk); });
  ::testing::internal::CaptureStderr();
  loop->Run();
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(failed_sends, 0);
  EXPECT_EQ(last, kMessages - 1) << said;
  EXPECT_EQ(received + missed, static_cast<uint64_t>(kMessages));
  const WatcherStats& stats = (*watcher)->stats();
  EXPECT_FALSE(stats.corrupt);
  EXPECT_EQ(stats.overwritten_while_read, 1u);
  EXPECT_NE(said.find("truncated or grew it, so pins are no longer shared"),
            std::string::npos)
      << said;
  EXPECT_TRUE(other->channel->reader_state_lost());
  EXPECT_TRUE(channels_->Find("/idle").value()->reader_state_lost());
  other->pub.reset();
}

// The documented residual gap, made harmless: the reader-state file is
// truncated and grown back, and only this loop's process touched it in
// between, so this process goes private while the publisher (here a
// second mapping; another process in a stack) shares the fresh, zeroed
// file and never sees this loop's wake announcements. The loop must not
// sleep through the messages: it polls, and says why once.
TEST_P(UringEventLoopTest, ALoopThatLostItsReaderStatePollsInsteadOfHanging) {
  constexpr int kMessages = 50;
  std::unique_ptr<OtherPublisher> other = MakeOtherPublisher("/idle");
  ASSERT_NE(other, nullptr);
  auto loop = MakeLoop();
  ASSERT_NE(loop, nullptr);
  int64_t last = -1;
  auto watcher = loop->MakeWatcher<Scalars>(
      "/idle", [&](Scalars::Reader m, const MessageContext&) {
        last = m.getI64();
        if (last == kMessages - 1) loop->Exit();
      });
  ASSERT_TRUE(watcher.ok()) << watcher.status();
  transport::ChannelHandle* mine = channels_->Find("/idle").value();
  const std::string state = mine->reader_state_path();
  struct stat st;
  ASSERT_EQ(::stat(state.c_str(), &st), 0);
  ASSERT_EQ(::truncate(state.c_str(), 0), 0);
  (void)mine->stats();  // this process touches it: SIGBUS, absorbed
  ASSERT_EQ(::truncate(state.c_str(), st.st_size), 0);
  EXPECT_TRUE(mine->reader_state_lost());
  EXPECT_FALSE(other->channel->reader_state_lost());
  // Only a far safety timer: nothing else would wake a loop that hangs.
  loop->AddTimer([&] { loop->Exit(); })
      ->Schedule(loop->monotonic_now() + std::chrono::seconds(20));
  std::thread sender([&] {
    for (int i = 0; i < kMessages; ++i) {
      std::this_thread::sleep_for(milliseconds(1));
      EXPECT_EQ(other->Send(i), transport::PublishStatus::kOk);
    }
  });
  ::testing::internal::CaptureStderr();
  loop->Run();
  const std::string said = ::testing::internal::GetCapturedStderr();
  sender.join();
  EXPECT_EQ(last, kMessages - 1) << "the loop slept through the messages";
  EXPECT_NE(said.find("no longer shares pins and wake announcements there"),
            std::string::npos)
      << said;
  other->pub.reset();
}

// A writer of the reader-state file keeps clearing the sleeper mask, so
// publishers never see this loop asleep and never wake it. The loop, which
// has no timer, still gets every message, the first one through its
// lost-wake check (kLostWakeCheck; without it the loop sleeps until the
// 20 s safety timer), and says once what happened.
TEST_P(UringEventLoopTest, ALoopWhoseWakeAnnouncementIsClearedStillGetsAll) {
  constexpr int kMessages = 8;
  std::unique_ptr<OtherPublisher> other = MakeOtherPublisher("/idle");
  ASSERT_NE(other, nullptr);
  auto loop = MakeLoop();
  ASSERT_NE(loop, nullptr);
  int64_t last = -1;
  uint64_t received = 0, missed = 0;
  auto watcher = loop->MakeWatcher<Scalars>(
      "/idle", [&](Scalars::Reader m, const MessageContext& c) {
        ++received;
        missed += c.missed;
        last = m.getI64();
        if (last == kMessages - 1) loop->Exit();
      });
  ASSERT_TRUE(watcher.ok()) << watcher.status();
  const std::string state =
      channels_->Find("/idle").value()->reader_state_path();
  std::atomic<bool> done{false};
  std::thread attacker([&] {
    const int fd = ::open(state.c_str(), O_WRONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    const char zeros[12] = {};  // sleeper_mask and anonymous_sleepers
    while (!done.load()) {
      (void)!::pwrite(fd, zeros, sizeof(zeros),
                      offsetof(shm::internal::ReaderStateHeader, sleeper_mask));
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    ::close(fd);
  });
  std::thread sender([&] {
    for (int i = 0; i < kMessages; ++i) {
      std::this_thread::sleep_for(milliseconds(100));
      EXPECT_EQ(other->Send(i), transport::PublishStatus::kOk);
    }
  });
  // Only a far safety timer: nothing else would wake a loop that hangs.
  loop->AddTimer([&] { loop->Exit(); })
      ->Schedule(loop->monotonic_now() + std::chrono::seconds(20));
  ::testing::internal::CaptureStderr();
  loop->Run();
  const std::string said = ::testing::internal::GetCapturedStderr();
  done = true;
  sender.join();
  attacker.join();
  EXPECT_EQ(last, kMessages - 1) << "the loop slept through the messages";
  EXPECT_EQ(received + missed, static_cast<uint64_t>(kMessages));
  EXPECT_NE(said.find("cleared this loop's wake announcement"),
            std::string::npos)
      << said;
  other->pub.reset();
}

INSTANTIATE_TEST_SUITE_P(EachBackend, UringEventLoopTest,
                         ::testing::Values(WakeBackend::kUringFutex,
                                           WakeBackend::kFutexWaitv),
                         BackendName);

}  // namespace
}  // namespace tether::loop
