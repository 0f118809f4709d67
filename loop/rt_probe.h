// loop: the deadline experiment, and the probe built on it that tells
// whether this kernel's io_uring wait timeouts are hard for real-time
// waiters (`tether doctor --rt-probe`; the verdict is cached per boot by
// rt_probe_cache.h and decides DeadlineTimer::kAuto, make_wake_port.h).
//
// The experiment: a SCHED_FIFO 40 waiter sleeps until each point of a
// 500 us grid while a SCHED_FIFO 20 thread on the same CPU runs busy bursts
// of 50-1000 us separated by sleeps of 50-200 us. A hard timer fires in
// hard interrupt context and the waiter preempts the burst at once; a soft
// one (on PREEMPT_RT: expired by the ktimers thread, SCHED_FIFO 1) waits
// until the burst ends, so the waiter is late by what is left of the burst
// and misses deadlines (bursts are longer than the period). The probe runs
// it for the io_uring wait timeout (UringFutexPort, DeadlineTimer::kRingWait:
// what a loop does) and for clock_nanosleep(TIMER_ABSTIME) (a hard timer for
// RT tasks, the floor), in alternating rounds, and compares.
//
// Needs SCHED_FIFO (root, CAP_SYS_NICE or RLIMIT_RTPRIO >= 40). It loads
// one CPU for about a second at SCHED_FIFO 20: run it on a quiet machine,
// not beside a running robot stack.
#ifndef TETHER_LOOP_RT_PROBE_H_
#define TETHER_LOOP_RT_PROBE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "loop/clock.h"
#include "loop/kernel_probe.h"
#include "loop/rt_probe_cache.h"

namespace tether::loop {

using std::chrono::microseconds;

// The same-CPU real-time load of the experiment.
struct BurstLoadOptions {
  int cpu = 0;
  int priority = 20;  // SCHED_FIFO
  Duration min_burst = microseconds(50);
  Duration max_burst = microseconds(1000);
  Duration min_sleep = microseconds(50);
  Duration max_sleep = microseconds(200);
  uint32_t seed = 1;
};

// A SCHED_FIFO thread pinned to one CPU that alternates busy bursts and
// sleeps (uniformly random lengths) until it is destroyed. Not movable.
class BurstLoad {
 public:
  // Starts the thread; waits until it runs with its policy. Errors from
  // realtime.h (PermissionDenied naming CAP_SYS_NICE / RLIMIT_RTPRIO,
  // InvalidArgument for a CPU outside the allowed set).
  // Any thread; not RT-safe (starts a thread).
  static absl::StatusOr<std::unique_ptr<BurstLoad>> Start(
      const BurstLoadOptions& options);
  // Stops and joins the thread (within one burst). Not RT-safe.
  ~BurstLoad();
  BurstLoad(const BurstLoad&) = delete;
  BurstLoad& operator=(const BurstLoad&) = delete;

  // Bursts run so far. Any thread; RT-safe.
  int64_t bursts() const { return bursts_.load(std::memory_order_relaxed); }

 private:
  BurstLoad() = default;
  void Run(const BurstLoadOptions& options);

  std::atomic<bool> stop_{false};
  std::atomic<int64_t> bursts_{0};
  std::thread thread_;
};

// What a waiter saw against its grid of deadlines.
struct DeadlineStats {
  int64_t deadlines = 0;   // grid points that passed (woken for or missed)
  int64_t wakeups = 0;     // wakeups, one per deadline woken for
  int64_t late_100us = 0;  // wakeups later than their deadline by > 100 us
  int64_t late_300us = 0;  // ... by > 300 us
  int64_t missed = 0;      // deadlines that passed with no wakeup
  // Lateness of the wakeups (zero when there were none).
  Duration p50 = Duration::zero();
  Duration p99 = Duration::zero();
  Duration max = Duration::zero();
};

// Collects wakeups of a periodic waiter. Record() is RT-safe (no
// allocation: samples beyond `capacity` are counted but not kept for the
// percentiles). One thread at a time.
class DeadlineRecorder {
 public:
  explicit DeadlineRecorder(size_t capacity);  // allocates
  // A wakeup `lateness` after its deadline, after `missed` grid points that
  // passed with no wakeup. RT-safe.
  void Record(Duration lateness, int64_t missed);
  // Not RT-safe (sorts a copy).
  DeadlineStats Stats() const;

 private:
  std::vector<int64_t> lateness_ns_;  // reserved to capacity
  size_t capacity_;
  DeadlineStats counts_;
};

// Wakes the calling thread at each point of the grid start + k*period
// (k >= 1) until `end`, with `wait_until(t)` (which must return at or after
// t; a spurious early return is retried), and records each wakeup. A wakeup
// after later grid points counts them as missed and waits for the first
// point still ahead. Calling thread; RT-safe as `wait_until` is.
void RunDeadlineGrid(MonotonicTime start, Duration period, MonotonicTime end,
                     absl::FunctionRef<void(MonotonicTime)> wait_until,
                     DeadlineRecorder* recorder);

// clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME) until `t` (retries EINTR):
// the floor. Calling thread; RT-safe.
void NanosleepUntil(MonotonicTime t);

// The verdict on `ring` (the io_uring wait timeout) against `floor`
// (clock_nanosleep) from the same run, in this order: kInconclusive when
// either saw fewer than 100 wakeups; kSoft when the ring wait's median
// lateness is over 100 us and over twice the floor's (a soft timer waits for
// the rest of a burst: hundreds of us, where a hard one is as late as the
// floor), or it missed more than twice the floor's deadlines plus max(10, 3%
// of the deadlines); kInconclusive when the floor missed over 60% (other
// real-time work, or a starved virtual CPU: nothing to compare against);
// else kHard. Medians first because they survive a noisy machine (an
// emulator whose virtual CPUs the host preempts for milliseconds makes
// both waits miss alike). `reason` (if not null) gets one sentence with the
// numbers. Any thread; pure.
RingWaitTimer JudgeRingWait(const DeadlineStats& ring,
                            const DeadlineStats& floor, std::string* reason);

struct RtProbeOptions {
  // The CPU the waiter and the load share; -1: the highest CPU this
  // process may run on.
  int cpu = -1;
  int waiter_priority = 40;  // SCHED_FIFO
  // The load; its cpu is replaced by `cpu`.
  BurstLoadOptions load;
  Duration period = microseconds(500);
  // Total run time, both waits, in `rounds` alternating rounds.
  Duration duration = std::chrono::seconds(1);
  int rounds = 4;
};

struct RtProbeResult {
  RingWaitTimer verdict = RingWaitTimer::kInconclusive;
  std::string reason;
  DeadlineStats ring_wait;  // UringFutexPort with DeadlineTimer::kRingWait
  DeadlineStats floor;      // clock_nanosleep(TIMER_ABSTIME)
  int cpu = -1;
  bool preempt_rt = false;
  std::string kernel_release;
};

// Runs the experiment on a thread of its own (the caller's scheduling is not
// touched) and judges it. FailedPrecondition when io_uring cannot be used;
// the realtime.h error when SCHED_FIFO or the CPU is refused.
// Any thread; not RT-safe; blocks for options.duration plus setup.
absl::StatusOr<RtProbeResult> RunRtProbe(const RtProbeOptions& options,
                                         const KernelFeatures& features);

// What WriteRtProbeCache() stores for `result` on this boot. Not RT-safe.
RtProbeRecord MakeRtProbeRecord(const RtProbeResult& result,
                                const std::string& boot_id);

}  // namespace tether::loop

#endif  // TETHER_LOOP_RT_PROBE_H_
