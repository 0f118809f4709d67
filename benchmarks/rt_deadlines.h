// benchmarks: the deadline experiment over tether's real loop. A SCHED_FIFO
// 40 UringEventLoop (one watched channel, as a node has) runs a 500 us
// phased loop while a SCHED_FIFO 20 thread on the same CPU runs busy bursts
// of 50-1000 us (loop/rt_probe.h's BurstLoad); each of tether's deadline
// modes, and clock_nanosleep(TIMER_ABSTIME) as the floor, in alternating
// rounds: wakeups late by > 100 us and > 300 us, deadlines missed, p50, p99,
// max. The "default" row is what a loop picks here (DeadlineTimer::kAuto,
// from this boot's rt-probe verdict, if any).
#ifndef TETHER_BENCHMARKS_RT_DEADLINES_H_
#define TETHER_BENCHMARKS_RT_DEADLINES_H_

#include <chrono>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "loop/clock.h"
#include "loop/rt_probe.h"

namespace tether::bench {

struct DeadlineOptions {
  int cpu = -1;  // -1: the highest allowed CPU
  int waiter_priority = 40;
  loop::BurstLoadOptions load;  // cpu replaced by `cpu`; priority 20
  loop::Duration period = std::chrono::microseconds(500);
  // Run time of each mode, split over `rounds` rounds.
  loop::Duration per_mode = std::chrono::seconds(2);
  int rounds = 4;
};

struct DeadlineRow {
  std::string key;    // "ring_wait", "hard", "futex_waitv", "default", "floor"
  std::string label;  // for people
  std::string detail; // the port's description (tether rows)
  bool hard = false;  // times deadlines with a hard timer
  loop::DeadlineStats stats;
};

struct DeadlineReport {
  int cpu = -1;
  std::vector<DeadlineRow> rows;
};

// Runs every mode the kernel supports. Errors: SCHED_FIFO refused, no
// io_uring, channel setup. Not RT-safe; blocks for about 5 x per_mode.
absl::StatusOr<DeadlineReport> RunDeadlines(const DeadlineOptions& options);

}  // namespace tether::bench

#endif  // TETHER_BENCHMARKS_RT_DEADLINES_H_
