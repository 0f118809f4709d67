// util: a minimal JSON writer (objects, arrays, strings, numbers, booleans,
// pretty-printed) for machine-readable output: the CLI's `--json` (tools/)
// and the benchmarks' (benchmarks/). Depends on nothing but the standard
// library, so any layer may use it.
#ifndef TETHER_UTIL_JSON_WRITER_H_
#define TETHER_UTIL_JSON_WRITER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tether::util {

// Builds one JSON document in memory. Calls must nest correctly (a Key()
// before each value inside an object, none inside an array); misuse aborts.
// Strings are taken as UTF-8 and escaped as JSON requires.
// Not thread-safe; not RT-safe (allocates).
class JsonWriter {
 public:
  JsonWriter() = default;
  JsonWriter(const JsonWriter&) = delete;
  JsonWriter& operator=(const JsonWriter&) = delete;

  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  JsonWriter& Key(std::string_view key);
  JsonWriter& String(std::string_view value);
  JsonWriter& Bool(bool value);
  JsonWriter& Int(int64_t value);
  JsonWriter& Uint(uint64_t value);
  // Fixed-point with `decimals` digits after the point ("%.3f" by default:
  // 12.345, 0.500, 1234.000), as the benchmarks' readers expect; NaN and
  // infinities, which JSON cannot hold, are written as null. `decimals`
  // must be 0..17.
  JsonWriter& Double(double value, int decimals = 3);
  JsonWriter& Null();

  // The document so far; complete once every Begin has its End.
  const std::string& str() const { return out_; }

 private:
  enum class Scope { kObject, kArray };
  void BeforeValue();
  void Newline();
  void Open(Scope scope, char c);
  void Close(Scope scope, char c);

  std::string out_;
  std::vector<Scope> scopes_;
  bool first_in_scope_ = true;
  bool after_key_ = false;
  bool done_ = false;
};

// `value` as a JSON string literal, quotes included. Any thread.
std::string JsonQuote(std::string_view value);

}  // namespace tether::util

#endif  // TETHER_UTIL_JSON_WRITER_H_
