// Every wake port backend (forced), against real channels written by another
// process: no lost and no duplicate wakeups under random gaps (the
// publisher often waits for the loop to acknowledge its last message, so a
// lost wakeup shows as a hang, caught by timeouts), several channels in one
// port, Wake() from other threads, deadlines, Unwatch and fd watches.
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "loop/clock.h"
#include "loop/futex_waitv_port.h"
#include "loop/kernel_probe.h"
#include "loop/make_wake_port.h"
#include "loop/uring_futex_port.h"
#include "loop/wake_port.h"
#include "shm/channel.h"
#include "shm/futex.h"
#include "shm/publisher.h"
#include "shm/reader.h"
#include "tests/loop/loop_test_util.h"
#include "tests/loop/port_configs.h"

namespace tether::loop {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::ChannelSleepHooks;
using testing::MakeShared;
using testing::ScopedRoot;
using testing::Subscription;

using testing::Features;
using testing::PortConfig;

class WakePortTest : public ::testing::TestWithParam<PortConfig> {
 protected:
  // False (with skip_ set) when this kernel lacks the backend.
  bool Supported() {
    skip_ = testing::UnsupportedReason(GetParam());
    return skip_.empty();
  }

  // The forced backend (nullptr after a test failure).
  std::unique_ptr<WakePort> MakePort(int max_watches = 16) {
    absl::StatusOr<std::unique_ptr<WakePort>> port =
        testing::MakeConfiguredPort(GetParam(), max_watches);
    if (!port.ok()) {
      ADD_FAILURE() << port.status();
      return nullptr;
    }
    EXPECT_EQ((*port)->backend(), GetParam().backend);
    EXPECT_NE((*port)->description().find(WakeBackendName(GetParam().backend)),
              std::string::npos)
        << (*port)->description();
    return std::move(*port);
  }

  void RunProcessTest(int channels, uint64_t count);

