// shm internal: reach into a Channel's file layout from outside the queue
// code — for tests, audits and fuzzers that check or corrupt the shared
// structures on purpose. Production code never includes this.
#ifndef TETHER_SHM_CHANNEL_ACCESS_H_
#define TETHER_SHM_CHANNEL_ACCESS_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "shm/channel.h"
#include "shm/layout.h"

namespace tether::shm::internal {

struct ChannelAccess {
  static ChannelHeader* header(const Channel& c) { return c.header(); }
  static PublisherEntry* publisher_entry(const Channel& c, uint32_t i) {
    return c.publisher_entry(i);
  }
  static ReaderEntry* reader_entry(const Channel& c, uint32_t i) {
    return c.reader_entry(i);
  }
  static std::atomic<uint64_t>* ring_entry(const Channel& c, uint64_t q) {
    return c.ring_entry(q);
  }
  static SlotHeader* slot_header(const Channel& c, uint64_t slot) {
    return c.slot_header(slot);
  }
  static std::byte* payload(const Channel& c, uint64_t slot) {
    return c.payload(slot);
  }
  // The reader-state file's parts.
  static ReaderStateHeader* state_header(const Channel& c) {
    return c.state_header();
  }
  static std::atomic<uint64_t>* pin_word(const Channel& c, uint64_t slot) {
    return c.pin_word(slot);
  }
  static SleeperEntry* sleeper_entry(const Channel& c, uint32_t i) {
    return c.sleeper_entry(i);
  }
};

}  // namespace tether::shm::internal

#endif  // TETHER_SHM_CHANNEL_ACCESS_H_
