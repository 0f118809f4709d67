// ros_bridge/ros1msg: reading recorded ROS messages (a ROS 1 bag; later a ROS
// 2 bag) as envelopes' worth of fields, in time order. The interface is
// ROS-independent so tools can take any implementation; the ROS 1 bag one
// (rosbag_storage) lives in //ros_bridge:rosbag_reader.
#ifndef TETHER_ROS_BRIDGE_ROS1MSG_BAG_READER_H_
#define TETHER_ROS_BRIDGE_ROS1MSG_BAG_READER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tether::ros1msg {

// One connection (topic + type + publisher) of a bag.
struct BagConnection {
  uint32_t id = 0;  // index into BagReader::connections()
  std::string topic;
  std::string type;        // "pkg/Name"
  std::string md5sum;
  std::string definition;  // full message definition
  std::string callerid;    // the recording's publisher, if the bag has it
  bool latching = false;
  uint32_t max_data_size = 0;  // the largest message on it (bytes)
  uint64_t message_count = 0;
};

// One recorded message; `data` is the ROS serialization.
struct BagMessage {
  uint32_t connection = 0;
  int64_t time_ns = 0;  // the bag's receive time (ns since the epoch)
  std::vector<uint8_t> data;
};

struct BagSummary {
  int64_t start_time_ns = 0;
  int64_t end_time_ns = 0;
  uint64_t message_count = 0;
};

// Not thread-safe; one reader per thread. Setup calls allocate.
class BagReader {
 public:
  virtual ~BagReader() = default;
  virtual const std::vector<BagConnection>& connections() const = 0;
  virtual BagSummary summary() const = 0;
  // The next message in time order (ties: file order) into `out`, reusing
  // its buffer; nullopt-like false at the end. DataLoss naming the offset
  // when the file is corrupt.
  virtual absl::StatusOr<bool> Next(BagMessage* out) = 0;
};

}  // namespace tether::ros1msg

#endif  // TETHER_ROS_BRIDGE_ROS1MSG_BAG_READER_H_
