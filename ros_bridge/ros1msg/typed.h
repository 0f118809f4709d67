// ros_bridge/ros1msg: typed channels for common ROS types. A serialized ROS
// 1 message <-> its Cap'n Proto twin (std_msgs.capnp, geometry_msgs.capnp,
// sensor_msgs.capnp), so a tether node reads /joint_states as a typed
// sensor_msgs JointState instead of an envelope. The conversion is generic,
// driven by the ROS definition: ROS field `frame_id` <-> Cap'n Proto field
// `frameId`, uint8[] <-> Data, other arrays <-> List, time/duration <->
// RosTime/RosDuration; it is exact both ways (ROS -> Cap'n Proto -> ROS
// gives the same bytes). ROS-independent.
#ifndef TETHER_ROS_BRIDGE_ROS1MSG_TYPED_H_
#define TETHER_ROS_BRIDGE_ROS1MSG_TYPED_H_

#include <cstdint>
#include <span>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/status.h"
#include "capnp/dynamic.h"
#include "capnp/schema.h"
#include "ros_bridge/ros1msg/definition.h"
#include "transport/schema_registry.h"

namespace tether::ros1msg {

// One ROS type with a typed twin. Immutable; any thread.
struct CommonType {
  absl::string_view ros_type;    // "geometry_msgs/Twist"
  absl::string_view md5sum;      // ROS's, for publishing into ROS
  absl::string_view definition;  // ROS's full definition text
  capnp::StructSchema schema;   // the Cap'n Proto twin
  // Parsed `definition`.
  const MessageDefinition* parsed = nullptr;
};

// Every common type (std_msgs scalars, String, Header, Time, Duration;
// geometry_msgs Vector3, Point, Quaternion, Pose, PoseStamped, Twist,
// TwistStamped; sensor_msgs JointState, Imu, Image). Built once on first use
// (allocates then); any thread.
std::span<const CommonType> CommonTypes();
// By ROS name or by the twin's Cap'n Proto type id; null if none.
const CommonType* FindCommonType(absl::string_view ros_type);
const CommonType* FindCommonTypeById(uint64_t capnp_type_id);

// Registers the envelope and every twin in `schemas` (so channels of these
// types can be created and decoded). Setup.
void RegisterRosSchemas(transport::SchemaRegistry* schemas);

// Decodes `data` (a serialized message of definition.root()) into `out` (a
// builder of the twin type). InvalidArgument naming the field when the bytes
// are malformed or the Cap'n Proto type lacks a field. Allocates; not
// RT-safe.
absl::Status RosToCapnp(const MessageDefinition& definition,
                        std::span<const uint8_t> data,
                        capnp::DynamicStruct::Builder out);

// Serializes `in` as definition.root() into `out` (cleared first).
// InvalidArgument naming the field when a fixed-size ROS array gets a list
// of another length, or the message is malformed.
absl::Status CapnpToRos(const MessageDefinition& definition,
                        capnp::DynamicStruct::Reader in,
                        std::vector<uint8_t>* out);

// "frame_id" -> "frameId". Any thread.
std::string CamelCase(absl::string_view ros_name);

}  // namespace tether::ros1msg

#endif  // TETHER_ROS_BRIDGE_ROS1MSG_TYPED_H_
