// ros_bridge: what a bridge is told to do (filled by main() from flags and
// a config file, bridge_config.h). ROS-independent.
#ifndef TETHER_ROS_BRIDGE_BRIDGE_OPTIONS_H_
#define TETHER_ROS_BRIDGE_BRIDGE_OPTIONS_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "shm/channel.h"

namespace tether::ros_bridge {

enum class Direction { kBoth, kRosToTether, kTetherToRos };

struct PairOptions {
  std::string ros;      // topic
  std::string tether;   // channel
  Direction direction = Direction::kBoth;
  // Empty: envelopes. A common type (ros1msg/typed.h): its typed twin.
  std::string type;
  bool latch = false;  // typed tether -> ROS: advertise latched
  uint32_t max_size = 0;     // 0: BridgeOptions::max_size
  uint32_t queue_depth = 0;  // 0: BridgeOptions::queue_depth
};

struct PrefixOptions {
  std::string ros;     // "/sim"
  std::string tether;  // "/ros/sim"
  Direction direction = Direction::kBoth;
};

struct BridgeOptions {
  std::string master_uri;  // empty: $ROS_MASTER_URI (roscpp's default)
  std::string node_name = "tether_bridge";
  std::vector<PairOptions> pairs;
  std::vector<PrefixOptions> prefixes;
  shm::ChannelOptions channels;  // tether root and instance
  uint32_t max_size = 1 << 20;
  uint32_t queue_depth = 16;
  uint32_t ros_queue_size = 16;
  uint32_t outbox_depth = 16;
  uint32_t discovery_period_ms = 500;
  uint32_t status_period_ms = 1000;
  // Publish BridgeStatus on /tether/ros_bridge/<node>/status.
  bool status_channel = true;
  // Run() returns when this fd becomes readable (StopSignals::fd()).
  int stop_fd = -1;
  // Events and progress, one line each ("ros-bridge: ...").
  std::ostream* log = nullptr;
};

// "both", "ros-to-tether"/"to-tether", "tether-to-ros"/"to-ros". Any thread.
bool ParseDirection(const std::string& text, Direction* out);
const char* DirectionName(Direction d);

}  // namespace tether::ros_bridge

#endif  // TETHER_ROS_BRIDGE_BRIDGE_OPTIONS_H_
