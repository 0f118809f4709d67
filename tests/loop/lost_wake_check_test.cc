// The lost-wake check of every wake port configuration (loop/wake_port.h):
// a Wait() that nothing else would end still returns, about every
// kLostWakeCheck, and the check never reaches the loop thread outside
// Wait() (a blocking call in a callback is not interrupted by it).
#include <sys/epoll.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "loop/clock.h"
#include "loop/wake_port.h"
#include "tests/loop/port_configs.h"
#include "tests/util/child_process.h"

namespace tether::loop {
namespace {

using ChildProcess = tether::testing::ChildProcess;
using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::kPortConfigs;
using testing::MakeConfiguredPort;
using testing::PortConfig;
using testing::PortConfigName;
using testing::UnsupportedReason;

class LostWakeCheckTest : public ::testing::TestWithParam<PortConfig> {
 protected:
  // The configured port, or nullptr with skip_ set when the kernel lacks
  // the backend.
  std::unique_ptr<WakePort> MakePort() {
    skip_ = UnsupportedReason(GetParam());
    if (!skip_.empty()) return nullptr;
    absl::StatusOr<std::unique_ptr<WakePort>> port =
        MakeConfiguredPort(GetParam());
    EXPECT_TRUE(port.ok()) << port.status();
    return port.ok() ? std::move(*port) : nullptr;
  }
  std::string skip_;
};

// A wake that never comes (its publisher killed between commit and wake, an
// announcement cleared by a writer of the reader-state file) cannot leave a
// loop asleep for good: with nothing to end it, Wait() still returns, as
// the lost-wake check; a later deadline is still kept. Without the check
// the waits below end only by the rescue Wake() after 10 s, and it fails.
TEST_P(LostWakeCheckTest, EndsAWaitThatNothingElseWouldEnd) {
  std::unique_ptr<WakePort> port = MakePort();
  if (port == nullptr) GTEST_SKIP() << skip_;
  std::atomic<uint32_t> word{0};
  ASSERT_TRUE(port->Watch(&word, 1).ok());
  std::atomic<bool> done{false};
  std::thread rescue([&] {
    const MonotonicTime give_up = MonotonicNow() + seconds(10);
    while (!done.load() && MonotonicNow() < give_up) {
      std::this_thread::sleep_for(milliseconds(10));
    }
    while (!done.load()) port->Wake();
  });
  NoSleepHooks hooks;
  const auto never = [](uint64_t) { ADD_FAILURE() << "nothing changed"; };
  for (int i = 0; i < 3; ++i) {
    WaitResult r;
    do {
      r = port->Wait(std::nullopt, hooks, never);
    } while (!r.checked && !r.woken);
    EXPECT_TRUE(r.checked) << "only the rescue Wake() ended the wait";
    EXPECT_FALSE(r.timed_out);
  }
  // Five periods: at least one check, and about one per period, not a
  // check that keeps firing (10: slack).
  const MonotonicTime deadline = MonotonicNow() + 5 * kLostWakeCheck;
  int checks = 0;
  WaitResult r;
  do {
    r = port->Wait(deadline, hooks, never);
    checks += r.checked ? 1 : 0;
  } while (!r.timed_out && !r.woken);
  EXPECT_TRUE(r.timed_out);
  EXPECT_GE(MonotonicNow(), deadline);
  EXPECT_GE(checks, 1);
  EXPECT_LE(checks, 10);
  done = true;
  rescue.join();
  port->Unwatch(1);
}

// Between waits the loop thread runs callbacks, which may block in
// epoll_wait, recv with a timeout, sigtimedwait...: calls the kernel does
// not restart. The check must not interrupt them. (An io_uring timeout on a
// ring without DEFER_TASKRUN completes as task work that interrupts the
// thread wherever it is: epoll_wait failed with EINTR after 99 ms, every
// time, on the kHard ring before its check became a ppoll timeout.)
TEST_P(LostWakeCheckTest, NeverInterruptsTheLoopThreadOutsideWait) {
  if (MakePort() == nullptr) GTEST_SKIP() << skip_;
  // In a child of its own: rings torn down by earlier tests in this
  // process cancel their requests through task work, which interrupts this
  // thread once too.
  ChildProcess child([this](const ChildProcess::Voice&) {
    std::unique_ptr<WakePort> port = MakePort();
    std::atomic<uint32_t> word{0};
    if (port == nullptr || !port->Watch(&word, 1).ok()) return 2;
    NoSleepHooks hooks;
    WaitResult r;
    do {  // a first sleep arms whatever the port arms
      r = port->Wait(MonotonicNow() + milliseconds(1), hooks,
                     [](uint64_t) {});
    } while (!r.timed_out);
    const int ep = ::epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) return 2;
    epoll_event event;
    const MonotonicTime start = MonotonicNow();
    const int n = ::epoll_wait(ep, &event, 1, 3 * 100);  // three periods
    const int err = errno;
    if (n != 0) {
      std::fprintf(stderr, "epoll_wait: %s after %lld ms\n",
                   std::strerror(err),
                   static_cast<long long>(
                       std::chrono::duration_cast<milliseconds>(
                           MonotonicNow() - start)
                           .count()));
    }
    return n == 0 ? 0 : 3;
  });
  ASSERT_TRUE(child.started());
  EXPECT_EQ(child.ExitCode(), 0) << "3: the blocking call was interrupted";
}

INSTANTIATE_TEST_SUITE_P(Backends, LostWakeCheckTest,
                         ::testing::ValuesIn(kPortConfigs), PortConfigName);

}  // namespace
}  // namespace tether::loop
