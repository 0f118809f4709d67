// benchmarks: wakes under contention. A SCHED_FIFO 80 publisher process on
// CPU 0 sends every 500 us to a SCHED_FIFO 80 subscriber process on CPU 1,
// on a channel that lower-priority (SCHED_OTHER) processes also publish on
// and subscribe to every 200 us, each living 50-300 ms and replaced as it
// ends (registrations come and go), beside one SCHED_FIFO 50 burst thread
// per CPU (bursts of 50-1000 us). For each mechanism: the real-time
// deliveries (lost, late by > 100 us, p50, p99, the longest) and the real-time
// publisher's time inside Send (p50, p99, max).
//
// Mechanisms:
//   tether_uring_futex   tether's stack: transport::Publisher::Send ->
//                        UringEventLoop watchers, io_uring FUTEX_WAIT
//   tether_futex_waitv   the same with the futex_waitv-thread backend
//   raw_futex            one shared word: every publisher bumps it and
//                        FUTEX_WAKEs all; every reader FUTEX_WAITs on it
//                        (the floor of a blocking wake on one futex)
//   raw_futex_split      experiment: real-time readers wait on their own
//                        word, the others on a second one; publishers bump
//                        both and wake the real-time word first, so no
//                        lower-priority reader ever arms (takes the hash
//                        bucket lock of) the real-time readers' futex
//   raw_futex_rt_wakes   experiment: as split, but lower-priority
//                        publishers never FUTEX_WAKE the real-time word
//                        (they only bump it; real-time readers see their
//                        messages at the next real-time wake), so no
//                        lower-priority task ever dequeues a real-time
//                        reader's wait and is then preempted before waking
//                        it (the wake_q window)
//   msg_ring             experiment: no futex; each reader's ring fd is
//                        handed to publishers (pidfd_getfd) and a publisher
//                        posts one IORING_OP_MSG_RING per reader, the
//                        real-time reader first (DEFER_TASKRUN targets: the
//                        kernel allocates a request per message)
#ifndef TETHER_BENCHMARKS_RT_CONTENTION_H_
#define TETHER_BENCHMARKS_RT_CONTENTION_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "benchmarks/rt_report.h"
#include "loop/clock.h"
#include "loop/wake_port.h"

namespace tether::bench {

struct ContentionOptions {
  // Measured time per mechanism, split over `rounds` rounds that alternate
  // the mechanisms.
  loop::Duration duration = std::chrono::seconds(4);
  int rounds = 4;
  loop::Duration rt_period = std::chrono::microseconds(500);
  loop::Duration churn_period = std::chrono::microseconds(200);
  int churners = 4;  // lower-priority processes alive at a time
  loop::Duration churner_min_life = std::chrono::milliseconds(50);
  loop::Duration churner_max_life = std::chrono::milliseconds(300);
  int rt_priority = 80;
  int burst_priority = 50;  // 0: no burst threads
  int rt_publisher_cpu = 0;
  int rt_subscriber_cpu = 1;
  // The tether loops' deadline mode (their only timer is a safety one).
  loop::DeadlineTimer deadline_timer = loop::DeadlineTimer::kAuto;
  // Keys of the mechanisms to run (empty: all, in the order above).
  std::vector<std::string> mechanisms;
};

struct ContentionRow {
  std::string key;
  std::string label;
  std::string note;  // what the subscriber's port said, or why it was skipped
  bool ran = false;
  int64_t rt_sent = 0;
  int64_t rt_delivered = 0;
  int64_t lost = 0;  // sent, never delivered by the end
  Summary delivery;  // send -> real-time reader
  Summary send;      // the real-time publisher's time inside Send
  int64_t churners_started = 0;
  int64_t churn_sent = 0;
};

// The mechanisms in order: key and label. Any thread.
std::vector<std::pair<std::string, std::string>> ContentionMechanisms();

// Runs the experiment for each chosen mechanism, in alternating rounds. Errors:
// fewer than 2 CPUs, SCHED_FIFO refused, setup failures. A mechanism the
// kernel lacks is a row with ran = false and the reason in `note`.
// Not RT-safe; forks processes; blocks about duration + rounds x 0.3 s per
// mechanism.
absl::StatusOr<std::vector<ContentionRow>> RunContention(
    const ContentionOptions& options);

}  // namespace tether::bench

#endif  // TETHER_BENCHMARKS_RT_CONTENTION_H_
