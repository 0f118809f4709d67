// The hard-timer ring (DeadlineTimer::kHard, uring_futex_port.h) sleeps in
// ppoll only when it must: a sleep whose one deadline is the lost-wake
// check, with no fd watched, waits in the ring (one syscall; the check needs
// no hard timer). These tests hold what that sleep must still see: a Wake()
// from another thread (the Wake() read armed in the ring) and, with an fd
// watched, the fd (ppoll again: fds are not in the hard-timer ring).
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <thread>

#include "absl/functional/function_ref.h"
#include "gtest/gtest.h"
#include "loop/clock.h"
#include "loop/uring_futex_port.h"
#include "loop/wake_port.h"
#include "tests/loop/port_configs.h"

namespace tether::loop {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::Features;

// Says when the loop thread is about to block.
class AnnouncingHooks final : public SleepHooks {
 public:
  void BeginSleep() override { sleeping.store(true); }
  bool HasPendingWork() override { return false; }
  void EndSleep() override { sleeping.store(false); }
  std::atomic<bool> sleeping{false};
};

std::unique_ptr<UringFutexPort> MakeHardTimerPort() {
  absl::StatusOr<std::unique_ptr<UringFutexPort>> port =
      UringFutexPort::Create(WakePortOptions{}, /*hard_deadlines=*/true,
                             "test");
  EXPECT_TRUE(port.ok()) << port.status();
  return port.ok() ? std::move(*port) : nullptr;
}

// Runs `act` on another thread 5 ms after the loop thread announced a
// sleep, and one deadline-less Wait() that it should end.
template <typename Act>
WaitResult WaitEndedBy(WakePort& port, Act act,
                       absl::FunctionRef<void(uint64_t)> on_ready) {
  AnnouncingHooks hooks;
  std::thread actor([&] {
    while (!hooks.sleeping.load()) std::this_thread::yield();
    std::this_thread::sleep_for(milliseconds(5));
    act();
  });
  const WaitResult r = port.Wait(std::nullopt, hooks, on_ready);
  actor.join();
  return r;
}

// Without the Wake() read in the ring, such a sleep ends only by the
// lost-wake check (about 100 ms later, `checked` set): a Wake() would be
// late by up to that much. A check may come due inside any one trial, so
// one of three trials must end by the Wake() alone.
TEST(HardTimerSleep, AWakeEndsADeadlineLessSleep) {
  if (!Features().op_futex_wait) GTEST_SKIP() << "kernel < 6.7";
  std::unique_ptr<UringFutexPort> port = MakeHardTimerPort();
  ASSERT_NE(port, nullptr);
  std::atomic<uint32_t> word{0};
  ASSERT_TRUE(port->Watch(&word, 1).ok());
  int by_wake_alone = 0;
  for (int trial = 0; trial < 3 && by_wake_alone == 0; ++trial) {
    const WaitResult r = WaitEndedBy(
        *port, [&] { port->Wake(); },
        [](uint64_t) { ADD_FAILURE() << "nothing changed"; });
    if (r.woken && !r.checked) ++by_wake_alone;
  }
  EXPECT_EQ(by_wake_alone, 1) << "only the lost-wake check ended the sleeps";
  port->Unwatch(1);
}

// With an fd watched the sleep must poll it (ppoll): in the ring wait it
// would never be reported, whatever the checks.
TEST(HardTimerSleep, AReadableFdEndsADeadlineLessSleep) {
  if (!Features().op_futex_wait) GTEST_SKIP() << "kernel < 6.7";
  std::unique_ptr<UringFutexPort> port = MakeHardTimerPort();
  ASSERT_NE(port, nullptr);
  const int fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(port->WatchFd(fd, 7).ok());
  int reported = 0;
  const auto on_ready = [&](uint64_t cookie) {
    EXPECT_EQ(cookie, 7u);
    ++reported;
  };
  (void)WaitEndedBy(
      *port,
      [fd] {
        const uint64_t one = 1;
        (void)!::write(fd, &one, sizeof(one));
      },
      on_ready);
  // A check may have ended that one first: a few more sleeps, each ended
  // at once by the fd (a level-triggered poll) or by a check.
  NoSleepHooks hooks;
  for (int i = 0; i < 5 && reported == 0; ++i) {
    (void)port->Wait(std::nullopt, hooks, on_ready);
  }
  EXPECT_GE(reported, 1) << "the readable fd was never reported";
  port->Unwatch(7);
  ::close(fd);
}

}  // namespace
}  // namespace tether::loop
