// ros_bridge/ros1msg: ROS 1 message definitions, parsed from the full
// definition text a TCPROS connection header or a bag carries (the type's
// .msg text, then each type it uses after a line of '=' and "MSG: pkg/Name").
// With it any serialized message can be walked field by field without ROS
// installed and without compiled types (decoder.h, typed.h).
// ROS-independent: no ROS headers.
#ifndef TETHER_ROS_BRIDGE_ROS1MSG_DEFINITION_H_
#define TETHER_ROS_BRIDGE_ROS1MSG_DEFINITION_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"

namespace tether::ros1msg {

// The built-in field types of ROS 1 (plus kMessage for a nested type).
enum class Primitive : uint8_t {
  kBool,
  kInt8,  // also the deprecated `byte`
  kUInt8,  // also the deprecated `char`
  kInt16,
  kUInt16,
  kInt32,
  kUInt32,
  kInt64,
  kUInt64,
  kFloat32,
  kFloat64,
  kString,
  kTime,
  kDuration,
  kMessage,
};

// "int32", "time", ...; "message" for kMessage. Any thread.
const char* PrimitiveName(Primitive p);
// Serialized size of a fixed-size primitive (bool 1 ... time 8); 0 for
// kString and kMessage.
size_t PrimitiveSize(Primitive p);

struct MessageSpec;

struct Field {
  std::string name;
  Primitive type = Primitive::kBool;
  // kMessage: the nested type (owned by the MessageDefinition).
  const MessageSpec* message = nullptr;
  // As written, e.g. "Header", "geometry_msgs/Point", "float64".
  std::string type_text;
  bool is_array = false;
  // Fixed-length arrays (float64[9]); -1: variable length (uint32 count on
  // the wire).
  int64_t array_length = -1;
};

struct Constant {
  std::string name;
  Primitive type = Primitive::kBool;
  std::string value;  // as written (strings: the rest of the line)
};

struct MessageSpec {
  std::string full_name;  // "pkg/Name"
  std::vector<Field> fields;
  std::vector<Constant> constants;
};

// A parsed full definition: the root type and every type it uses. Immutable
// after Parse(); any thread may read it. Not copyable (fields point into it);
// movable via unique_ptr.
class MessageDefinition {
 public:
  // Parses `text` as the full definition of `type` ("pkg/Name"). Resolves
  // bare names the way ROS does ("Header" -> std_msgs/Header, "Point" inside
  // package p -> p/Point). InvalidArgument naming the line when the text is
  // malformed or a used type is missing from it. Allocates; not RT-safe.
  static absl::StatusOr<std::unique_ptr<MessageDefinition>> Parse(
      absl::string_view type, absl::string_view text);

  MessageDefinition(const MessageDefinition&) = delete;
  MessageDefinition& operator=(const MessageDefinition&) = delete;

  const MessageSpec& root() const { return *root_; }
  // A type of this definition by full name, or null.
  const MessageSpec* Find(absl::string_view full_name) const;

 private:
  MessageDefinition() = default;
  std::map<std::string, std::unique_ptr<MessageSpec>, std::less<>> specs_;
  const MessageSpec* root_ = nullptr;
};

}  // namespace tether::ros1msg

#endif  // TETHER_ROS_BRIDGE_ROS1MSG_DEFINITION_H_
