// benchmarks: what the real-time benchmark (rt_benchmark.cc) reports with:
// percentiles of a set of durations, markdown tables, and a small JSON
// writer (the benchmark must not depend on tools/).
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

// Builds one JSON value by appending; the caller keeps the structure
// balanced. Strings are escaped. Not RT-safe.
class Json {
 public:
  Json& Begin();  // {
  Json& End();    // }
  Json& BeginArray();
  Json& EndArray();
  Json& Key(const std::string& key);
  Json& Str(const std::string& value);
  Json& Num(double value);
  Json& Int(int64_t value);
  Json& Bool(bool value);
  const std::string& str() const { return out_; }

 private:
  void Comma();
  std::string out_;
  bool need_comma_ = false;
};

}  // namespace tether::bench

#endif  // TETHER_BENCHMARKS_RT_REPORT_H_
