// The dispatch core on a virtual clock: ordering of events due at the same
// time, one-shot and periodic timers (skipping missed expirations), phased
// loops reporting missed cycles, on-run callbacks, and deterministic
// simulated runs.
#include "loop/dispatch.h"

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "loop/clock.h"

namespace tether::loop {
namespace {

using std::chrono::milliseconds;

MonotonicTime At(int64_t ms) { return MonotonicTime(milliseconds(ms)); }

// Runs the simulation until `end` the way the simulated loop does: jump the
// virtual clock to the next deadline, run what is due.
void RunUntil(Dispatcher& d, VirtualClock& clock, MonotonicTime end) {
  for (;;) {
    const std::optional<MonotonicTime> next = d.NextDeadline();
    if (!next.has_value() || *next > end) break;
    if (*next > clock.Now()) clock.AdvanceTo(*next);
    d.RunDue(clock.Now());
  }
  if (clock.Now() < end) clock.AdvanceTo(end);
}

TEST(Dispatcher, EventsDueAtTheSameTimeRunInTheOrderTheyWereScheduled) {
  VirtualClock clock;
  Dispatcher d(&clock);
  std::string trace;
  const EventId a = d.AddEvent([&] { trace += "a"; });
  const EventId b = d.AddEvent([&] { trace += "b"; });
  const EventId c = d.AddEvent([&] { trace += "c"; });
  // Scheduled c, a, b: added order must not matter, scheduling order does.
  d.Schedule(c, At(10));
  d.Schedule(a, At(10));
  d.Schedule(b, At(10));
  EXPECT_EQ(d.RunDue(At(10)), 3);
  EXPECT_EQ(trace, "cab");
}

TEST(Dispatcher, EarlierEventsRunFirstAndLaterOnesWait) {
  VirtualClock clock;
  Dispatcher d(&clock);
  std::string trace;
  const EventId a = d.AddEvent([&] { trace += "a"; });
  const EventId b = d.AddEvent([&] { trace += "b"; });
  const EventId c = d.AddEvent([&] { trace += "c"; });
  d.Schedule(a, At(30));
  d.Schedule(b, At(10));
  d.Schedule(c, At(20));
  EXPECT_EQ(d.NextDeadline(), At(10));
  EXPECT_EQ(d.RunDue(At(25)), 2);
  EXPECT_EQ(trace, "bc");
  EXPECT_EQ(d.NextDeadline(), At(30));
  EXPECT_EQ(d.RunDue(At(29)), 0);
  EXPECT_EQ(d.RunDue(At(30)), 1);
  EXPECT_EQ(trace, "bca");
  EXPECT_EQ(d.NextDeadline(), std::nullopt);
}

TEST(Dispatcher, ReschedulingMovesAnEventToTheBackOfItsTime) {
  VirtualClock clock;
  Dispatcher d(&clock);
  std::string trace;
  const EventId a = d.AddEvent([&] { trace += "a"; });
  const EventId b = d.AddEvent([&] { trace += "b"; });
  d.Schedule(a, At(10));
  d.Schedule(b, At(10));
  d.Schedule(a, At(10));  // again: now after b
  EXPECT_EQ(d.scheduled_count(), 2u);
  d.RunDue(At(10));
  EXPECT_EQ(trace, "ba");
}

TEST(Dispatcher, CancelledEventsDoNotRun) {
  VirtualClock clock;
  Dispatcher d(&clock);
  int runs = 0;
  const EventId a = d.AddEvent([&] { ++runs; });
  d.Schedule(a, At(5));
  EXPECT_EQ(d.ScheduledTime(a), At(5));
  d.Cancel(a);
  d.Cancel(a);  // no-op
  EXPECT_EQ(d.ScheduledTime(a), std::nullopt);
  EXPECT_EQ(d.RunDue(At(100)), 0);
  EXPECT_EQ(runs, 0);
}

TEST(Dispatcher, AnEventSchedulingItselfForNowRunsInTheNextCall) {
  VirtualClock clock;
  Dispatcher d(&clock);
  int runs = 0;
  EventId self{};
  self = d.AddEvent([&] {
    ++runs;
    d.Schedule(self, At(0));  // due again at once: must not spin forever
  });
  d.Schedule(self, At(0));
  EXPECT_EQ(d.RunDue(At(0)), 1);
  EXPECT_EQ(d.RunDue(At(0)), 1);
  EXPECT_EQ(runs, 2);
}

TEST(Dispatcher, CallbacksMayAddEventsWhileRunning) {
  VirtualClock clock;
  Dispatcher d(&clock);
  std::vector<int> order;
  const EventId first = d.AddEvent([&] {
    // Adds (and so grows the event store) from inside a running callback.
    for (int i = 0; i < 100; ++i) {
      const EventId e = d.AddEvent([&order, i] { order.push_back(i); });
      d.Schedule(e, At(1));
    }
    order.push_back(-1);
  });
  d.Schedule(first, At(0));
  RunUntil(d, clock, At(1));
  ASSERT_EQ(order.size(), 101u);
  EXPECT_EQ(order[0], -1);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i + 1], i);
}

TEST(Dispatcher, OneShotTimerRunsOnce) {
  VirtualClock clock;
  Dispatcher d(&clock);
  int runs = 0;
  const TimerId t = d.AddTimer([&] { ++runs; });
  d.ScheduleTimer(t, At(10));
  RunUntil(d, clock, At(1000));
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(d.timer_stats(t).runs, 1u);
  EXPECT_EQ(d.timer_stats(t).missed, 0u);
}

