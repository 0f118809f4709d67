// The hard-timer ring (DeadlineTimer::kHard, uring_futex_port.h) sleeps in
// ppoll only when it must: a sleep whose one deadline is the lost-wake
// check, with no fd watched, waits in the ring (one syscall; the check needs
// no hard timer). These tests hold what that sleep must still see: a Wake()
// from another thread (the Wake() read armed in the ring) and, with an fd
// watched, the fd (ppoll again: fds are not in the hard-timer ring).
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/functional/function_ref.h"
#include "gtest/gtest.h"
#include "loop/clock.h"
#include "loop/uring_futex_port.h"
#include "loop/wake_port.h"
#include "shm/futex.h"
#include "tests/loop/port_configs.h"

namespace tether::loop {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::Features;

// Says when the loop thread first went to sleep (a latch: a sleep that
// ended at once still counts).
class AnnouncingHooks final : public SleepHooks {
 public:
  void BeginSleep() override { announced.store(true); }
  bool HasPendingWork() override { return false; }
  void EndSleep() override {}
  std::atomic<bool> announced{false};
};

// A hard-timer port watching one word (cookie 1).
class HardTimerSleep : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!Features().op_futex_wait) GTEST_SKIP() << "kernel < 6.7";
    absl::StatusOr<std::unique_ptr<UringFutexPort>> made =
        UringFutexPort::Create(WakePortOptions{}, /*hard_deadlines=*/true,
                               "test");
    ASSERT_TRUE(made.ok()) << made.status();
    port_ = std::move(*made);
    ASSERT_TRUE(port_->Watch(&word_, 1).ok());
  }
  void TearDown() override {
    if (port_ != nullptr) port_->Unwatch(1);
  }
  std::atomic<uint32_t> word_{0};
  std::unique_ptr<UringFutexPort> port_;
};

// Runs `act` on another thread 5 ms after the loop thread announced a
// sleep, and one Wait() with `deadline` that it should end.
template <typename Act>
WaitResult WaitEndedBy(WakePort& port, std::optional<MonotonicTime> deadline,
                       Act act, absl::FunctionRef<void(uint64_t)> on_ready) {
  AnnouncingHooks hooks;
  std::thread actor([&] {
    while (!hooks.announced.load()) std::this_thread::yield();
    std::this_thread::sleep_for(milliseconds(5));
    act();
  });
  const WaitResult r = port.Wait(deadline, hooks, on_ready);
  actor.join();
  return r;
}

// Without the Wake() read in the ring, such a sleep ends only by the
// lost-wake check (about 100 ms later, `checked` set): a Wake() would be
// late by up to that much. A check may come due inside any one trial, so
// one of three trials must end by the Wake() alone.
TEST_F(HardTimerSleep, AWakeEndsADeadlineLessSleep) {
  int by_wake_alone = 0;
  for (int trial = 0; trial < 3 && by_wake_alone == 0; ++trial) {
    const WaitResult r = WaitEndedBy(
        *port_, std::nullopt, [&] { port_->Wake(); },
        [](uint64_t) { ADD_FAILURE() << "nothing changed"; });
    if (r.woken && !r.checked) ++by_wake_alone;
  }
  EXPECT_EQ(by_wake_alone, 1) << "only the lost-wake check ended the sleeps";
}

// io_uring_enter returns the number of entries it submitted even when its
// wait then timed out: a sleep that re-arms something (here the Wake()
// read, which the previous sleep's Wake() consumed) and then runs to the
// lost-wake check must still say `checked`, not look like a spurious
// return.
TEST_F(HardTimerSleep, ASleepThatRearmsAndRunsToTheCheckSaysChecked) {
  NoSleepHooks hooks;
  const auto never = [](uint64_t) { ADD_FAILURE() << "nothing changed"; };
  for (int round = 0; round < 3; ++round) {
    const WaitResult woken = WaitEndedBy(
        *port_, std::nullopt, [&] { port_->Wake(); }, never);
    ASSERT_TRUE(woken.woken);
    const WaitResult r = port_->Wait(std::nullopt, hooks, never);
    EXPECT_TRUE(r.checked) << "round " << round
                           << ": a sleep that ran to the check said nothing";
  }
}

