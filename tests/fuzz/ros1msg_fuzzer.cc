// Fuzz target: ROS 1 message definitions and serialized messages, as the
// bridge and `tether echo` meet them from a ROS graph or a bag (no ROS
// installed: ros_bridge/ros1msg). The input is split at its first 0 byte:
// before it, a full message definition (the text a publisher or a bag
// sends); after it, serialized message bytes decoded to JSON with that
// definition and with a few built-in ones (Twist, Imu, JointState, ...).
// The whole input also goes through the envelope decoder (what a bridged
// channel's slot holds). Findings: crashes, sanitizer reports, hangs
// (a count that claims 2^32 elements must not be trusted).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "ros_bridge/ros1msg/typed.h"
#include "ros_bridge/ros1msg/definition.h"
#include "ros_bridge/ros1msg/envelope.h"
#include "ros_bridge/ros1msg/json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace r = tether::ros1msg;
  const uint8_t* split =
      static_cast<const uint8_t*>(std::memchr(data, 0, size));
  const size_t text_size = split == nullptr ? size : split - data;
  const std::string text(reinterpret_cast<const char*>(data), text_size);
  const std::span<const uint8_t> message =
      split == nullptr ? std::span<const uint8_t>()
                       : std::span<const uint8_t>(split + 1,
                                                  size - text_size - 1);
  auto definition = r::MessageDefinition::Parse("fuzz_msgs/Fuzz", text);
  if (definition.ok()) (void)r::MessageToJson(**definition, message);
  for (const char* type : {"geometry_msgs/Twist", "sensor_msgs/Imu",
                           "sensor_msgs/JointState", "std_msgs/String"}) {
    if (const r::CommonType* t = r::FindCommonType(type); t != nullptr) {
      (void)r::MessageToJson(*t->parsed, message);
    }
  }
  // A bridged channel's slot: 8-byte aligned framed bytes.
  std::vector<uint64_t> words(size / 8 + 1);
  std::memcpy(words.data(), data, size);
  r::EnvelopeDecoder decoder;
  (void)decoder.ToJson(
      {reinterpret_cast<const std::byte*>(words.data()), size});
  return 0;
}
