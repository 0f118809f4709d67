// Every wake port backend (forced), on words and fds of its own: deadlines,
// the watched word that changed reported and an unwatched one not, freed
// slots reused, a commit between the sleep protocol's re-check and the
// sleep, pending work that skips the sleep, readable fds, the watch
// capacity, and a watched word whose file is truncated. Then the backend
// MakeWakePort chooses (the best the kernel offers; a forced one it lacks is
// refused with a reason), and uring_futex's ring: its setup flags, the armed
// value that catches a commit without a FUTEX_WAKE, and a port built on one
// thread serving a loop on another.
#include <linux/io_uring.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "loop/clock.h"
#include "loop/kernel_probe.h"
#include "loop/make_wake_port.h"
#include "loop/uring_futex_port.h"
#include "loop/wake_port.h"
#include "shm/futex.h"
#include "tests/loop/port_configs.h"

namespace tether::loop {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::Features;
using testing::WakePortTest;

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
