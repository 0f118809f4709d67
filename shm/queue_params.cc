#include "shm/queue_params.h"

#include <algorithm>
#include <bit>

#include "absl/strings/str_cat.h"

namespace tether::shm {

absl::Status Validate(const QueueParams& p) {
  if (p.slot_size == 0 || p.slot_size > kMaxSlotSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("slot_size ", p.slot_size, " is out of range: use 1..",
                     kMaxSlotSize, " bytes"));
  }
  if (p.queue_depth < 2 || p.queue_depth > kMaxQueueDepth ||
      !std::has_single_bit(p.queue_depth)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "queue_depth ", p.queue_depth, " is not valid: use a power of two in 2..",
        kMaxQueueDepth, " (e.g. ",
        // Clamped first: bit_ceil of a value above 2^31 is undefined (a
        // corrupt header gives any value; found by the channel fuzzer).
        std::bit_ceil(std::clamp(p.queue_depth, 2u, kMaxQueueDepth)),
        ")"));
  }
  if (p.max_publishers == 0 || p.max_publishers > kMaxPublishers) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_publishers ", p.max_publishers,
                     " is out of range: use 1..", kMaxPublishers));
  }
  if (p.max_pinned > kMaxPinned) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_pinned ", p.max_pinned, " is out of range: use 0..",
                     kMaxPinned, " (one bit per pinning reader)"));
  }
  return absl::OkStatus();
}

}  // namespace tether::shm