  std::string skip_;
};

#define SKIP_UNLESS_SUPPORTED() \
  if (!Supported()) GTEST_SKIP() << skip_

// --- publisher process ---------------------------------------------------------

constexpr int kMaxChannels = 4;

struct Board {
  std::atomic<int> go{0};
  std::atomic<uint64_t> acked{0};  // messages the loop has received, all channels
  std::atomic<int> error{0};
  char error_text[256] = {};
};

struct Payload {
  uint64_t sequence;  // over all channels
  uint32_t channel;
  uint32_t per_channel;  // n-th message on this channel
};

void Fail(Board* board, const char* text) {
  if (board->error.exchange(1) == 0) {
    std::snprintf(board->error_text, sizeof(board->error_text), "%s", text);
  }
}

void SleepNs(int64_t ns) {
  if (ns <= 0) return;
  if (ns < 30'000) {  // short gaps: spin, so the loop is caught mid-protocol
    const MonotonicTime end = MonotonicNow() + Duration(ns);
    while (MonotonicNow() < end) {
    }
    return;
  }
  timespec ts = {0, static_cast<long>(ns)};
  ::nanosleep(&ts, nullptr);
}

// Sends `count` messages spread at random over `channels`, with random gaps
// of 0..200 us; after about 40% of them waits until the loop acknowledged
// everything so far (5 s, else a lost wakeup). Runs in a forked child.
int PublisherMain(const shm::ChannelOptions& options, int channels,
                  uint64_t count, Board* board, uint32_t seed) {
  std::vector<std::unique_ptr<shm::Channel>> opened;
  std::vector<std::unique_ptr<shm::Publisher>> publishers;
  for (int c = 0; c < channels; ++c) {
    auto channel = shm::Channel::Open(options, "wake" + std::to_string(c));
    if (!channel.ok()) {
      Fail(board, "child: Channel::Open failed");
      return 1;
    }
    auto publisher = shm::Publisher::Create(channel->get());
    if (!publisher.ok()) {
      Fail(board, "child: Publisher::Create failed");
      return 1;
    }
    opened.push_back(std::move(*channel));
    publishers.push_back(std::move(*publisher));
  }
  while (board->go.load() == 0) ::usleep(100);
  std::mt19937 rng(seed);
  std::vector<uint32_t> per_channel(channels, 0);
  for (uint64_t i = 0; i < count; ++i) {
    const uint32_t c = static_cast<uint32_t>(rng() % channels);
    Payload payload{i, c, per_channel[c]++};
    std::span<std::byte> loan = publishers[c]->Loan();
    if (loan.size() < sizeof(payload)) {
      Fail(board, "child: no loan");
      return 1;
    }
    std::memcpy(loan.data(), &payload, sizeof(payload));
    if (publishers[c]->Send(sizeof(payload)).status != shm::SendStatus::kOk) {
      Fail(board, "child: send failed");
      return 1;
    }
    if (rng() % 100 < 40) {
      const MonotonicTime give_up = MonotonicNow() + seconds(5);
      while (board->acked.load(std::memory_order_acquire) < i + 1) {
        if (MonotonicNow() > give_up) {
          char text[128];
          std::snprintf(text, sizeof(text),
                        "lost wakeup: message %llu not received within 5 s",
                        static_cast<unsigned long long>(i));
          Fail(board, text);
          return 1;
        }
        SleepNs(rng() % 3 == 0 ? 0 : 20'000);
      }
    }
    SleepNs(static_cast<int64_t>(rng() % 200'000));
  }
  return 0;
}

// Runs a loop on `channels` channels (one port, one watch each) until
// `count` messages arrived; checks order, no duplicates, no loss, and that
// no 2 s wait timed out over a message sent long before (a lost wakeup).
void WakePortTest::RunProcessTest(int channels, uint64_t count) {
  ScopedRoot root;
  const shm::QueueParams params{.slot_size = 64, .queue_depth = 4096,
                                .max_publishers = 2, .max_pinned = 2};
  std::vector<std::unique_ptr<shm::Channel>> chans;
  std::vector<std::unique_ptr<shm::Reader>> readers;
  std::vector<std::unique_ptr<Subscription>> subs;
  ChannelSleepHooks hooks;
  for (int c = 0; c < channels; ++c) {
    auto channel = shm::Channel::OpenOrCreate(root.options(),
                                              "wake" + std::to_string(c), params);
    ASSERT_TRUE(channel.ok()) << channel.status();
    auto reader = shm::Reader::Create(channel->get());
    ASSERT_TRUE(reader.ok()) << reader.status();
    subs.push_back(std::make_unique<Subscription>(channel->get(), reader->get()));
    hooks.Add(subs.back().get());
    chans.push_back(std::move(*channel));
    readers.push_back(std::move(*reader));
  }
  Board* board = MakeShared<Board>();
  ASSERT_NE(board, nullptr);

  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::_exit(PublisherMain(root.options(), channels, count, board,
                          static_cast<uint32_t>(::getpid())));
  }
  // The port (and a futex_waitv helper) only after fork: the child stays a
  // single-threaded copy.
  std::unique_ptr<WakePort> port = MakePort();
  if (port == nullptr) {
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    return;
  }
  for (int c = 0; c < channels; ++c) {
    ASSERT_TRUE(port->Watch(chans[c]->wake_word(), 100 + c).ok());
  }
  board->go.store(1);

  std::vector<uint32_t> expected_per_channel(channels, 0);
  uint64_t received = 0;
  int lost = 0;
  int blocked_wakes = 0;
  std::string failure;
  bool child_done = false;
  int child_status = 0;
  const MonotonicTime give_up = MonotonicNow() + seconds(90);
  std::vector<bool> reported(channels, false);
  while (received < count && failure.empty() && board->error.load() == 0 &&
         MonotonicNow() < give_up) {
    std::fill(reported.begin(), reported.end(), false);
    const WaitResult r = port->Wait(
        MonotonicNow() + seconds(2), hooks, [&](uint64_t cookie) {
          if (cookie < 100 || cookie >= 100u + channels) {
            failure = "on_ready reported an unknown cookie";
            return;
          }
          if (reported[cookie - 100]) failure = "a cookie reported twice";
          reported[cookie - 100] = true;
        });
    if (r.ready > 0 && !r.spun && !r.pending_work) ++blocked_wakes;
    for (int c = 0; c < channels; ++c) {
      Subscription& sub = *subs[c];
      if (!reported[c] && !sub.has_pending()) continue;
      shm::MessageView view;
      while (sub.Next(&view) == shm::ReadStatus::kOk) {
        Payload p;
        std::memcpy(&p, view.data.data(), sizeof(p));
        if (p.channel != static_cast<uint32_t>(c) ||
            p.per_channel != expected_per_channel[c] || view.missed != 0) {
          failure = "message out of order, duplicated or lost on channel " +
                    std::to_string(c) + ": got #" +
                    std::to_string(p.per_channel) + ", expected #" +
                    std::to_string(expected_per_channel[c]);
          break;
        }
        ++expected_per_channel[c];
        if (r.timed_out &&
            MonotonicNow() - FromMonotonicNs(view.monotonic_send_ns) >
                seconds(1)) {
          ++lost;  // it waited through a whole timeout: nobody woke us
        }
        ++received;
        board->acked.store(received, std::memory_order_release);
      }
      if (sub.corrupt()) failure = "corrupt channel";
    }
    if (r.timed_out && !child_done) {
      child_done = ::waitpid(child, &child_status, WNOHANG) == child;
      if (child_done && received < count) failure = "the publisher died";
    }
  }
  if (!child_done) {
    ASSERT_EQ(::waitpid(child, &child_status, 0), child);
  }
  EXPECT_EQ(failure, "");
  EXPECT_EQ(board->error.load(), 0) << board->error_text;
  EXPECT_TRUE(WIFEXITED(child_status) && WEXITSTATUS(child_status) == 0)
      << "publisher status " << child_status;
  EXPECT_EQ(received, count);
  EXPECT_EQ(lost, 0) << "waits that timed out although a message waited";
  // The loop really slept and was woken many times (the test is not vacuous).
  EXPECT_GT(blocked_wakes, static_cast<int>(count / 20));
  for (int c = 0; c < channels; ++c) port->Unwatch(100 + c);
}

TEST_P(WakePortTest, NoLostOrDuplicateWakeupsFromAPublisherProcess) {
  SKIP_UNLESS_SUPPORTED();
  RunProcessTest(/*channels=*/1, /*count=*/3000);
}

TEST_P(WakePortTest, SeveralChannelsInOnePortReportTheRightCookies) {
  SKIP_UNLESS_SUPPORTED();
  RunProcessTest(/*channels=*/3, /*count=*/3000);
}

// --- Wake() ---------------------------------------------------------------------

TEST_P(WakePortTest, WakeBeforeWaitMakesTheNextWaitReturnAtOnce) {
  SKIP_UNLESS_SUPPORTED();
  std::unique_ptr<WakePort> port = MakePort();
  ASSERT_NE(port, nullptr);
  NoSleepHooks hooks;
  port->Wake();
  const MonotonicTime start = MonotonicNow();
  const WaitResult r =
      port->Wait(start + seconds(5), hooks, [](uint64_t) {});
  EXPECT_TRUE(r.woken);
  EXPECT_FALSE(r.timed_out);
  EXPECT_LT(MonotonicNow() - start, seconds(1));
  // Consumed: the next wait times out (a lost-wake check may end it first).
  const MonotonicTime deadline = MonotonicNow() + milliseconds(20);
  WaitResult again;
  do {
    again = port->Wait(deadline, hooks, [](uint64_t) {});
    EXPECT_FALSE(again.woken);
  } while (again.checked && !again.timed_out);
  EXPECT_TRUE(again.timed_out);
}

TEST_P(WakePortTest, WakeFromAnotherThreadIsNeverLost) {
  SKIP_UNLESS_SUPPORTED();
  std::unique_ptr<WakePort> port = MakePort();
  ASSERT_NE(port, nullptr);
  constexpr int kRounds = 2000;
  std::atomic<int> requested{0};
  std::atomic<int> seen{0};
  std::atomic<bool> waker_failed{false};
  std::thread waker([&] {
    std::mt19937 rng(7);
    for (int i = 1; i <= kRounds; ++i) {
      requested.store(i);
      if (rng() % 2 == 0) SleepNs(rng() % 50'000);
      port->Wake();
      // A wake that takes a whole second was lost and found by a timeout.
      const MonotonicTime give_up = MonotonicNow() + seconds(1);
      while (seen.load() < i) {
        if (MonotonicNow() > give_up) {
          waker_failed.store(true);
          return;
        }
        std::this_thread::yield();
      }
    }
  });
  NoSleepHooks hooks;
  int timeouts = 0;
  while (seen.load() < kRounds && !waker_failed.load() && timeouts < 3) {
    const WaitResult r =
        port->Wait(MonotonicNow() + seconds(2), hooks, [](uint64_t) {});
    if (r.woken) seen.store(requested.load());
    if (r.timed_out && !r.woken) ++timeouts;
  }
  waker.join();
  EXPECT_FALSE(waker_failed.load()) << "a Wake() was lost";
  EXPECT_EQ(seen.load(), kRounds);
  EXPECT_EQ(timeouts, 0);
}

// --- deadlines --------------------------------------------------------------------

TEST_P(WakePortTest, DeadlinesFireOnTime) {
  SKIP_UNLESS_SUPPORTED();
  std::unique_ptr<WakePort> port = MakePort();
  ASSERT_NE(port, nullptr);
  std::atomic<uint32_t> word{0};
  ASSERT_TRUE(port->Watch(&word, 1).ok());
  NoSleepHooks hooks;
  for (int i = 0; i < 5; ++i) {
    const MonotonicTime deadline = MonotonicNow() + milliseconds(30);
    int ready = 0;
    WaitResult r;
    // Spurious returns are allowed; loop until the deadline.
    do {
      r = port->Wait(deadline, hooks, [&](uint64_t) { ++ready; });
    } while (!r.timed_out);
    const MonotonicTime now = MonotonicNow();
    EXPECT_GE(now, deadline);
    // A bound for a lost timeout, not a measure of lateness (a loaded
    // machine runs the thread late).
    EXPECT_LT(now - deadline, milliseconds(2000)) << "woke far too late";
    EXPECT_EQ(ready, 0);
  }
  // A deadline in the past polls and returns at once.
  const MonotonicTime start = MonotonicNow();
  const WaitResult r =
      port->Wait(start - milliseconds(1), hooks, [](uint64_t) {});
  EXPECT_TRUE(r.timed_out);
  EXPECT_LT(MonotonicNow() - start, milliseconds(2000));
  port->Unwatch(1);
}

// --- watches ------------------------------------------------------------------------

// Bumps `word` and FUTEX_WAKEs it from another thread after `delay`.
std::thread BumpLater(std::atomic<uint32_t>* word, milliseconds delay) {
  return std::thread([word, delay] {
    std::this_thread::sleep_for(delay);
    word->fetch_add(1);
    shm::FutexWake(word);
  });
}

TEST_P(WakePortTest, ReportsTheWatchedWordThatChangedAndNotAnUnwatchedOne) {
  SKIP_UNLESS_SUPPORTED();
  std::unique_ptr<WakePort> port = MakePort();
  ASSERT_NE(port, nullptr);
  std::atomic<uint32_t> a{0};
  std::atomic<uint32_t> b{0};
  ASSERT_TRUE(port->Watch(&a, 1).ok());
  ASSERT_TRUE(port->Watch(&b, 2).ok());
  NoSleepHooks hooks;
  // Arm both (a short wait), then drop `a`.
  (void)port->Wait(MonotonicNow() + milliseconds(5), hooks, [](uint64_t) {});
  port->Unwatch(1);

  std::vector<uint64_t> cookies;
  std::thread bump_a = BumpLater(&a, milliseconds(10));
  const MonotonicTime deadline = MonotonicNow() + milliseconds(150);
  while (MonotonicNow() < deadline) {
    (void)port->Wait(deadline, hooks,
                     [&](uint64_t c) { cookies.push_back(c); });
  }
  bump_a.join();
  EXPECT_TRUE(cookies.empty()) << "an unwatched word was reported";

  std::thread bump_b = BumpLater(&b, milliseconds(10));
  const MonotonicTime give_up = MonotonicNow() + seconds(5);
  while (cookies.empty() && MonotonicNow() < give_up) {
    (void)port->Wait(give_up, hooks, [&](uint64_t c) { cookies.push_back(c); });
  }
  bump_b.join();
  ASSERT_EQ(cookies.size(), 1u);
  EXPECT_EQ(cookies[0], 2u);
  port->Unwatch(2);
}

// A sleep scans only the slots up to the highest one in use (live_end):
// watches freed at the end and in the middle, and new ones that reuse the
// holes, must all still be armed and reported.
TEST_P(WakePortTest, WatchesThatReuseFreedSlotsAreStillReported) {
  SKIP_UNLESS_SUPPORTED();
  std::unique_ptr<WakePort> port = MakePort();
  ASSERT_NE(port, nullptr);
  std::atomic<uint32_t> words[5] = {};
  for (uint64_t c = 1; c <= 3; ++c) {
    ASSERT_TRUE(port->Watch(&words[c - 1], c).ok());
  }
  NoSleepHooks hooks;
  (void)port->Wait(MonotonicNow() + milliseconds(5), hooks, [](uint64_t) {});
  port->Unwatch(3);  // the last slot: the scanned range shrinks
  port->Unwatch(2);
  ASSERT_TRUE(port->Watch(&words[3], 4).ok());  // takes slot 1 again
  port->Unwatch(1);                             // a hole before it
  ASSERT_TRUE(port->Watch(&words[4], 5).ok());  // takes slot 0 again

  // Reports may be spurious (a spinning port reports a word that moved
  // before the last blocking sleep again), so wait for the one expected and
  // accept only watched cookies.
  // The word is bumped every 10 ms until seen: with no hooks to re-check,
  // a bump that lands before a sleep loads the words is taken as the value
  // to sleep on (by design), so one bump could be absorbed on a slow machine.
  const auto reported = [&](std::atomic<uint32_t>* word, uint64_t cookie) {
    std::atomic<bool> seen{false};
    std::thread bump([&] {
      while (!seen.load()) {
        std::this_thread::sleep_for(milliseconds(10));
        word->fetch_add(1);
        shm::FutexWake(word);
      }
    });
    const MonotonicTime give_up = MonotonicNow() + seconds(5);
    while (!seen.load() && MonotonicNow() < give_up) {
      (void)port->Wait(give_up, hooks, [&](uint64_t c) {
        EXPECT_TRUE(c == 4 || c == 5) << "reported unwatched cookie " << c;
        if (c == cookie) seen.store(true);
      });
    }
    const bool found = seen.load();
    seen.store(true);  // stops the bumps either way
    bump.join();
    return found;
  };
  EXPECT_TRUE(reported(&words[3], 4));
  EXPECT_TRUE(reported(&words[4], 5));
  port->Unwatch(4);
  port->Unwatch(5);
}

// A publisher that commits right after the loop's re-check: it bumps the
// word (after the port loaded it) and, seeing a sleeper, FUTEX_WAKEs. The
// sleep that follows must end at once.
class CommitAfterRecheckHooks : public SleepHooks {
 public:
  CommitAfterRecheckHooks(std::atomic<uint32_t>* word, bool futex_wake)
      : word_(word), futex_wake_(futex_wake) {}
  void BeginSleep() override {}
  bool HasPendingWork() override {
    if (!committed_) {
      committed_ = true;
      word_->fetch_add(1);
      if (futex_wake_) shm::FutexWake(word_);
    }
    return false;
  }
  void EndSleep() override {}

 private:
  std::atomic<uint32_t>* const word_;
  const bool futex_wake_;
  bool committed_ = false;
};

TEST_P(WakePortTest, ACommitBetweenTheRecheckAndTheSleepIsNotLost) {
  SKIP_UNLESS_SUPPORTED();
  std::unique_ptr<WakePort> port = MakePort();
  ASSERT_NE(port, nullptr);
  std::atomic<uint32_t> word{5};
  ASSERT_TRUE(port->Watch(&word, 9).ok());
  for (int round = 0; round < 50; ++round) {
    CommitAfterRecheckHooks hooks(&word, /*futex_wake=*/true);
    int ready = 0;
    const MonotonicTime start = MonotonicNow();
    const MonotonicTime give_up = start + seconds(5);
    while (ready == 0 && MonotonicNow() < give_up) {
      (void)port->Wait(give_up, hooks, [&](uint64_t c) {
        EXPECT_EQ(c, 9u);
        ++ready;
      });
    }
    ASSERT_EQ(ready, 1) << "round " << round;
    EXPECT_LT(MonotonicNow() - start, seconds(1)) << "round " << round;
  }
  port->Unwatch(9);
}

TEST_P(WakePortTest, PendingWorkFoundByTheRecheckSkipsTheSleep) {
  SKIP_UNLESS_SUPPORTED();
  std::unique_ptr<WakePort> port = MakePort();
  ASSERT_NE(port, nullptr);
  struct Hooks : SleepHooks {
    int begins = 0, ends = 0;
    void BeginSleep() override { ++begins; }
    bool HasPendingWork() override { return true; }
    void EndSleep() override { ++ends; }
  } hooks;
  const MonotonicTime start = MonotonicNow();
  const WaitResult r = port->Wait(start + seconds(5), hooks, [](uint64_t) {});
  EXPECT_TRUE(r.pending_work);
  EXPECT_LT(MonotonicNow() - start, seconds(1));
  EXPECT_EQ(hooks.begins, 1);
  EXPECT_EQ(hooks.ends, 1);
}

TEST_P(WakePortTest, ReadableFdIsReported) {
  SKIP_UNLESS_SUPPORTED();
  std::unique_ptr<WakePort> port = MakePort();
  ASSERT_NE(port, nullptr);
  const int fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  ASSERT_GE(fd, 0);
  if (GetParam().backend == WakeBackend::kFutexWaitv) {
    // futex_waitv waits on words only, and says so.
    const absl::Status s = port->WatchFd(fd, 77);
    EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
    ::close(fd);
    return;
  }
  ASSERT_TRUE(port->WatchFd(fd, 77).ok());
  NoSleepHooks hooks;
  const WaitResult quiet =
      port->Wait(MonotonicNow() + milliseconds(20), hooks, [](uint64_t c) {
        ADD_FAILURE() << "reported " << c << " before the fd was readable";
      });
  EXPECT_TRUE(quiet.timed_out);
  std::thread writer([fd] {
    std::this_thread::sleep_for(milliseconds(10));
    const uint64_t one = 1;
    (void)!::write(fd, &one, sizeof(one));
  });
  int ready = 0;
  const MonotonicTime give_up = MonotonicNow() + seconds(5);
  while (ready == 0 && MonotonicNow() < give_up) {
    (void)port->Wait(give_up, hooks, [&](uint64_t c) {
      EXPECT_EQ(c, 77u);
      ++ready;
    });
  }
  writer.join();
  EXPECT_EQ(ready, 1);
  port->Unwatch(77);
  ::close(fd);
}

TEST_P(WakePortTest, WatchBeyondCapacityIsResourceExhausted) {
  SKIP_UNLESS_SUPPORTED();
  std::unique_ptr<WakePort> port = MakePort(/*max_watches=*/2);
  ASSERT_NE(port, nullptr);
  std::atomic<uint32_t> words[3] = {};
  ASSERT_TRUE(port->Watch(&words[0], 1).ok());
  ASSERT_TRUE(port->Watch(&words[1], 2).ok());
  const absl::Status s = port->Watch(&words[2], 3);
  EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
  port->Unwatch(1);
  EXPECT_TRUE(port->Watch(&words[2], 3).ok());
}

// A channel file truncated under a sleeping loop (another process's doing)
// leaves a watched word the kernel cannot reach: the wait fails with
// EFAULT. The port reports the word ready (its owner's read then finds the
// damage, and shm's SIGBUS guard maps zero pages there) instead of
// aborting, and sleeps normally on the repaired page.
class TruncatingHooks final : public SleepHooks {
 public:
  explicit TruncatingHooks(int fd) : fd_(fd) {}
  void BeginSleep() override {}
  // Step 4: after the port loaded the words, before it arms its waits.
  bool HasPendingWork() override {
    if (fd_ >= 0) {
      EXPECT_EQ(::ftruncate(fd_, 0), 0) << std::strerror(errno);
      fd_ = -1;
    }
    return false;
  }
  void EndSleep() override {}

 private:
  int fd_;
};

TEST_P(WakePortTest, AWordWhoseFileIsTruncatedIsReportedReadyNotFatal) {
  SKIP_UNLESS_SUPPORTED();
  std::unique_ptr<WakePort> port = MakePort();
  ASSERT_NE(port, nullptr);
  const int fd = ::memfd_create("truncated_word", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  const long page = ::sysconf(_SC_PAGESIZE);
  ASSERT_EQ(::ftruncate(fd, page), 0);
  void* m = ::mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ASSERT_NE(m, MAP_FAILED);
  auto* word = static_cast<std::atomic<uint32_t>*>(m);
  ASSERT_TRUE(port->Watch(word, 7).ok());
  std::vector<uint64_t> cookies;
  TruncatingHooks truncate(fd);
  const WaitResult first = port->Wait(
      MonotonicNow() + seconds(5), truncate,
      [&](uint64_t c) { cookies.push_back(c); });
  ASSERT_EQ(cookies, std::vector<uint64_t>{7});
  EXPECT_FALSE(first.timed_out);
  // What the SIGBUS guard does at the owner's first read: zero pages.
  ASSERT_EQ(::mmap(m, page, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0),
            m);
  cookies.clear();
  NoSleepHooks hooks;
  (void)port->Wait(MonotonicNow() + milliseconds(20), hooks,
                   [&](uint64_t c) { cookies.push_back(c); });
  EXPECT_TRUE(cookies.empty());
  port->Unwatch(7);
  ::munmap(m, page);
  ::close(fd);
}

INSTANTIATE_TEST_SUITE_P(Backends, WakePortTest,
                         ::testing::ValuesIn(testing::kPortConfigs),
                         testing::PortConfigName);

// --- backend choice -----------------------------------------------------------------

TEST(MakeWakePort, DefaultIsTheBestBackendTheKernelOffers) {
  absl::StatusOr<std::unique_ptr<WakePort>> port =
      MakeWakePort(WakePortOptions{}, Features());
  ASSERT_TRUE(port.ok()) << port.status();
  const WakeBackend expected = Features().op_futex_wait
                                   ? WakeBackend::kUringFutex
                                   : WakeBackend::kFutexWaitv;
  EXPECT_EQ((*port)->backend(), expected) << (*port)->description();
}

TEST(MakeWakePort, PersistentBackendIsRefusedWithAReason) {
  WakePortOptions options;
  options.backend = WakeBackend::kUringPersistent;
  KernelFeatures features = Features();
  const auto refused = MakeWakePort(options, features);
  EXPECT_TRUE(absl::IsFailedPrecondition(refused.status())) << refused.status();
  // Even a kernel claiming the feature gets a clear Unimplemented.
  features.uring_persistent_futex_wait = true;
  const auto unimplemented = MakeWakePort(options, features);
  EXPECT_TRUE(absl::IsUnimplemented(unimplemented.status()))
      << unimplemented.status();
}

TEST(MakeWakePort, UringBackendOnAKernelWithoutFutexOpsIsRefused) {
  KernelFeatures features = Features();
  features.op_futex_wait = false;
  WakePortOptions options;
  options.backend = WakeBackend::kUringFutex;
  const auto port = MakeWakePort(options, features);
  EXPECT_TRUE(absl::IsFailedPrecondition(port.status())) << port.status();
  // Without forcing, such a kernel gets the fallback.
  const auto fallback = MakeWakePort(WakePortOptions{}, features);
  if (features.futex_waitv_syscall) {
    ASSERT_TRUE(fallback.ok()) << fallback.status();
    EXPECT_EQ((*fallback)->backend(), WakeBackend::kFutexWaitv);
  }
}

TEST(UringFutexPort, RingUsesSingleIssuerAndDeferTaskrunWhenTheKernelHasThem) {
  if (!Features().op_futex_wait) GTEST_SKIP() << "kernel < 6.7";
  auto port = UringFutexPort::Create(WakePortOptions{}, false, "test");
  ASSERT_TRUE(port.ok()) << port.status();
  if (Features().setup_defer_taskrun) {
    EXPECT_NE((*port)->setup_flags() & IORING_SETUP_SINGLE_ISSUER, 0u);
    EXPECT_NE((*port)->setup_flags() & IORING_SETUP_DEFER_TASKRUN, 0u);
  }
  NoSleepHooks hooks;
  (void)(*port)->Wait(MonotonicNow(), hooks, [](uint64_t) {});
  EXPECT_EQ((*port)->ring_fd_registered(), Features().register_ring_fd);
}

// A DEFER_TASKRUN ring signals its registered eventfd for futex completions
// through a deferred path that Debian's 6.12.117 takes only once (see
// uring_futex_port.h): hard-deadline rings must not be DEFER_TASKRUN.
TEST(UringFutexPort, HardDeadlineRingsAreNeverDeferTaskrun) {
  if (!Features().op_futex_wait) GTEST_SKIP() << "kernel < 6.7";
  auto port = UringFutexPort::Create(WakePortOptions{}, true, "test");
  ASSERT_TRUE(port.ok()) << port.status();
  EXPECT_EQ((*port)->setup_flags() & IORING_SETUP_DEFER_TASKRUN, 0u);
  if (Features().setup_single_issuer) {
    EXPECT_NE((*port)->setup_flags() & IORING_SETUP_SINGLE_ISSUER, 0u);
  }
}

TEST(UringFutexPort, TheArmedValueCatchesACommitWithoutAnyFutexWake) {
  if (!Features().op_futex_wait) GTEST_SKIP() << "kernel < 6.7";
  for (bool hard : {false, true}) {
    auto port = UringFutexPort::Create(WakePortOptions{}, hard, "test");
    ASSERT_TRUE(port.ok()) << port.status();
    std::atomic<uint32_t> word{0};
    ASSERT_TRUE((*port)->Watch(&word, 4).ok());
    // The wait is armed with the value loaded before the re-check, so a
    // bump in between completes it with -EAGAIN, wake or no wake.
    CommitAfterRecheckHooks hooks(&word, /*futex_wake=*/false);
    int ready = 0;
    const WaitResult r = (*port)->Wait(MonotonicNow() + seconds(5), hooks,
                                       [&](uint64_t) { ++ready; });
    EXPECT_EQ(ready, 1) << "hard=" << hard;
    EXPECT_FALSE(r.timed_out) << "hard=" << hard;
    (*port)->Unwatch(4);
  }
}

TEST(UringFutexPort, APortBuiltOnOneThreadServesALoopOnAnother) {
  if (!Features().op_futex_wait) GTEST_SKIP() << "kernel < 6.7";
  auto port = UringFutexPort::Create(WakePortOptions{}, false, "test");
  ASSERT_TRUE(port.ok()) << port.status();
  std::atomic<uint32_t> word{0};
  ASSERT_TRUE((*port)->Watch(&word, 3).ok());
  int ready = 0;
  std::thread loop([&] {
    NoSleepHooks hooks;
    std::thread bump = BumpLater(&word, milliseconds(10));
    const MonotonicTime give_up = MonotonicNow() + seconds(5);
    while (ready == 0 && MonotonicNow() < give_up) {
      (void)(*port)->Wait(give_up, hooks, [&](uint64_t) { ++ready; });
    }
    bump.join();
    (*port)->Unwatch(3);
    port->reset();  // destroyed on the loop thread, as documented
  });
  loop.join();
  EXPECT_EQ(ready, 1);
}

}  // namespace
}  // namespace tether::loop
