// ros_bridge/ros1msg: RosEnvelope messages (envelope.capnp) in tether slots:
// building one in place around serialized ROS bytes, and decoding one to
// JSON for tools (`tether echo` on a bridged channel). ROS-independent.
#ifndef TETHER_ROS_BRIDGE_ROS1MSG_ENVELOPE_H_
#define TETHER_ROS_BRIDGE_ROS1MSG_ENVELOPE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include "absl/strings/string_view.h"
#include <tuple>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "ros_bridge/ros1msg/definition.h"
#include "transport/framing.h"

namespace tether::ros1msg {

// The Cap'n Proto type id of RosEnvelope. Any thread.
uint64_t EnvelopeTypeId();

// Everything in an envelope but the data.
struct EnvelopeHeader {
  absl::string_view type;
  absl::string_view md5sum;
  absl::string_view definition;
  bool latching = false;
  absl::string_view callerid;
  absl::string_view topic;
  int64_t receive_time_ns = 0;
  absl::string_view origin_graph;
  absl::string_view origin_bridge;
};

// Builds an envelope for `slot` (a publisher's loan; `arena` is that
// publisher's private BuildArena, sized like the channel's slots) with
// `data_size` bytes of data that `fill` writes in place in the slot (a blob:
// one copy, from ROS straight into shared memory, never zeroed first).
// Returns the offset and size to send (RawPublisher::Send(size, nullptr,
// offset)), or kOverflow (larger than the channel's slots; `fill` is not
// called). No heap allocation while it fits; one thread per arena.
transport::FinishResult BuildEnvelope(
    transport::BuildArena* arena, std::span<std::byte> slot,
    absl::string_view channel, const EnvelopeHeader& header, size_t data_size,
    absl::FunctionRef<void(std::span<uint8_t>)> fill);

// A checked view of a framed envelope (copied out of nothing: the views
// point into `framed`, which must outlive them).
struct EnvelopeView {
  EnvelopeHeader header;
  std::span<const uint8_t> data;
};
// InvalidArgument if `framed` is not a valid envelope. Allocation-free.
absl::Status ReadEnvelope(std::span<const std::byte> framed,
                          EnvelopeView* out);

// Decodes envelopes to JSON, keeping each distinct definition parsed once.
// One thread; allocates.
class EnvelopeDecoder {
 public:
  // {"type":..,"md5sum":..,"topic":..,"callerid":..,"latching":..,
  //  "receive_time_ns":..,"origin":{"graph":..,"bridge":..},
  //  "message":{<the ROS message, json.h>}}.
  // InvalidArgument when the envelope or its data is malformed, or its
  // definition does not parse.
  absl::StatusOr<std::string> ToJson(std::span<const std::byte> framed);

  // The parsed definition of (type, md5sum, definition), cached.
  absl::StatusOr<const MessageDefinition*> Definition(
      absl::string_view type, absl::string_view md5sum,
      absl::string_view definition);

 private:
  std::map<std::tuple<std::string, std::string, std::string>,
           std::unique_ptr<MessageDefinition>>
      cache_;
};

}  // namespace tether::ros1msg

#endif  // TETHER_ROS_BRIDGE_ROS1MSG_ENVELOPE_H_
