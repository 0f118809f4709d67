#include "benchmarks/rt_report.h"

#include <algorithm>
#include <cmath>
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

void Json::Comma() {
  if (need_comma_) out_ += ",";
  need_comma_ = false;
}

Json& Json::Begin() {
  Comma();
  out_ += "{";
  return *this;
}
Json& Json::End() {
  out_ += "}";
  need_comma_ = true;
  return *this;
}
Json& Json::BeginArray() {
  Comma();
  out_ += "[";
  return *this;
}
Json& Json::EndArray() {
  out_ += "]";
  need_comma_ = true;
  return *this;
}
Json& Json::Key(const std::string& key) {
  Str(key);
  out_ += ":";
  need_comma_ = false;
  return *this;
}
Json& Json::Str(const std::string& value) {
  Comma();
  out_ += "\"";
  for (char c : value) {
    switch (c) {
      case '"': out_ += "\\\""; break;
      case '\\': out_ += "\\\\"; break;
      case '\n': out_ += "\\n"; break;
      case '\t': out_ += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out_ += buf;
        } else {
          out_ += c;
        }
    }
  }
  out_ += "\"";
  need_comma_ = true;
  return *this;
}
Json& Json::Num(double value) {
  Comma();
  char buf[40];
  if (std::isfinite(value)) {
    std::snprintf(buf, sizeof(buf), "%.3f", value);
  } else {
    std::snprintf(buf, sizeof(buf), "null");
  }
  out_ += buf;
  need_comma_ = true;
  return *this;
}
Json& Json::Int(int64_t value) {
  Comma();
  out_ += std::to_string(value);
  need_comma_ = true;
  return *this;
}
Json& Json::Bool(bool value) {
  Comma();
  out_ += value ? "true" : "false";
  need_comma_ = true;
  return *this;
}

}  // namespace tether::bench
