// examples: what a run of the demo stack achieved, as plain structs -- the
// controller's tracking (error, missed cycles) and the monitor's per-channel
// traffic (sent, received, missed, rate, send->receive latency) -- plus the
// text table `tether demo` and the monitor print. Also converts the
// monitor's MonitorStatus message back into these structs, so a process that
// only watches /monitor/status can print the same table.
#ifndef TETHER_EXAMPLES_SUMMARY_H_
#define TETHER_EXAMPLES_SUMMARY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "examples/demo.capnp.h"

namespace tether::examples {

struct TrackingSummary {
  uint64_t cycles = 0;          // controller cycles run (or commands seen)
  uint64_t missed_cycles = 0;   // phase points skipped because it ran late
  uint64_t tracked_cycles = 0;  // cycles with tracking enabled
  double rms_error_m = 0;       // position error |reference - estimate|
  double max_error_m = 0;
  double rms_heading_error_rad = 0;
  uint64_t saturated_cycles = 0;  // a wheel torque hit the motor limit
};

struct ChannelSummary {
  std::string name;
  uint64_t sent = 0;
  uint64_t received = 0;
  uint64_t missed = 0;
  // Received but skipped: the bytes failed the typed check (sent ==
  // received + missed + malformed when nothing is lost silently).
  uint64_t malformed = 0;
  double rate_hz = 0;
  double latency_p50_us = 0;
  double latency_p99_us = 0;
  double latency_max_us = 0;
  // Sends that failed on the channel (too large, no slot, corrupt), as its
  // publishers counted them: a failure is never silent.
  uint64_t send_failures = 0;
};

struct MonitorSummary {
  double elapsed_s = 0;
  std::vector<ChannelSummary> channels;
  TrackingSummary tracking;  // from the JointCommands the monitor saw
};

// Running RMS / max of the tracking error. RT-safe; not thread-safe.
class TrackingAccumulator {
 public:
  void AddCycles(uint64_t cycles, uint64_t missed) {
    summary_.cycles += cycles;
    summary_.missed_cycles += missed;
  }
  void AddTracked(double ex_m, double ey_m, double eheading_rad,
                  bool saturated);
  void AddUntracked(bool saturated) { summary_.saturated_cycles += saturated; }
  TrackingSummary summary() const;

 private:
  TrackingSummary summary_;
  double sum_sq_ = 0;
  double sum_sq_heading_ = 0;
};

// A multi-line table (one row per channel, then the tracking line), for
// terminals. Allocates; any thread.
std::string FormatSummaryTable(const MonitorSummary& summary);
// One line: "tracking rms 3.1 mm, max 7.9 mm, heading rms 0.2 deg, ...".
std::string FormatTracking(const TrackingSummary& tracking);

// The summary a MonitorStatus message carries. Allocates.
MonitorSummary SummaryFromStatus(MonitorStatus::Reader status);

}  // namespace tether::examples

#endif  // TETHER_EXAMPLES_SUMMARY_H_
