// ros_bridge/ros1msg: the data behind typed.h's CommonTypes() (internal).
#ifndef TETHER_ROS_BRIDGE_ROS1MSG_COMMON_TYPES_H_
#define TETHER_ROS_BRIDGE_ROS1MSG_COMMON_TYPES_H_

#include <span>

#include "capnp/schema.h"

namespace tether::ros1msg::internal {

struct CommonTypeText {
  const char* ros_type;
  const char* md5sum;
  capnp::StructSchema schema;
  const char* definition;
};

// Built on first use; any thread.
std::span<const CommonTypeText> CommonTypeTexts();

}  // namespace tether::ros1msg::internal

#endif  // TETHER_ROS_BRIDGE_ROS1MSG_COMMON_TYPES_H_
