#include "loop/rt_probe.h"

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "loop/realtime.h"
#include "loop/uring_futex_port.h"
#include "loop/wake_port.h"

namespace tether::loop {
namespace {

timespec ToTimespec(MonotonicTime t) {
  const int64_t ns = t.time_since_epoch().count();
  return timespec{static_cast<time_t>(ns / 1'000'000'000),
                  static_cast<long>(ns % 1'000'000'000)};
}

Duration Uniform(std::mt19937& rng, Duration lo, Duration hi) {
  if (hi <= lo) return lo;
  std::uniform_int_distribution<int64_t> d(lo.count(), hi.count());
  return Duration(d(rng));
}

// Pins the calling thread and makes it SCHED_FIFO `priority`.
absl::Status BecomeRealtime(int cpu, int priority) {
  const int cpus[] = {cpu};
  if (absl::Status s = SetThreadAffinity(cpus); !s.ok()) return s;
  return SetThreadScheduling(SchedPolicy::kFifo, priority);
}

std::string Percent(int64_t part, int64_t whole) {
  return absl::StrFormat("%.1f%%", whole > 0 ? 100.0 * part / whole : 0.0);
}

}  // namespace

// --- BurstLoad ---------------------------------------------------------------

absl::StatusOr<std::unique_ptr<BurstLoad>> BurstLoad::Start(
    const BurstLoadOptions& options) {
  std::unique_ptr<BurstLoad> load(new BurstLoad());
  std::atomic<int> started{0};  // 1 running, -1 failed
  absl::Status status;
  BurstLoad* raw = load.get();
  load->thread_ = std::thread([raw, options, &started, &status] {
    absl::Status s = BecomeRealtime(options.cpu, options.priority);
    if (!s.ok()) {
      status = std::move(s);
      started.store(-1, std::memory_order_release);
      return;
    }
    started.store(1, std::memory_order_release);
    raw->Run(options);
  });
  while (started.load(std::memory_order_acquire) == 0) {
    std::this_thread::sleep_for(microseconds(100));
  }
  if (started.load(std::memory_order_acquire) < 0) {
    load->thread_.join();
    return status;
  }
  return load;
}

BurstLoad::~BurstLoad() {
  stop_.store(true, std::memory_order_relaxed);
  if (thread_.joinable()) thread_.join();
}

void BurstLoad::Run(const BurstLoadOptions& options) {
  std::mt19937 rng(options.seed);
  while (!stop_.load(std::memory_order_relaxed)) {
    const MonotonicTime end =
        MonotonicNow() + Uniform(rng, options.min_burst, options.max_burst);
    while (MonotonicNow() < end) {
      __asm__ __volatile__("pause" ::: "memory");
    }
    bursts_.fetch_add(1, std::memory_order_relaxed);
    NanosleepUntil(MonotonicNow() +
                   Uniform(rng, options.min_sleep, options.max_sleep));
  }
}

// --- DeadlineRecorder --------------------------------------------------------

DeadlineRecorder::DeadlineRecorder(size_t capacity) : capacity_(capacity) {
  lateness_ns_.reserve(capacity);
}

void DeadlineRecorder::Record(Duration lateness, int64_t missed) {
  if (lateness < Duration::zero()) lateness = Duration::zero();
  ++counts_.wakeups;
  counts_.deadlines += 1 + missed;
  counts_.missed += missed;
  if (lateness > microseconds(100)) ++counts_.late_100us;
  if (lateness > microseconds(300)) ++counts_.late_300us;
  if (lateness > counts_.max) counts_.max = lateness;
  if (lateness_ns_.size() < capacity_) lateness_ns_.push_back(lateness.count());
}

DeadlineStats DeadlineRecorder::Stats() const {
  DeadlineStats stats = counts_;
  if (lateness_ns_.empty()) return stats;
  std::vector<int64_t> sorted = lateness_ns_;
  std::sort(sorted.begin(), sorted.end());
  const auto at = [&](double q) {
    const size_t i = std::min(sorted.size() - 1,
                              static_cast<size_t>(q * (sorted.size() - 1) + 0.5));
    return Duration(sorted[i]);
  };
  stats.p50 = at(0.50);
  stats.p99 = at(0.99);
  return stats;
}

void RunDeadlineGrid(MonotonicTime start, Duration period, MonotonicTime end,
                     absl::FunctionRef<void(MonotonicTime)> wait_until,
                     DeadlineRecorder* recorder) {
  MonotonicTime deadline = start + period;
  while (deadline <= end) {
    MonotonicTime now = MonotonicNow();
    while (now < deadline) {
      wait_until(deadline);
      now = MonotonicNow();
    }
    int64_t missed = 0;
    MonotonicTime next = deadline + period;
    while (next <= now) {
      ++missed;
      next += period;
    }
    recorder->Record(now - deadline, missed);
    deadline = next;
  }
}

void NanosleepUntil(MonotonicTime t) {
  const timespec ts = ToTimespec(t);
  while (::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) ==
         EINTR) {
  }
}

// --- the verdict ---------------------------------------------------------------

RingWaitTimer JudgeRingWait(const DeadlineStats& ring,
                            const DeadlineStats& floor, std::string* reason) {
  const auto describe = [](const char* name, const DeadlineStats& s) {
    return absl::StrFormat(
        "%s missed %d of %d deadlines (%s), %d wakeups late by > 300 us, "
        "p50 %.0f us, max %.0f us",
        name, s.missed, s.deadlines, Percent(s.missed, s.deadlines),
        s.late_300us, s.p50.count() / 1e3, s.max.count() / 1e3);
  };
  const std::string numbers =
      absl::StrCat(describe("the io_uring wait timeout", ring), "; ",
                   describe("clock_nanosleep", floor));
  RingWaitTimer verdict;
  std::string why;
  const int64_t margin = std::max<int64_t>(10, ring.deadlines * 3 / 100);
  const bool late_typically = ring.p50 > floor.p50 + microseconds(100) &&
                              ring.p50 > 2 * floor.p50;
  const bool misses_more = ring.missed > 2 * floor.missed + margin;
  if (floor.wakeups < 100 || ring.wakeups < 100) {
    verdict = RingWaitTimer::kInconclusive;
    why = "too few wakeups to judge";
  } else if (late_typically || misses_more) {
    verdict = RingWaitTimer::kSoft;
    why = "io_uring wait timeouts are soft for real-time waiters here "
          "(they wait for the same-CPU SCHED_FIFO load): loops use "
          "hard-timer deadlines";
  } else if (floor.missed * 5 > floor.deadlines * 3) {
    verdict = RingWaitTimer::kInconclusive;
    why = "the floor itself missed over 60% (the CPU is busy with other "
          "real-time work): cannot tell";
  } else {
    verdict = RingWaitTimer::kHard;
    why = "io_uring wait timeouts keep deadlines as clock_nanosleep does: "
          "loops wait in io_uring";
  }
  if (reason != nullptr) *reason = absl::StrCat(why, " (", numbers, ")");
  return verdict;
}

// --- the probe -------------------------------------------------------------------

absl::StatusOr<RtProbeResult> RunRtProbe(const RtProbeOptions& options,
                                         const KernelFeatures& features) {
  if (absl::Status s = IoUringStatus(features); !s.ok()) return s;
  if (options.rounds <= 0 || options.duration <= Duration::zero() ||
      options.period <= Duration::zero()) {
    return absl::InvalidArgumentError(
        "rt-probe: rounds, duration and period must be positive");
  }
  RtProbeResult result;
  result.cpu = options.cpu >= 0 ? options.cpu : HighestAllowedCpu();
  result.preempt_rt = features.preempt_rt;
  result.kernel_release = features.kernel_release;

  WakePortOptions port_options;
  port_options.backend = WakeBackend::kUringFutex;
  port_options.deadline_timer = DeadlineTimer::kRingWait;
  port_options.max_watches = 1;
  absl::StatusOr<std::unique_ptr<UringFutexPort>> port = UringFutexPort::Create(
      port_options, /*hard_deadlines=*/false, "rt-probe");
  if (!port.ok()) return port.status();

  const Duration slice = options.duration / (2 * options.rounds);
  const size_t capacity =
      static_cast<size_t>(options.duration / options.period) + 16;
  DeadlineRecorder ring(capacity), floor(capacity);
  absl::Status status;
  // The waiter thread: SCHED_FIFO, pinned, alternating the two waits with
  // the load running beside it on the same CPU.
  std::thread waiter([&] {
    if (absl::Status s = BecomeRealtime(result.cpu, options.waiter_priority);
        !s.ok()) {
      status = std::move(s);
      return;
    }
    BurstLoadOptions load_options = options.load;
    load_options.cpu = result.cpu;
    absl::StatusOr<std::unique_ptr<BurstLoad>> load =
        BurstLoad::Start(load_options);
    if (!load.ok()) {
      status = load.status();
      return;
    }
    NoSleepHooks hooks;
    const auto ring_wait = [&](MonotonicTime t) {
      (void)(*port)->Wait(t, hooks, [](uint64_t) {});
    };
    for (int round = 0; round < options.rounds; ++round) {
      MonotonicTime start = MonotonicNow();
      RunDeadlineGrid(start, options.period, start + slice, ring_wait, &ring);
      start = MonotonicNow();
      RunDeadlineGrid(start, options.period, start + slice, NanosleepUntil,
                      &floor);
    }
    load->reset();
    port->reset();  // on the thread that bound it (its registered ring fd)
  });
  waiter.join();
  if (!status.ok()) return status;
  result.ring_wait = ring.Stats();
  result.floor = floor.Stats();
  result.verdict = JudgeRingWait(result.ring_wait, result.floor, &result.reason);
  return result;
}

RtProbeRecord MakeRtProbeRecord(const RtProbeResult& result,
                                const std::string& boot_id) {
  RtProbeRecord record;
  record.boot_id = boot_id;
  record.kernel_release = result.kernel_release;
  record.ring_wait = result.verdict;
  record.summary = absl::StrCat("CPU ", result.cpu, ": ", result.reason);
  return record;
}

}  // namespace tether::loop
