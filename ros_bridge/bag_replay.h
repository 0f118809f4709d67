// ros_bridge: `tether replay IN.bag` — plays a recorded ROS bag into tether
// channels as RosEnvelopes (one channel per topic, created with room for the
// bag's largest message), in real time or scaled, so tether nodes see the
// recording and a running bridge puts it back into ROS. Takes any
// ros1msg::BagReader; ROS-independent itself.
#ifndef TETHER_ROS_BRIDGE_BAG_REPLAY_H_
#define TETHER_ROS_BRIDGE_BAG_REPLAY_H_

#include <cstdint>
#include <map>
#include <ostream>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "ros_bridge/ros1msg/bag_reader.h"
#include "shm/channel.h"

namespace tether::ros_bridge {

struct BagReplayOptions {
  shm::ChannelOptions channels;
  double rate = 1.0;       // 2 = twice as fast; 0 = as fast as possible
  double start_s = 0;      // skip the first start_s seconds of the bag
  double end_s = -1;       // stop at end_s seconds into the bag (< 0: end)
  std::set<std::string> topics;  // empty: all
  std::map<std::string, std::string> remap;  // topic -> channel
  std::string prefix;      // channel = prefix + topic (after remapping)
  uint32_t queue_depth = 16;
  int stop_fd = -1;        // readable: stop
  std::ostream* progress = nullptr;  // a status line about once a second
};

struct BagReplayResult {
  uint64_t messages = 0;
  uint64_t dropped = 0;   // no slot to build in (channel readers too slow)
  uint32_t channels = 0;
  double seconds = 0;     // wall time
  bool stopped = false;   // by stop_fd
};

// Replays `bag` (its reader is consumed). Errors: a channel that exists
// with another type or too small for the bag's messages (named, with the
// fix). Blocks for the replay's duration.
absl::StatusOr<BagReplayResult> ReplayBag(ros1msg::BagReader& bag,
                                          const BagReplayOptions& options);

}  // namespace tether::ros_bridge

#endif  // TETHER_ROS_BRIDGE_BAG_REPLAY_H_