TEST(Dispatcher, PeriodicTimerStaysOnItsGridAndCountsWhatItSkipped) {
  VirtualClock clock;
  Dispatcher d(&clock);
  std::vector<MonotonicTime> ran_at;
  const TimerId t = d.AddTimer([&] { ran_at.push_back(clock.Now()); });
  d.ScheduleTimer(t, At(10), milliseconds(10));
  RunUntil(d, clock, At(30));
  ASSERT_EQ(ran_at.size(), 3u);  // 10, 20, 30
  EXPECT_EQ(ran_at[2], At(30));
  // The loop is late: it reaches the timer only at 75. Expirations 40..70
  // passed; it runs once, skips three, and comes back at 80.
  clock.AdvanceTo(At(75));
  EXPECT_EQ(d.RunDue(clock.Now()), 1);
  EXPECT_EQ(d.timer_stats(t).runs, 4u);
  EXPECT_EQ(d.timer_stats(t).missed, 3u);
  EXPECT_EQ(d.NextDeadline(), At(80));
  d.DisableTimer(t);
  EXPECT_EQ(d.NextDeadline(), std::nullopt);
}

TEST(Dispatcher, PeriodicTimerIsOrderedBeforeWhatItsCallbackSchedules) {
  VirtualClock clock;
  Dispatcher d(&clock);
  std::string trace;
  const EventId e = d.AddEvent([&] { trace += "e"; });
  const TimerId t = d.AddTimer([&] {
    trace += "t";
    if (trace == "t") d.Schedule(e, At(20));  // the timer's next time too
  });
  d.ScheduleTimer(t, At(10), milliseconds(10));
  RunUntil(d, clock, At(20));
  EXPECT_EQ(trace, "tte");
}

TEST(Dispatcher, PhasedLoopRunsAtItsPhaseAndReportsMissedCycles) {
  VirtualClock clock(At(0));
  Dispatcher d(&clock);
  std::vector<std::pair<int64_t, int>> runs;  // (ms, cycles)
  const PhasedLoopId p = d.AddPhasedLoop(
      [&](int cycles) {
        runs.emplace_back(std::chrono::duration_cast<milliseconds>(
                              clock.Now().time_since_epoch())
                              .count(),
                          cycles);
      },
      milliseconds(10), milliseconds(3));
  EXPECT_EQ(d.NextDeadline(), At(3));
  RunUntil(d, clock, At(23));
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0], std::make_pair(int64_t{3}, 1));
  EXPECT_EQ(runs[2], std::make_pair(int64_t{23}, 1));
  // Late: the loop gets to it at 57; 33, 43 and 53 passed.
  clock.AdvanceTo(At(57));
  d.RunDue(clock.Now());
  ASSERT_EQ(runs.size(), 4u);
  EXPECT_EQ(runs[3], std::make_pair(int64_t{57}, 3));
  EXPECT_EQ(d.phased_loop_stats(p).runs, 4u);
  EXPECT_EQ(d.phased_loop_stats(p).missed, 2u);
  EXPECT_EQ(d.NextDeadline(), At(63));  // back on phase
}

TEST(Dispatcher, PhasedLoopStartsAtTheFirstPhasePointAfterNow) {
  VirtualClock clock(At(100));
  Dispatcher d(&clock);
  const PhasedLoopId p = d.AddPhasedLoop([](int) {}, milliseconds(10),
                                         milliseconds(-3));  // = offset 7
  EXPECT_EQ(d.NextDeadline(), At(107));
  d.ResetPhasedLoop(p, milliseconds(25), milliseconds(100));  // offset 0
  EXPECT_EQ(d.NextDeadline(), At(125));
  d.DisablePhasedLoop(p);
  EXPECT_EQ(d.NextDeadline(), std::nullopt);
  clock.AdvanceTo(At(126));
  d.EnablePhasedLoop(p);
  EXPECT_EQ(d.NextDeadline(), At(150));
}

// Two runs of the same little simulation (timers, phased loops, events
// rescheduling each other at coinciding times) give the same trace.
std::string Simulate() {
  VirtualClock clock(At(0));
  Dispatcher d(&clock);
  std::string trace;
  auto stamp = [&](const char* who) {
    trace += who;
    trace += "@";
    trace += std::to_string(std::chrono::duration_cast<milliseconds>(
                                clock.Now().time_since_epoch())
                                .count());
    trace += " ";
  };
  const EventId echo = d.AddEvent([&] { stamp("echo"); });
  const TimerId fast = d.AddTimer([&] {
    stamp("fast");
    d.Schedule(echo, clock.Now() + milliseconds(3));
  });
  const TimerId slow = d.AddTimer([&] { stamp("slow"); });
  d.AddPhasedLoop([&](int) { stamp("phase"); }, milliseconds(10));
  // What a node's on-run callback would do (EventLoop runs those).
  stamp("run");
  d.ScheduleTimer(fast, At(5), milliseconds(5));
  d.ScheduleTimer(slow, At(10), milliseconds(10));
  RunUntil(d, clock, At(30));
  return trace;
}

TEST(Dispatcher, SimulatedRunsAreDeterministic) {
  const std::string first = Simulate();
  EXPECT_EQ(first, Simulate());
  // At 10, 20, 30: the phased loop (scheduled when added, first ticket), then
  // slow (scheduled by on-run before fast's first reschedule), then fast.
  EXPECT_EQ(first,
            "run@0 fast@5 echo@8 phase@10 slow@10 fast@10 echo@13 fast@15 "
            "echo@18 phase@20 slow@20 fast@20 echo@23 fast@25 echo@28 "
            "phase@30 slow@30 fast@30 ");
}

}  // namespace
}  // namespace tether::loop
