// benchmarks: what the real-time benchmark (rt_benchmark.cc) reports with:
// percentiles of a set of durations and markdown tables (its JSON is
// written with util/json_writer.h).
#ifndef TETHER_BENCHMARKS_RT_REPORT_H_
#define TETHER_BENCHMARKS_RT_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

namespace tether::bench {

// A summary of durations in nanoseconds.
struct Summary {
  int64_t count = 0;
  int64_t over_100us = 0;
  int64_t over_300us = 0;
  double p50_us = 0;
  double p99_us = 0;
  double max_us = 0;
};

// Summarizes `ns` (sorted in place). Not RT-safe.
Summary Summarize(std::vector<int64_t>& ns);

// "12.3" style: one decimal under 100, none above. Not RT-safe.
std::string Us(double us);

// A markdown table: header row, separator, rows. Not RT-safe.
std::string MarkdownTable(const std::vector<std::string>& header,
                          const std::vector<std::vector<std::string>>& rows);

}  // namespace tether::bench

#endif  // TETHER_BENCHMARKS_RT_REPORT_H_
