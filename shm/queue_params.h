// shm: the plain parameters that size one channel queue. This is the only
// input the shm layer takes about a channel's shape; config parsing lives in
// transport/ and derives these.
#ifndef TETHER_SHM_QUEUE_PARAMS_H_
#define TETHER_SHM_QUEUE_PARAMS_H_

#include <cstdint>

#include "absl/status/status.h"

namespace tether::shm {

// Limits that Validate() enforces. They keep every derived size and index in
// range of the 32/64-bit fields that live in shared memory.
inline constexpr uint32_t kMaxSlotSize = 256u << 20;  // 256 MiB per message
inline constexpr uint32_t kMaxQueueDepth = 1u << 20;  // ring entries
inline constexpr uint32_t kMaxPublishers = 1024;
// Pins are one bit each in a 64-bit word per slot (the pin words of the
// reader-state file,
// see shm/layout.h).
inline constexpr uint32_t kMaxPinned = 64;

struct QueueParams {
  // Largest message in bytes (the payload area of one slot). >= 1.
  uint32_t slot_size = 0;
  // Ring entries: how many of the newest messages a reader can still read.
  // A power of two, >= 2.
  uint32_t queue_depth = 0;
  // Publishers that may be registered at once (each owns one loaned slot).
  uint32_t max_publishers = 1;
  // Readers that may hold a slot pinned at once (watchers reading in place).
  // Unpinned reads (fetch/peek) are not limited. 0..kMaxPinned.
  uint32_t max_pinned = 0;

  // Slots in the pool: queue_depth + max_publishers + max_pinned.
  uint64_t pool_size() const {
    return uint64_t{queue_depth} + max_publishers + max_pinned;
  }

  friend bool operator==(const QueueParams&, const QueueParams&) = default;
};

// OK, or InvalidArgument naming the field, its value and what would be valid.
absl::Status Validate(const QueueParams& params);

}  // namespace tether::shm

#endif  // TETHER_SHM_QUEUE_PARAMS_H_
