// transport: checks a JSON value against a Cap'n Proto struct schema before
// it is decoded, strictly and in the user's words: unknown fields (with a
// "did you mean"), wrong value kinds, integers out of range or not whole,
// non-finite numbers, unknown enum names, two members of one union, values
// given twice. Capnp's own JsonCodec ignores unknown fields by default and
// words its errors for library authors; this is what config files and
// `tether pub` show instead. Setup/tool use only: allocates.
#ifndef TETHER_TRANSPORT_JSON_CHECK_H_
#define TETHER_TRANSPORT_JSON_CHECK_H_

#include <functional>
#include <string>
#include <utility>

#include "capnp/compat/json.h"
#include "capnp/schema.h"

namespace tether::transport {

class JsonSchemaChecker {
 public:
  // `error(path, message)` is called once per problem; `path` is the field
  // path ("channels[2].queueDepth", "" for the top level).
  // `range_of(path)`, if given, is the valid range of an integer field
  // in the caller's words ("16..268435456 bytes"), or "" to name the
  // field type's own range: an out-of-range value is told what the field
  // takes, not only what its type can hold.
  explicit JsonSchemaChecker(
      std::function<void(const std::string& path, std::string message)> error,
      std::function<std::string(const std::string& path)> range_of = nullptr)
      : error_(std::move(error)), range_of_(std::move(range_of)) {}

  // Checks `value` (from capnp::JsonCodec::decodeRaw) as a `schema` struct
  // at `path`. Any thread.
  void CheckStruct(capnp::JsonValue::Reader value, capnp::StructSchema schema,
                   const std::string& path);

  // "the number 3", "the string \"x\"", "an array": how a value is named in
  // messages.
  static std::string Kind(capnp::JsonValue::Reader value);

 private:
  static std::string StructName(capnp::StructSchema schema);
  void CheckInteger(capnp::JsonValue::Reader value, const std::string& path,
                    double min, double max, bool allow_string);
  void CheckValue(capnp::JsonValue::Reader value, capnp::Type type,
                  const std::string& path);

  std::function<void(const std::string&, std::string)> error_;
  std::function<std::string(const std::string&)> range_of_;
};

}  // namespace tether::transport

#endif  // TETHER_TRANSPORT_JSON_CHECK_H_
