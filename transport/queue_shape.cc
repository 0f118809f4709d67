#include "transport/queue_shape.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "transport/text_hints.h"

namespace tether::transport {

using internal::Quote;
using internal::View;

namespace internal {

namespace {

std::string FormatSeconds(double seconds) {
  std::ostringstream out;
  out << seconds;
  return out.str() + " s";
}

}  // namespace

DepthResult ResolveQueueDepth(config::Channel::Reader channel) {
  const uint32_t depth = channel.getQueueDepth();
  const double frequency = channel.getFrequencyHz();
  const double history = channel.getHistorySeconds();
  const std::string valid = ChannelFieldRange("queueDepth");
  if (!std::isfinite(history) || history < 0) {
    return {0, "historySeconds",
            absl::StrCat(history, " is not valid; use seconds > 0")};
  }
  uint64_t needed = 0;
  if (history > 0) {
    if (!std::isfinite(frequency) || frequency <= 0) {
      return {0, "historySeconds",
              "needs frequencyHz to derive a queue depth; set frequencyHz "
              "(> 0) or give queueDepth instead"};
    }
    const double messages = std::ceil(frequency * history * (1 - 1e-12));
    if (messages > shm::kMaxQueueDepth) {
      return {0, "historySeconds",
              absl::StrCat(FormatSeconds(history), " at ", frequency, " Hz is ",
                           messages, " messages, more than ",
                           shm::kMaxQueueDepth, "; keep less history")};
    }
    needed = static_cast<uint64_t>(messages);
  }
  if (depth == 0) {
    if (history == 0) {
      return {0, "queueDepth",
              absl::StrCat("missing or 0; set queueDepth (", valid,
                           ") or historySeconds (seconds of history at "
                           "frequencyHz)")};
    }
    return {std::bit_ceil(static_cast<uint32_t>(std::max<uint64_t>(needed, 2))),
            "", ""};
  }
  if (depth < 2 || depth > shm::kMaxQueueDepth) {
    return {0, "queueDepth",
            absl::StrCat(depth, " is out of range; use ", valid)};
  }
  if (!std::has_single_bit(depth)) {
    return {0, "queueDepth",
            absl::StrCat(depth, " is not a power of two; use ",
                         std::bit_ceil(depth), " (", valid, ")")};
  }
  if (depth < needed) {
    return {0, "queueDepth",
            absl::StrCat(depth, " messages do not hold historySeconds = ",
                         FormatSeconds(history), " at ", frequency, " Hz (",
                         needed, " messages); use ",
                         std::bit_ceil(static_cast<uint32_t>(needed)),
                         " or omit queueDepth")};
  }
  return {depth, "", ""};
}

}  // namespace internal

absl::StatusOr<uint32_t> QueueDepthFor(config::Channel::Reader channel) {
  internal::DepthResult depth = internal::ResolveQueueDepth(channel);
  if (!depth.error.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("channel ", Quote(View(channel.getName())), ": ",
                     depth.field, ": ", depth.error));
  }
  return depth.depth;
}

std::string ChannelFieldRange(std::string_view field) {
  if (field == "maxSize") {
    return absl::StrCat(kMinMaxSize, "..", shm::kMaxSlotSize,
                        " bytes (the largest framed message: 8-byte segment "
                        "table + message)");
  }
  if (field == "queueDepth") {
    return absl::StrCat("a power of two in 2..", shm::kMaxQueueDepth);
  }
  if (field == "maxPublishers") {
    return absl::StrCat("1..", shm::kMaxPublishers);
  }
  if (field == "maxPinned") {
    return absl::StrCat("0..", shm::kMaxPinned,
                        " (one bit per pinning reader in a slot's pin word)");
  }
  return "";
}

absl::StatusOr<shm::QueueParams> QueueParamsFor(
    config::Channel::Reader channel) {
  absl::StatusOr<uint32_t> depth = QueueDepthFor(channel);
  if (!depth.ok()) return depth.status();
  const uint32_t max_size = channel.getMaxSize();
  if (max_size < kMinMaxSize || max_size > shm::kMaxSlotSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("channel ", Quote(View(channel.getName())),
                     ": maxSize: ", max_size, " is out of range; use ",
                     kMinMaxSize, "..", shm::kMaxSlotSize, " bytes"));
  }
  shm::QueueParams params;
  // Rounded up to whole Cap'n Proto words; kMaxSlotSize is a multiple of 8.
  params.slot_size = (max_size + 7u) & ~7u;
  params.queue_depth = *depth;
  params.max_publishers = channel.getMaxPublishers();
  params.max_pinned = channel.getMaxPinned();
  if (absl::Status status = shm::Validate(params); !status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "channel ", Quote(View(channel.getName())), ": ", status.message()));
  }
  return params;
}

}  // namespace tether::transport
