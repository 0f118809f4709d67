// transport (internal to config loading): finds where JSON text is malformed
// and on which line each value sits, so config errors can name lines.
// capnp::JsonCodec does the decoding; its errors carry no position.
#ifndef TETHER_TRANSPORT_JSON_LOCATOR_H_
#define TETHER_TRANSPORT_JSON_LOCATOR_H_

#include <optional>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"

namespace tether::transport::internal {

struct JsonSyntaxError {
  int line = 0;    // 1-based
  int column = 0;  // 1-based, in bytes
  std::string message;
};

struct JsonLocations {
  // Set if the text is not one well-formed JSON value (RFC 8259, nesting up
  // to `max_depth`); `lines` is then incomplete.
  std::optional<JsonSyntaxError> error;
  // Line of every value by its path: "" for the top value, then
  // "channels", "channels[2]", "channels[2].queueDepth", ... For object
  // members it is the line of the key. A repeated key keeps its first line.
  absl::flat_hash_map<std::string, int> lines;
};

// Scans `text` once. Allocates; not RT-safe; any thread.
JsonLocations LocateJson(std::string_view text, int max_depth = 64);

}  // namespace tether::transport::internal

#endif  // TETHER_TRANSPORT_JSON_LOCATOR_H_
