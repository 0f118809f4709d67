// The lost-wake check of every wake port configuration (loop/wake_port.h):
// a Wait() that nothing else would end still returns, about every
// kLostWakeCheck, and the check never reaches the loop thread outside
// Wait() (a blocking call in a callback is not interrupted by it). Also
// uring_futex's way out when its ring refuses the check's timeout.
#include <dirent.h>
#include <linux/io_uring.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

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

// Wakes `port` over and over once `after` has passed, until destroyed: a
// wait that nothing else ends still ends, and the test can say so.
class RescueWaker {
 public:
  RescueWaker(WakePort& port, Duration after)
      : thread_([this, &port, after] {
          const MonotonicTime give_up = MonotonicNow() + after;
          while (!done_.load() && MonotonicNow() < give_up) {
            std::this_thread::sleep_for(milliseconds(10));
          }
          while (!done_.load()) port.Wake();
        }) {}
  ~RescueWaker() {
    done_ = true;
    thread_.join();
  }

 private:
  std::atomic<bool> done_{false};
  std::thread thread_;
};

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
  const RescueWaker rescue(*port, seconds(10));
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

// The fds of this process that are io_uring rings.
std::set<int> RingFds() {
  std::set<int> rings;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return rings;
  while (const dirent* e = ::readdir(dir)) {
    char target[64] = {};
    const std::string path = std::string("/proc/self/fd/") + e->d_name;
    if (::readlink(path.c_str(), target, sizeof(target) - 1) > 0 &&
        std::string(target) == "anon_inode:[io_uring]") {
      rings.insert(std::atoi(e->d_name));
    }
  }
  ::closedir(dir);
  return rings;
}

// Every kernel with io_uring futex waits (6.7) has multishot timeouts
// (6.4), so a refusal of the check's timeout is injected: the port's ring,
// still disabled until its first Wait(), gets io_uring restrictions that
// allow every operation but IORING_OP_TIMEOUT. The port must say so in one
// line and look for lost wakes by bounding its sleeps instead: a Wait()
// that nothing else would end still returns `checked`. Without the
// fallback only the rescue Wake() after 5 s ends it.
TEST(LostWakeCheckRefusedTest, ARingThatRefusesTheTimeoutStillChecks) {
  const PortConfig& config = kPortConfigs[0];  // uring_futex, ring wait
  ASSERT_EQ(config.backend, WakeBackend::kUringFutex);
  if (std::string why = UnsupportedReason(config); !why.empty()) {
    GTEST_SKIP() << why;
  }
  ChildProcess child([&config](const ChildProcess::Voice&) {
    // The port's one line goes to stderr: keep it.
    const int log = ::memfd_create("stderr", MFD_CLOEXEC);
    if (log < 0 || ::dup2(log, STDERR_FILENO) < 0) return 2;
    const std::set<int> before = RingFds();
    absl::StatusOr<std::unique_ptr<WakePort>> made =
        MakeConfiguredPort(config);
    if (!made.ok()) return 2;
    std::unique_ptr<WakePort> port = std::move(*made);
    std::vector<int> fresh;
    for (int fd : RingFds()) {
      if (before.count(fd) == 0) fresh.push_back(fd);
    }
    if (fresh.size() != 1) return 2;
    std::vector<io_uring_restriction> allow;
    for (int op = 0; op < IORING_REGISTER_LAST; ++op) {
      io_uring_restriction r{};
      r.opcode = IORING_RESTRICTION_REGISTER_OP;
      r.register_op = static_cast<uint8_t>(op);
      allow.push_back(r);
    }
    for (int op = 0; op <= 53; ++op) {  // up to IORING_OP_FUTEX_WAITV
      if (op == IORING_OP_TIMEOUT) continue;
      io_uring_restriction r{};
      r.opcode = IORING_RESTRICTION_SQE_OP;
      r.sqe_op = static_cast<uint8_t>(op);
      allow.push_back(r);
    }
    io_uring_restriction flags{};
    flags.opcode = IORING_RESTRICTION_SQE_FLAGS_ALLOWED;
    flags.sqe_flags = 0xff;
    allow.push_back(flags);
    if (::syscall(__NR_io_uring_register, fresh[0],
                  IORING_REGISTER_RESTRICTIONS, allow.data(),
                  static_cast<unsigned>(allow.size())) != 0) {
      return 4;  // restrictions refused here: nothing to inject with
    }
    std::atomic<uint32_t> word{0};
    if (!port->Watch(&word, 1).ok()) return 2;
    int checks = 0;
    bool rescued = false;
    {
      const RescueWaker rescue(*port, seconds(5));
      NoSleepHooks hooks;
      while (checks < 2 && !rescued) {
        const WaitResult r =
            port->Wait(std::nullopt, hooks, [](uint64_t) {});
        checks += r.checked ? 1 : 0;
        rescued = r.woken;
      }
    }
    std::string said(4096, '\0');
    const ssize_t n = ::pread(log, said.data(), said.size(), 0);
    said.resize(n > 0 ? n : 0);
    const bool told =
        said.find("refused its lost-wake check timeout") != std::string::npos;
    return rescued ? 3 : (told ? 0 : 5);
  });
  ASSERT_TRUE(child.started());
  const int code = child.ExitCode();
  if (code == 4) GTEST_SKIP() << "io_uring restrictions refused here";
  EXPECT_EQ(code, 0) << "3: only the rescue Wake() ended the wait; "
                        "5: the refusal was not said on stderr";
}

INSTANTIATE_TEST_SUITE_P(Backends, LostWakeCheckTest,
                         ::testing::ValuesIn(kPortConfigs), PortConfigName);

}  // namespace
}  // namespace tether::loop
