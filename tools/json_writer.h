// tools: a minimal JSON writer for the CLI's machine-readable output
// (`--json`): objects, arrays, strings, numbers, booleans, pretty-printed.
#ifndef TETHER_TOOLS_JSON_WRITER_H_
#define TETHER_TOOLS_JSON_WRITER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tether::tools {

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

}  // namespace tether::tools

#endif  // TETHER_TOOLS_JSON_WRITER_H_
