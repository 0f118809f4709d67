// log: `tether log plot` — numeric fields of logged messages over time, read
// through the schemas the log carries, drawn as a PNG: one panel per field,
// sharing the time axis (seconds from the log's first message), with a grid,
// tick labels, and breaks in the line where messages are missing.
//
// A field is written CHANNEL.path: the longest channel name of the log that
// the text starts with, then struct fields separated by '.', list elements
// as name[i] (e.g. /robot/imu.angularVelocity.z, /x/status.channels[2].rateHz).
// Numbers, booleans (0/1) and enums (their ordinal) can be plotted.
//
// Threading: any thread. Not RT-safe (reads the file, allocates).
#ifndef TETHER_LOG_LOG_PLOT_H_
#define TETHER_LOG_LOG_PLOT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "log/log_reader.h"
#include "log/png_image.h"

namespace tether::log {

struct PlotSeries {
  std::string field;            // as given
  std::vector<double> time_s;   // from the log's start
  std::vector<double> value;
  uint64_t missed = 0;          // messages of its channel the log lacks
  uint64_t undecodable = 0;     // messages skipped as malformed
};

struct PlotRange {
  std::optional<double> start_s;
  std::optional<double> end_s;
};

// Reads every field's samples. InvalidArgument naming the field and what
// is valid for a bad field (the log's channels; the struct's fields; for a
// channel named without a field, its numeric fields), and for a list index
// past the end of its list in every message read (the longest list seen).
// A channel re-created while it was recorded (one MCAP channel per
// incarnation, one name) is read from every incarnation whose type has the
// field; the error of the first is returned if none has it.
absl::StatusOr<std::vector<PlotSeries>> ReadPlotSeries(
    LogReader& reader, const std::vector<std::string>& fields,
    const PlotRange& range = {});

struct PlotOptions {
  int width = 1400;
  int panel_height = 260;
  std::string title;  // above the first panel (e.g. the file name)
};

Image RenderPlot(const std::vector<PlotSeries>& series,
                 const PlotOptions& options);

// Ticks at "nice" values (multiples of 1, 2 or 5 x 10^k) inside [lo, hi],
// at most about `max_ticks` of them. Any thread.
std::vector<double> NiceTicks(double lo, double hi, int max_ticks);

}  // namespace tether::log

#endif  // TETHER_LOG_LOG_PLOT_H_
