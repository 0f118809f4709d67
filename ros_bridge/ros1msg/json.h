// ros_bridge/ros1msg: a serialized ROS 1 message -> JSON, driven by its
// parsed definition (definition.h): `tether echo` and `tether log cat` show
// bridged ROS messages this way with no ROS installed. ROS-independent.
#ifndef TETHER_ROS_BRIDGE_ROS1MSG_JSON_H_
#define TETHER_ROS_BRIDGE_ROS1MSG_JSON_H_

#include <cstdint>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "ros_bridge/ros1msg/definition.h"

namespace tether::ros1msg {

// One-line JSON object with the ROS field names, e.g. for geometry_msgs/Twist
// {"linear":{"x":1,"y":0,"z":0},"angular":{"x":0,"y":0,"z":0.5}}.
//   - integers as JSON numbers (64-bit values exactly, as decimal text);
//   - floats in the shortest form that reads back to the same value; NaN
//     and infinities as the strings "NaN", "Infinity", "-Infinity";
//   - time and duration as {"secs":S,"nsecs":N} (rostopic's form);
//   - strings as JSON strings (bytes that are not UTF-8 as \u00XX);
//   - arrays (uint8[] too) as JSON arrays.
// InvalidArgument with the field path and byte offset when `data` is
// truncated, has bytes left over, or has a count that cannot fit. Never
// reads outside `data`. Allocates; not RT-safe.
absl::StatusOr<std::string> MessageToJson(const MessageDefinition& definition,
                                          std::span<const uint8_t> data);

// Appends `text` as a JSON string (quotes included) to `out`.
void AppendJsonString(absl::string_view text, std::string* out);

}  // namespace tether::ros1msg

#endif  // TETHER_ROS_BRIDGE_ROS1MSG_JSON_H_
