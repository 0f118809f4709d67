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
#include "tests/util/child_process.h"

namespace tether::loop {
namespace {

using ::tether::testing::ChildProcess;

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
  ChildProcess child([](const ChildProcess::Voice& voice) {
    auto stop = StopSignals::Install();
    if (!stop.ok()) return 2;
    auto port = MakeWakePort(WakePortOptions{}, ProbeKernel());
    if (!port.ok() || !(*port)->WatchFd((*stop)->fd(), 1).ok()) return 3;
    voice.Say();
    NoSleepHooks hooks;
    bool stopped = false;
    const MonotonicTime give_up = MonotonicNow() + seconds(10);
    while (!stopped && MonotonicNow() < give_up) {
      (void)(*port)->Wait(give_up, hooks, [&](uint64_t) { stopped = true; });
    }
    if (!stopped || (*stop)->received() != SIGTERM) return 4;
    (*port)->Unwatch(1);
    return 0;
  });
  ASSERT_TRUE(child.Heard().has_value())
      << "the child failed at step " << child.ExitCode();
  ASSERT_TRUE(child.Kill(SIGTERM));
  const int status = child.Wait();
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(StopSignals, ASecondSignalKillsAHungShutdown) {
  ChildProcess child([](const ChildProcess::Voice& voice) {
    auto stop = StopSignals::Install();
    if (!stop.ok()) return 2;
    voice.Say('r');
    while (!(*stop)->stop_requested()) ::usleep(1000);
    voice.Say('s');
    for (;;) ::pause();  // a shutdown that hangs
  });
  ASSERT_EQ(child.Heard(), 'r') << "the child failed at step "
                                << child.ExitCode();
  ASSERT_TRUE(child.Kill(SIGINT));
  EXPECT_EQ(child.Heard(), 's');
  ASSERT_TRUE(child.Kill(SIGINT));
  const int status = child.Wait();
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGINT);
}

}  // namespace
}  // namespace tether::loop
