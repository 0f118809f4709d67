#include "examples/summary.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tether::examples {

void TrackingAccumulator::AddTracked(double ex_m, double ey_m,
                                     double eheading_rad, bool saturated) {
  const double e2 = ex_m * ex_m + ey_m * ey_m;
  sum_sq_ += e2;
  sum_sq_heading_ += eheading_rad * eheading_rad;
  summary_.max_error_m = std::max(summary_.max_error_m, std::sqrt(e2));
  ++summary_.tracked_cycles;
  summary_.saturated_cycles += saturated;
}

TrackingSummary TrackingAccumulator::summary() const {
  TrackingSummary s = summary_;
  if (s.tracked_cycles > 0) {
    s.rms_error_m = std::sqrt(sum_sq_ / static_cast<double>(s.tracked_cycles));
    s.rms_heading_error_rad =
        std::sqrt(sum_sq_heading_ / static_cast<double>(s.tracked_cycles));
  }
  return s;
}

std::string FormatTracking(const TrackingSummary& t) {
  return absl::StrFormat(
      "tracking rms %.1f mm, max %.1f mm, heading rms %.2f deg over %d "
      "cycles; missed cycles %d; saturated %d",
      t.rms_error_m * 1e3, t.max_error_m * 1e3,
      t.rms_heading_error_rad * 180 / std::numbers::pi, t.tracked_cycles,
      t.missed_cycles, t.saturated_cycles);
}

std::string FormatSummaryTable(const MonitorSummary& summary) {
  size_t width = 7;  // "CHANNEL"
  for (const ChannelSummary& c : summary.channels) {
    width = std::max(width, c.name.size());
  }
  std::string out = absl::StrFormat(
      "%-*s %9s %9s %7s %9s %9s %9s %9s %9s %9s\n", static_cast<int>(width),
      "CHANNEL", "SENT", "RECEIVED", "MISSED", "MALFORMED", "RATE HZ",
      "P50 US", "P99 US", "MAX US", "SEND FAIL");
  for (const ChannelSummary& c : summary.channels) {
    absl::StrAppendFormat(
        &out, "%-*s %9d %9d %7d %9d %9.1f %9.1f %9.1f %9.1f %9d\n",
        static_cast<int>(width), c.name, c.sent, c.received, c.missed,
        c.malformed, c.rate_hz, c.latency_p50_us, c.latency_p99_us,
        c.latency_max_us, c.send_failures);
  }
  absl::StrAppend(&out, absl::StrFormat("over %.1f s; ", summary.elapsed_s),
                  FormatTracking(summary.tracking), "\n");
  return out;
}

MonitorSummary SummaryFromStatus(MonitorStatus::Reader status) {
  MonitorSummary s;
  s.elapsed_s = status.getElapsedS();
  for (MonitorStatus::ChannelHealth::Reader c : status.getChannels()) {
    ChannelSummary cs;
    cs.name = c.getName().cStr();
    cs.sent = c.getSent();
    cs.received = c.getReceived();
    cs.missed = c.getMissed();
    cs.malformed = c.getMalformed();
    cs.rate_hz = c.getRateHz();
    cs.latency_p50_us = c.getLatencyP50Us();
    cs.latency_p99_us = c.getLatencyP99Us();
    cs.latency_max_us = c.getLatencyMaxUs();
    s.channels.push_back(std::move(cs));
  }
  MonitorStatus::TrackingHealth::Reader t = status.getTracking();
  s.tracking.cycles = t.getCycles();
  s.tracking.missed_cycles = t.getMissedCycles();
  s.tracking.tracked_cycles = t.getTrackedCycles();
  s.tracking.rms_error_m = t.getRmsErrorM();
  s.tracking.max_error_m = t.getMaxErrorM();
  s.tracking.rms_heading_error_rad = t.getRmsHeadingErrorRad();
  s.tracking.saturated_cycles = t.getSaturatedCycles();
  return s;
}

}  // namespace tether::examples
