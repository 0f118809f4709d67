// The hot paths do not touch the heap: with //loop:rt_alloc_check linked,
// the dispatch core firing timers, phased loops and events, and each wake
// port's Wait() being woken, all run inside a RealtimeScope. Any allocation
// aborts the test with a stack trace.
#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "gtest/gtest.h"
#include "loop/clock.h"
#include "loop/dispatch.h"
#include "loop/kernel_probe.h"
#include "loop/make_wake_port.h"
#include "loop/realtime.h"
#include "loop/wake_port.h"
#include "shm/futex.h"

namespace tether::loop {
namespace {

using std::chrono::milliseconds;

TEST(NoAllocation, CheckerIsLinked) { ASSERT_TRUE(AllocationCheckActive()); }

TEST(NoAllocation, DispatcherFiresWithoutAllocating) {
  VirtualClock clock;
  Dispatcher d(&clock);
  int fired = 0;
  EventId event{};
  event = d.AddEvent([&] {
    ++fired;
    d.Schedule(event, clock.Now() + milliseconds(3));
  });
  const TimerId timer = d.AddTimer([&] { ++fired; });
  const TimerId once = d.AddTimer([&] { ++fired; });
  d.AddPhasedLoop([&](int cycles) { fired += cycles; }, milliseconds(2),
                  milliseconds(1));
  {
    RealtimeScope scope;
    d.Schedule(event, clock.Now());
    d.ScheduleTimer(timer, clock.Now(), milliseconds(1));
    for (int i = 0; i < 10000; ++i) {
      if (i % 100 == 0) d.ScheduleTimer(once, clock.Now() + milliseconds(5));
      if (i % 333 == 0) d.DisableTimer(once);
      const auto next = d.NextDeadline();
      clock.AdvanceTo(*next);
      d.RunDue(clock.Now());
    }
  }
  EXPECT_GT(fired, 10000);
}

class PortNoAllocation : public ::testing::TestWithParam<WakeBackend> {};

TEST_P(PortNoAllocation, WaitWakesWithoutAllocating) {
  WakePortOptions options;
  options.backend = GetParam();
  auto port = MakeWakePort(options, ProbeKernel());
  if (absl::IsFailedPrecondition(port.status())) {
    GTEST_SKIP() << port.status().message();
  }
  ASSERT_TRUE(port.ok()) << port.status();
  std::atomic<uint32_t> word{0};
  ASSERT_TRUE((*port)->Watch(&word, 1).ok());
  std::atomic<bool> done{false};
  std::thread bumper([&] {
    while (!done.load()) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      word.fetch_add(1);
      shm::FutexWake(&word);
      (*port)->Wake();
    }
  });
  NoSleepHooks hooks;
  int ready = 0;
  int woken = 0;
  {
    RealtimeScope scope;
    for (int i = 0; i < 2000; ++i) {
      const WaitResult r = (*port)->Wait(MonotonicNow() + milliseconds(50),
                                         hooks, [&](uint64_t) { ++ready; });
      woken += r.woken ? 1 : 0;
    }
  }
  done.store(true);
  bumper.join();
  EXPECT_GT(ready, 100);
  EXPECT_GT(woken, 100);
  (*port)->Unwatch(1);
}

INSTANTIATE_TEST_SUITE_P(Backends, PortNoAllocation,
                         ::testing::Values(WakeBackend::kUringFutex,
                                           WakeBackend::kFutexWaitv),
                         [](const auto& info) {
                           return std::string(WakeBackendName(info.param));
                         });

}  // namespace
}  // namespace tether::loop
