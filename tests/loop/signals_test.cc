// StopSignals: a stop signal makes the fd readable, a loop watching it in its
// wake port wakes; a process with StopSignals ends cleanly on SIGTERM; a
// second signal during a hung shutdown kills it.
#include "loop/signals.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "gtest/gtest.h"
#include "loop/clock.h"
#include "loop/kernel_probe.h"
#include "loop/make_wake_port.h"
#include "loop/wake_port.h"
#include "tests/loop/loop_test_util.h"

namespace tether::loop {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

bool Readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1;
}

TEST(StopSignals, OnlyOneInstallationAtATime) {
  auto first = StopSignals::Install();
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = StopSignals::Install();
  EXPECT_TRUE(absl::IsFailedPrecondition(second.status())) << second.status();
  first->reset();
  auto third = StopSignals::Install();
  EXPECT_TRUE(third.ok()) << third.status();
}

TEST(StopSignals, UncatchableSignalIsInvalidArgument) {
  StopSignalOptions options;
  options.signals = {SIGKILL};
  auto s = StopSignals::Install(options);
  EXPECT_TRUE(absl::IsInvalidArgument(s.status())) << s.status();
  // And nothing stays installed.
  EXPECT_TRUE(StopSignals::Install().ok());
}

TEST(StopSignals, ASignalWakesALoopWatchingTheFd) {
  auto stop = StopSignals::Install();
  ASSERT_TRUE(stop.ok()) << stop.status();
  EXPECT_FALSE(Readable((*stop)->fd()));
  EXPECT_FALSE((*stop)->stop_requested());

  auto port = MakeWakePort(WakePortOptions{}, ProbeKernel());
  ASSERT_TRUE(port.ok()) << port.status();
  ASSERT_TRUE((*port)->WatchFd((*stop)->fd(), 1).ok());
  std::thread sender([] {
    std::this_thread::sleep_for(milliseconds(20));
    ::kill(::getpid(), SIGINT);
  });
  NoSleepHooks hooks;
  bool stopped = false;
  const MonotonicTime give_up = MonotonicNow() + seconds(5);
  while (!stopped && MonotonicNow() < give_up) {
    (void)(*port)->Wait(give_up, hooks, [&](uint64_t c) {
      EXPECT_EQ(c, 1u);
      stopped = true;
    });
  }
  sender.join();
  EXPECT_TRUE(stopped);
  EXPECT_EQ((*stop)->received(), SIGINT);
  // Level-triggered for every loop: it stays readable.
  EXPECT_TRUE(Readable((*stop)->fd()));
  (*port)->Unwatch(1);
}

// The child runs a loop until stopped, then exits 0 on its own.
TEST(StopSignals, SigtermEndsAProcessCleanly) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(ready[0]);
    auto stop = StopSignals::Install();
    if (!stop.ok()) ::_exit(2);
    auto port = MakeWakePort(WakePortOptions{}, ProbeKernel());
    if (!port.ok() || !(*port)->WatchFd((*stop)->fd(), 1).ok()) ::_exit(3);
    (void)!::write(ready[1], "r", 1);
    NoSleepHooks hooks;
    bool stopped = false;
    const MonotonicTime give_up = MonotonicNow() + seconds(10);
    while (!stopped && MonotonicNow() < give_up) {
      (void)(*port)->Wait(give_up, hooks, [&](uint64_t) { stopped = true; });
    }
    if (!stopped || (*stop)->received() != SIGTERM) ::_exit(4);
    (*port)->Unwatch(1);
    ::_exit(0);
  }
  ::close(ready[1]);
  char byte;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  ASSERT_EQ(::kill(child, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  ::close(ready[0]);
}

TEST(StopSignals, ASecondSignalKillsAHungShutdown) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(ready[0]);
    auto stop = StopSignals::Install();
    if (!stop.ok()) ::_exit(2);
    (void)!::write(ready[1], "r", 1);
    while (!(*stop)->stop_requested()) ::usleep(1000);
    (void)!::write(ready[1], "s", 1);
    for (;;) ::pause();  // a shutdown that hangs
  }
  ::close(ready[1]);
  char byte;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  ASSERT_EQ(::kill(child, SIGINT), 0);
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  EXPECT_EQ(byte, 's');
  ASSERT_EQ(::kill(child, SIGINT), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGINT);
  ::close(ready[0]);
}

}  // namespace
}  // namespace tether::loop
