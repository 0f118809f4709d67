#include "benchmarks/rt_report.h"

#include <algorithm>
#include <cstdio>

namespace tether::bench {

Summary Summarize(std::vector<int64_t>& ns) {
  Summary s;
  s.count = static_cast<int64_t>(ns.size());
  if (ns.empty()) return s;
  std::sort(ns.begin(), ns.end());
  const auto at = [&](double q) {
    const size_t i = std::min(ns.size() - 1,
                              static_cast<size_t>(q * (ns.size() - 1) + 0.5));
    return ns[i] / 1e3;
  };
  s.p50_us = at(0.5);
  s.p99_us = at(0.99);
  s.max_us = ns.back() / 1e3;
  for (int64_t v : ns) {
    if (v > 100'000) ++s.over_100us;
    if (v > 300'000) ++s.over_300us;
  }
  return s;
}

std::string Us(double us) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), us < 100 ? "%.1f" : "%.0f", us);
  return buf;
}

std::string MarkdownTable(const std::vector<std::string>& header,
                          const std::vector<std::vector<std::string>>& rows) {
  std::string out = "|";
  for (const std::string& h : header) out += " " + h + " |";
  out += "\n|";
  for (size_t i = 0; i < header.size(); ++i) out += "---|";
  out += "\n";
  for (const auto& row : rows) {
    out += "|";
    for (const std::string& cell : row) out += " " + cell + " |";
    out += "\n";
  }
  return out;
}

}  // namespace tether::bench
