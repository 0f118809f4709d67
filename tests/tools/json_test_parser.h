// tests/tools: a strict JSON parser (RFC 8259) for tests that check the CLI's
// --json output is valid and has the expected keys. Test-only.
#ifndef TETHER_TESTS_TOOLS_JSON_TEST_PARSER_H_
#define TETHER_TESTS_TOOLS_JSON_TEST_PARSER_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace tether::tools::test {

struct JsonValue {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };
  Kind kind = Kind::kNull;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<JsonValue> array;
  std::vector<std::pair<std::string, JsonValue>> object;  // In input order.

  // The member `key` of an object, or nullptr (also for non-objects).
  const JsonValue* Find(std::string_view key) const;
};

// Parses exactly one JSON value (surrounding whitespace allowed). Rejects
// anything RFC 8259 does not allow: trailing commas, raw control characters
// in strings, bad escapes, leading zeros, trailing bytes, duplicate keys.
absl::StatusOr<JsonValue> ParseJson(std::string_view text);

}  // namespace tether::tools::test

#endif  // TETHER_TESTS_TOOLS_JSON_TEST_PARSER_H_
