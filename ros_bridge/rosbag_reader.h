// ros_bridge: ros1msg::BagReader for ROS 1 bags (format 2.0, any
// compression), through Debian's rosbag_storage. The only implementation
// that needs ROS; tools take it through the ROS-independent interface.
#ifndef TETHER_ROS_BRIDGE_ROSBAG_READER_H_
#define TETHER_ROS_BRIDGE_ROSBAG_READER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "ros_bridge/ros1msg/bag_reader.h"

namespace tether::ros_bridge {

// Opens `path` for reading. NotFound / DataLoss (not a bag, unindexed
// `.bag.active`: run `rosbag reindex`) with the reason. Setup.
absl::StatusOr<std::unique_ptr<ros1msg::BagReader>> OpenRosBag(
    const std::string& path);

}  // namespace tether::ros_bridge

#endif  // TETHER_ROS_BRIDGE_ROSBAG_READER_H_
