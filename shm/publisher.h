// shm: the publishing side of a channel queue. A Publisher owns one slot at a
// time (its loan), builds the next message there in place, and commits it to
// the ring in one atomic step. See layout.h for the protocol.
#ifndef TETHER_SHM_PUBLISHER_H_
#define TETHER_SHM_PUBLISHER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "absl/status/statusor.h"
#include "shm/channel.h"

namespace tether::shm {

enum class [[nodiscard]] SendStatus {
  kOk,
  // size > slot_size; the loan is kept, nothing was sent.
  kTooLarge,
  // The publisher has no loan (the last send could not get a new slot, see
  // Loan()); nothing was sent.
  kNoLoan,
  // The channel's shared memory is inconsistent (bad ring entry, tail, or
  // the loan was taken from us), now or at an earlier operation of this
  // handle (Channel::corruption() says what and where); nothing was sent.
  // Report it; the channel needs re-creating.
  kCorrupt,
};

const char* ToString(SendStatus status);

// Send times; zero fields are stamped from CLOCK_MONOTONIC/CLOCK_REALTIME at
// commit. Log replay passes recorded times.
struct SendTimes {
  uint64_t monotonic_ns = 0;
  uint64_t realtime_ns = 0;
  // Not a time: where the message entered tether from outside, an opaque
  // tag a bridge sets (e.g. the ROS bridge: its ROS graph's) so that a
  // bridge never sends a message back to where it came from, also after
  // other bridges carried it (the net bridge passes it on). 0, the default
  // and what a send without SendTimes stores: made by a tether node.
  uint64_t origin = 0;
};

struct SendResult {
  SendStatus status = SendStatus::kOk;
  uint64_t queue_index = 0;  // the message's index in the channel (on kOk)
};

// A registered publisher. Not copyable or movable (owned by unique_ptr); the
// Channel must outlive it. Not thread-safe: one thread uses a Publisher at a
// time (use one Publisher per thread).
class Publisher {
 public:
  // Registers in the channel's publisher registry and takes a first loan.
  // ResourceExhausted naming max_publishers when the registry is full (after
  // sweeping dead publishers). DataLoss (Channel::CorruptionError: what is
  // wrong, where, and how to recover) when the channel is corrupt, found at
  // open or by that sweep: nothing could be sent, and the dead's entries are
  // not reclaimed from a corrupt channel. Not RT-safe (setup).
  static absl::StatusOr<std::unique_ptr<Publisher>> Create(Channel* channel);

  Publisher(const Publisher&) = delete;
  Publisher& operator=(const Publisher&) = delete;
  // Hands the loan back and frees the registry entry.
  ~Publisher();

  // The payload of the loaned slot: slot_size bytes, 64-byte aligned, owned by
  // this publisher alone until Send(). Contents are whatever the slot last
  // held (the caller overwrites what it uses). Empty if the publisher has no
  // loan and none can be had now (all slots pinned or held: see kNoLoan).
  // RT-safe: no allocation, no lock, no syscall (a rare O(pool) scan when the
  // previous send found its next slot pinned).
  std::span<std::byte> Loan();

  // Commits `size` bytes of the loan, starting `offset` bytes into it (a
  // multiple of 8; offset + size <= slot_size, else kTooLarge), as the next
  // message, wakes sleeping readers, and takes the evicted slot as the next
  // loan. RT-safe: lock-free, never blocks or waits for a reader, no
  // allocation, O(1) in the number of readers, at most one syscall
  // (FUTEX_WAKE, only when a reader sleeps). With `times` null the send is
  // stamped now.
  SendResult Send(size_t size, const SendTimes* times = nullptr,
                  size_t offset = 0);

  // Counts one send that failed in a layer above before it reached Send()
  // (no loan to build in, a build that outgrew the slot or was malformed),
  // in send_failures() and in the channel's publisher registry, where tools
  // read it: as Send() counts its own failures. Send() counts those
  // itself, so call this only for an attempt that never reaches Send(),
  // once. RT-safe: one relaxed atomic add in shared memory (tools read a
  // count, not an ordering); no allocation, no lock, no syscall.
  void CountFailure();

  uint32_t index() const { return index_; }
  uint64_t messages_sent() const { return sequence_; }
  // Sends that failed (any status but kOk, here or counted by
  // CountFailure()), also counted in the channel's publisher registry for
  // tools.
  uint64_t send_failures() const { return failures_; }
  Channel* channel() const { return channel_; }

 private:
  Publisher(Channel* channel, uint32_t index, uint32_t pid)
      : channel_(channel), index_(index), pid_(pid) {}
  // Claims the slot just evicted from the ring (or any free one).
  void TakeNextLoan(uint64_t evicted_slot, uint64_t evicted_state);
  // Counts a failed send and returns it.
  SendResult Fail(SendStatus status);
  SendResult SendImpl(size_t size, const SendTimes* times, size_t offset);

  Channel* const channel_;
  const uint32_t index_;
  const uint32_t pid_;    // stamped on every message
  int64_t loan_ = -1;     // slot index, or -1 when none
  uint64_t hint_ = 0;     // where the next free-slot scan starts
  uint64_t sequence_ = 0; // messages this publisher sent
  uint64_t failures_ = 0; // sends that failed
  // This publisher stops on a corrupt channel: its readers are told, once
  // (Channel::AnnounceCorruption). Error path; RT-safe.
  void AnnounceCorruptionOnce();
  bool announced_corruption_ = false;
};

}  // namespace tether::shm

#endif  // TETHER_SHM_PUBLISHER_H_