// A loop whose sleeps switch between the ring (no deadline) and ppoll (a
// deadline of its own) must not pay for it in spurious returns: a ring
// sleep's completions leave signals on the ring's completion eventfd, and
// a Wake() read it left armed completes when a later ppoll sleep is woken.
// Each sleep here ends exactly once, for its reason.
TEST_F(HardTimerSleep, SwitchingBetweenRingAndPpollSleepsEndsEachOnce) {
  int empty = 0;
  int changes = 0;
  const auto count = [&](const WaitResult& r) {
    if (!r.woken && !r.timed_out && !r.checked && r.ready == 0) ++empty;
  };
  const auto on_ready = [&](uint64_t) { ++changes; };
  NoSleepHooks hooks;
  for (int round = 0; round < 10; ++round) {
    // A ring sleep ended by a Wake() (its read consumed), then one ended
    // by a publisher (the read stays armed).
    count(WaitEndedBy(*port_, std::nullopt, [&] { port_->Wake(); }, on_ready));
    count(WaitEndedBy(
        *port_, std::nullopt,
        [&] {
          word_.fetch_add(1);
          shm::FutexWake(&word_, 1);
        },
        on_ready));
    // A ppoll sleep ended by a Wake(), then one that runs to its deadline.
    WaitResult woken = WaitEndedBy(
        *port_, MonotonicNow() + seconds(5), [&] { port_->Wake(); }, on_ready);
    count(woken);
    // A lost-wake check, or a publish that a check's return left to this
    // sleep, may end it first: the Wake() is then pending.
    for (int i = 0; i < 100 && !woken.woken; ++i) {
      woken = port_->Wait(MonotonicNow() + seconds(5), hooks, on_ready);
      count(woken);
    }
    EXPECT_TRUE(woken.woken) << "round " << round;
    const MonotonicTime deadline = MonotonicNow() + milliseconds(20);
    WaitResult r;
    do {
      r = port_->Wait(deadline, hooks, on_ready);
      count(r);
    } while (!r.timed_out);
  }
  EXPECT_EQ(empty, 0) << "sleeps that ended for no reason";
  EXPECT_GE(changes, 10);
}

// The syscall thread `tid` of this process is blocked in, from
// /proc/self/task/<tid>/syscall (-1 if unreadable or running).
long BlockedSyscall(pid_t tid) {
  std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/syscall");
  std::string first;
  if (!(in >> first) || first == "running") return -1;
  return std::strtol(first.c_str(), nullptr, 10);
}

// Which of the two sleeping syscalls a sleep of `port` with `deadline`
// blocks in (-1: none seen in three tries; a check may end a sleep before
// it is seen, and a loaded machine may not have it blocked yet).
long SleepSyscall(WakePort& port, std::optional<MonotonicTime> deadline) {
  const pid_t loop_tid = static_cast<pid_t>(::syscall(SYS_gettid));
  long seen = -1;
  for (int attempt = 0; attempt < 3 && seen == -1; ++attempt) {
    (void)WaitEndedBy(
        port, deadline,
        [&] {
          for (int i = 0; i < 200 && seen == -1; ++i) {
            const long n = BlockedSyscall(loop_tid);
            if (n == SYS_ppoll || n == SYS_io_uring_enter) {
              seen = n;
            } else {
              std::this_thread::sleep_for(milliseconds(1));
            }
          }
          port.Wake();
        },
        [](uint64_t) {});
  }
  return seen;
}

// Only a sleep without a deadline of the caller's waits in the ring: one
// with a deadline keeps ppoll's hard timer, also when its deadline lies
// beyond the next lost-wake check (the check then ends the ppoll first).
TEST_F(HardTimerSleep, OnlyASleepWithoutADeadlineWaitsInTheRing) {
  EXPECT_EQ(SleepSyscall(*port_, std::nullopt), SYS_io_uring_enter);
  EXPECT_EQ(SleepSyscall(*port_, MonotonicNow() + milliseconds(50)),
            SYS_ppoll);
  EXPECT_EQ(SleepSyscall(*port_, MonotonicNow() + seconds(5)), SYS_ppoll)
      << "a deadline beyond the check slept on the ring's soft timer";
}

// With an fd watched the sleep must poll it (ppoll): in the ring wait it
// would never be reported, whatever the checks.
TEST_F(HardTimerSleep, AReadableFdEndsADeadlineLessSleep) {
  const int fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(port_->WatchFd(fd, 7).ok());
  int reported = 0;
  const auto on_ready = [&](uint64_t cookie) {
    EXPECT_EQ(cookie, 7u);
    ++reported;
  };
  (void)WaitEndedBy(
      *port_, std::nullopt,
      [fd] {
        const uint64_t one = 1;
        (void)!::write(fd, &one, sizeof(one));
      },
      on_ready);
  // A check may have ended that one first: a few more sleeps, each ended
  // at once by the fd (a level-triggered poll) or by a check.
  NoSleepHooks hooks;
  for (int i = 0; i < 5 && reported == 0; ++i) {
    (void)port_->Wait(std::nullopt, hooks, on_ready);
  }
  EXPECT_GE(reported, 1) << "the readable fd was never reported";
  port_->Unwatch(7);
  ::close(fd);
}

}  // namespace
}  // namespace tether::loop
