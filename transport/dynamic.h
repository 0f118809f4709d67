// transport: messages as JSON and back, through a schema known only at run
// time (compiled in, or read from a channel or a log). Serves `tether echo`,
// `tether pub` and the tools; not for real-time paths (allocates).
#ifndef TETHER_TRANSPORT_DYNAMIC_H_
#define TETHER_TRANSPORT_DYNAMIC_H_

#include <cstddef>
#include <span>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "capnp/schema.h"

namespace tether::transport {

// Framed message bytes (as in a slot) -> one-line JSON object of `type`.
// InvalidArgument with the reason if the bytes are not a valid message, or
// if it would print as more values than about 4 per word of message (lists
// of empty structs or Void: a hostile sender's way to make a printer run
// out of memory). Int64/UInt64 fields print as JSON strings (Cap'n Proto's JSON convention),
// Data fields as arrays of numbers.
absl::StatusOr<std::string> MessageToJson(capnp::StructSchema type,
                                          std::span<const std::byte> framed);

// Whether MessageToJson() could decode the framed bytes as `type`, checked
// without making JSON: the framing, every pointer (CheckWholeMessage), then
// every field read as the schema says (a pointer of the wrong kind for its
// field fails here, as it fails a typed reader that reads the field). OK,
// or InvalidArgument with the reason, in MessageToJson()'s words. Lists of
// scalars, Text and Data are checked as a whole, not element by element, so
// it costs about one walk over the message's pointers. Any alignment.
absl::Status CheckMessageDecodes(capnp::StructSchema type,
                                 std::span<const std::byte> framed);

// JSON text -> framed message of `type`, as 8-byte words (aligned, so it can
// go straight to RawPublisher::Publish). Strict (JsonSchemaChecker): unknown
// fields, wrong value kinds, out-of-range or non-finite numbers and unknown
// enum names are errors. InvalidArgument naming each problem by field path
// (and bad JSON by line and column) so a CLI user can fix the command line.
absl::StatusOr<std::vector<uint64_t>> JsonToMessage(capnp::StructSchema type,
                                                    const std::string& json);

}  // namespace tether::transport

#endif  // TETHER_TRANSPORT_DYNAMIC_H_
