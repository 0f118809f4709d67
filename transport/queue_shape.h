// transport: the shape of a channel's shared queue from its config entry —
// the queue depth (given, or derived from rate x history) and the
// shm::QueueParams that size its file. Used by config validation, channel
// creation and tools that recreate channels (replay, bridges).
#ifndef TETHER_TRANSPORT_QUEUE_SHAPE_H_
#define TETHER_TRANSPORT_QUEUE_SHAPE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "shm/queue_params.h"
#include "transport/config.capnp.h"

namespace tether::transport {

// Segment table word + root pointer word: the smallest framed message, and
// so the smallest maxSize.
inline constexpr uint32_t kMinMaxSize = 16;

// The valid values of a channel's numeric config field as errors give them
// after "use " (maxSize, queueDepth, maxPublishers, maxPinned); "" for any
// other field. One wording for the JSON check (a value no field of its
// type can hold) and the config's own validation. Any thread.
std::string ChannelFieldRange(std::string_view field);

// The queue depth a channel asks for: queueDepth if set, else
// ceil(frequencyHz * historySeconds) rounded up to a power of two (>= 2).
// InvalidArgument (naming the channel) if neither is usable or they
// disagree. Any thread; allocates only for the error.
absl::StatusOr<uint32_t> QueueDepthFor(config::Channel::Reader channel);

// The shm queue shape of a channel: slot_size = maxSize rounded up to 8 bytes
// (Cap'n Proto words), queue_depth = QueueDepthFor(channel), max_publishers
// and max_pinned as configured; checked with shm::Validate. Channels from a
// StackConfig always succeed. Any thread; allocates only for the error.
absl::StatusOr<shm::QueueParams> QueueParamsFor(
    config::Channel::Reader channel);

namespace internal {
// The depth, or the field at fault and why (config validation words it).
struct DepthResult {
  uint32_t depth = 0;
  std::string field;  // the field at fault when error is set
  std::string error;
};
DepthResult ResolveQueueDepth(config::Channel::Reader channel);
}  // namespace internal

}  // namespace tether::transport

#endif  // TETHER_TRANSPORT_QUEUE_SHAPE_H_
