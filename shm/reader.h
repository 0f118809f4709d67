// shm: the reading side of a channel queue. Each Reader keeps its own
// cursor, reads messages in place (pinned, so the slot is not recycled under
// it, or unpinned with an overwrite check), and learns exactly how many
// messages it lost when it falls more than queue_depth behind.
#ifndef TETHER_SHM_READER_H_
#define TETHER_SHM_READER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "absl/status/statusor.h"
#include "shm/channel.h"

namespace tether::shm {

enum class [[nodiscard]] ReadStatus {
  kOk,
  kNothingNew,
  // Shared memory is inconsistent (entry, size, slot or state impossible),
  // now or at an earlier operation of this handle (Channel::corruption()
  // says what and where); the cursor is unchanged. Report it; the channel
  // needs re-creating.
  kCorrupt,
};

const char* ToString(ReadStatus status);

// One message as it sits in its slot, plus its context.
struct MessageView {
  std::span<const std::byte> data;  // in shared memory, 64-byte aligned
  uint64_t queue_index = 0;         // the message's index in the channel
  uint64_t monotonic_send_ns = 0;
  uint64_t realtime_send_ns = 0;
  uint32_t publisher_pid = 0;
  uint32_t publisher_index = 0;         // registry slot of the publisher
  uint64_t publisher_sequence = 0;      // n-th message of that publisher
  uint64_t origin = 0;                  // SendTimes::origin (0: a tether node)
  // Messages lost (overwritten before this reader got to them) between the
  // previous message this reader got from Next() and this one.
  uint64_t missed = 0;
  uint32_t slot = 0;
};

struct ReaderOptions {
  // Register as a pinning reader: views stay valid until Release() or the
  // next read. Needs a free entry among the channel's max_pinned. Without
  // it, views may be overwritten while read: check StillValid() after use.
  bool pin = true;
  // Where the cursor starts: only messages sent from now on, or the oldest
  // message still in the ring.
  enum class Start { kNew, kOldest } start = Start::kNew;
};

// A cursor on a channel. Not copyable or movable (owned by unique_ptr); the
// Channel must outlive it. Not thread-safe: one thread at a time.
class Reader {
 public:
  // ResourceExhausted naming max_pinned when pinning and all pin entries are
  // taken (after sweeping dead readers); PermissionDenied saying why
  // (Channel::GuestReason) when pinning but the reader-state file is not
  // writable (open with pin = false: a guest). On a channel found corrupt
  // (at open, or by the sweep a full registry runs) a pinning reader takes
  // no registry entry and no error: it never reads anything (every read
  // reports kCorrupt, Channel::corruption() says what and where), so a
  // restarted reader reports the corruption instead of meeting a registry
  // full of dead readers that no sweep of a corrupt channel reclaims. Not
  // RT-safe (setup).
  static absl::StatusOr<std::unique_ptr<Reader>> Create(
      Channel* channel, const ReaderOptions& options = {});

  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;
  ~Reader();

  // The next message after the cursor (releasing the previous pin), with
  // the count of messages lost since the previous one in view->missed.
  // RT-safe: lock-free, no allocation, no syscall.
  ReadStatus Next(MessageView* view);

  // The newest message, if newer than the cursor; the cursor moves past it.
  // Messages skipped this way are not counted as missed. RT-safe.
  ReadStatus Latest(MessageView* view);

  // Unpins the current view (no-op when unpinned). First checks that the
  // slot was not reused while pinned (its pin bit still set and the slot
  // holding the message, or freed or handed back by a claimer that saw the
  // pin): if it was, another process cleared this reader's pin (layout.h)
  // and what was read in place may be torn; that is counted in
  // overwritten_while_read(). RT-safe: two atomic loads and one RMW.
  void Release();

  // True if Next() would not return kNothingNew (a message, a loss or
  // corruption is waiting, including a channel header overwritten under
  // this reader). One atomic load, and when it finds nothing new two
  // relaxed loads of the channel header and a few compares; RT-safe. An
  // event loop calls it in its sleep protocol to re-check before blocking.
  bool HasNext() const;

  // For unpinned views: true if the slot still holds the message, so what
  // was read from view.data before this call is intact. RT-safe.
  bool StillValid(const MessageView& view) const;

  // Index the next Next() will look at.
  uint64_t next_index() const { return next_; }
  // All messages this reader lost so far: those reported with a message
  // (MessageView::missed) and those not yet, because no message came after
  // them (so a tool that ends can still say exactly what it missed).
  uint64_t total_missed() const { return total_missed_ + pending_missed_; }
  bool pinning() const { return bit_ != 0; }
  // Pinned views whose slot was reused before Release(): only possible
  // when a process with write access to the reader-state file cleared
  // this reader's pin bit. RT-safe.
  uint64_t overwritten_while_read() const { return overwritten_while_read_; }

 private:
  enum class Take { kRead, kGone, kCorrupt };
  ReadStatus NextImpl(MessageView* view);
  ReadStatus LatestImpl(MessageView* view);
  // kCorrupt if the channel turned corrupt during the operation.
  ReadStatus Checked(ReadStatus status);
  Reader(Channel* channel, int index);
  Take TryTake(uint64_t slot, uint64_t queue_index, MessageView* view);
  // Moves the cursor past a lost message r; returns false on corruption.
  bool SkipLost(uint64_t r, uint64_t* missed);
  // On paths that found nothing new: true when the channel header shows
  // signs no healthy channel can (its magic gone, or `tail`, loaded by the
  // caller, behind the cursor, beyond the largest index, or past the
  // cursor while the cursor's entry is still unplaced), i.e. it was
  // overwritten and no message will come. RT-safe: one relaxed load, four
  // compares, and two acquire loads when the tail is past the cursor.
  // ReportHeaderOverwritten records the finding (kCorrupt).
  bool HeaderOverwritten(uint64_t tail) const;
  bool TailAheadOfUnplacedEntry() const;
  ReadStatus ReportHeaderOverwritten(uint64_t tail);

  Channel* const channel_;
  const int index_;    // reader registry entry, or -1 when not pinning
  const uint64_t bit_; // 1 << index_, or 0
  uint64_t next_ = 0;
  uint64_t pending_missed_ = 0;  // lost, not yet reported with a message
  uint64_t total_missed_ = 0;
  int64_t pinned_slot_ = -1;
  uint64_t pinned_index_ = 0;  // the queue index pinned_slot_ holds
  uint64_t overwritten_while_read_ = 0;
};

}  // namespace tether::shm

#endif  // TETHER_SHM_READER_H_
