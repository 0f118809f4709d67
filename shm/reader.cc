#include "shm/reader.h"

#include <algorithm>
#include <atomic>

#include "absl/strings/str_cat.h"
#include "shm/layout.h"
#include "util/hot_path.h"

namespace tether::shm {

using internal::SlotHeader;

const char* ToString(ReadStatus status) {
  switch (status) {
    case ReadStatus::kOk:
      return "ok";
    case ReadStatus::kNothingNew:
      return "nothing new";
    case ReadStatus::kCorrupt:
      return "channel shared memory is corrupt";
  }
  return "unknown";
}

Reader::Reader(Channel* channel, int index)
    : channel_(channel),
      index_(index),
      bit_(index < 0 ? 0 : uint64_t{1} << index) {}

absl::StatusOr<std::unique_ptr<Reader>> Reader::Create(
    Channel* channel, const ReaderOptions& options) {
  int index = -1;
  if (options.pin && !channel->reader_state_writable()) {
    return absl::PermissionDeniedError(absl::StrCat(
        "cannot pin messages of channel ", channel->name(), ": ",
        channel->GuestReason(), "; or open it unpinned (guest)"));
  }
  // On a corrupt channel a pinning reader takes no entry: it reads nothing
  // (every read reports kCorrupt, so it never holds a pin), and an entry
  // left by a reader that dies is never reclaimed (Sweep() leaves a corrupt
  // channel as it is). So a restarted reader reports the corruption at its
  // first read, never a registry full of the dead, and its loop watches its
  // other channels on.
  if (options.pin && !channel->corrupt()) {
    const uint32_t k = channel->params().max_pinned;
    for (int round = 0; round < 2 && index < 0 && !channel->corrupt();
         ++round) {
      for (uint32_t i = 0; i < k; ++i) {
        OwnerToken expected = kNoOwner;
        if (channel->reader_entry(i)->owner.compare_exchange_strong(
                expected, channel->self_token(), std::memory_order_acq_rel)) {
          index = static_cast<int>(i);
          break;
        }
      }
      if (index < 0) channel->Sweep();  // a dead reader may hold an entry
    }
    if (index < 0 && !channel->corrupt()) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "channel ", channel->name(), " already has maxPinned=", k,
          " pinning readers (every entry of its reader registry is held by "
          "a live process): raise maxPinned in the channel's config, or, if "
          "fewer processes read it, a process with write access to ",
          channel->reader_state_path(), " wrote those entries"));
    }
  }
  std::unique_ptr<Reader> r(new Reader(channel, index));
  const uint64_t tail = channel->header()->tail.load(std::memory_order_acquire);
  const uint64_t depth = channel->params().queue_depth;
  r->next_ = options.start == ReaderOptions::Start::kNew
                 ? tail
                 : (tail > depth ? tail - depth : 0);
  return r;
}

Reader::~Reader() {
  Release();
  if (index_ >= 0) {
    channel_->reader_entry(index_)->owner.store(kNoOwner,
                                                std::memory_order_release);
  }
}

TETHER_HOT_PATH void Reader::Release() {
  if (pinned_slot_ < 0) return;
  // Our pin kept the slot from reuse unless someone cleared our bit (a
  // process with write access to the reader-state file): then what the
  // caller read may have been overwritten meanwhile. Counted, never
  // silent (layout.h, "What the reader-state file cannot do").
  //
  // While our bit stays set no claim passes its pin check (Dekker with
  // TryTake's pin-then-check), so the slot is in one of three states that
  // never wrote its bytes: still message r; kFree (a publisher evicted it
  // from the ring, found it pinned and freed it for whoever claims it once
  // it is unpinned; or a sweep freed it); Owned and not pending (a claimer
  // between its state change and its pin check, about to hand it back).
  // Counting kFree as overwritten reported every callback that outlived
  // queue_depth sends as a hostile pin clear. With our bit gone, only
  // message r itself proves the bytes untouched. (A bit cleared and set
  // again by another process is not seen.)
  // acquire: the caller's reads of the slot come before these loads.
  std::atomic_thread_fence(std::memory_order_acquire);
  std::atomic<uint64_t>* pins = channel_->pin_word(pinned_slot_);
  const bool still_pinned =
      (pins->load(std::memory_order_relaxed) & bit_) != 0;
  const uint64_t state = channel_->slot_header(pinned_slot_)->state.load(
      std::memory_order_relaxed);
  const bool handed_back =
      state == internal::kFree ||
      (internal::IsOwnedOrPending(state) && !internal::IsPending(state));
  if (!internal::HoldsMessage(state, pinned_index_) &&
      !(still_pinned && handed_back)) {
    ++overwritten_while_read_;
  }
  // release: our reads of the slot happen before a publisher that sees the
  // bit cleared (seq_cst load) reuses it.
  pins->fetch_and(~bit_, std::memory_order_release);
  pinned_slot_ = -1;
}

TETHER_HOT_PATH Reader::Take Reader::TryTake(uint64_t slot, uint64_t q,
                                             MessageView* view) {
  const QueueParams& p = channel_->params();
  if (slot >= p.pool_size()) {
    channel_->ReportCorruption(
        "a ring entry names a slot beyond the pool (queue index, slot)", q,
        slot);
    return Take::kCorrupt;
  }
  SlotHeader* sh = channel_->slot_header(slot);
  uint64_t state;
  if (bit_ != 0) {
    // Dekker with the publisher's claim (see layout.h): pin, then check.
    std::atomic<uint64_t>* pins = channel_->pin_word(slot);
    pins->fetch_or(bit_, std::memory_order_seq_cst);
    state = sh->state.load(std::memory_order_seq_cst);
    if (!internal::HoldsMessage(state, q)) {
      pins->fetch_and(~bit_, std::memory_order_release);
    } else {
      pinned_slot_ = static_cast<int64_t>(slot);
      pinned_index_ = q;
    }
  } else {
    state = sh->state.load(std::memory_order_acquire);
  }
  if (!internal::HoldsMessage(state, q)) {
    if (internal::ImpossibleAfterEntry(state, q, p.max_publishers)) {
      channel_->ReportCorruption(
          "the slot a ring entry names is in a state no send can leave it in "
          "(queue index, slot state)",
          q, state);
      return Take::kCorrupt;
    }
    return Take::kGone;
  }
  const uint32_t size = sh->size.load(std::memory_order_relaxed);
  const uint32_t offset = sh->offset.load(std::memory_order_relaxed);
  if (size > p.slot_size || offset > p.slot_size - size || offset % 8 != 0) {
    Release();
    channel_->ReportCorruption(
        "a message does not lie inside its slot (queue index, offset + size)",
        q, uint64_t{offset} + size);
    return Take::kCorrupt;
  }
  view->data = {channel_->payload(slot) + offset, size};
  view->queue_index = q;
  view->monotonic_send_ns = sh->monotonic_ns.load(std::memory_order_relaxed);
  view->realtime_send_ns = sh->realtime_ns.load(std::memory_order_relaxed);
  view->publisher_pid = sh->publisher_pid.load(std::memory_order_relaxed);
  view->publisher_index = sh->publisher_index.load(std::memory_order_relaxed);
  view->publisher_sequence =
      sh->publisher_sequence.load(std::memory_order_relaxed);
  view->origin = sh->origin.load(std::memory_order_relaxed);
  view->slot = static_cast<uint32_t>(slot);
  if (bit_ == 0 && !StillValid(*view)) return Take::kGone;
  return Take::kRead;
}

bool Reader::StillValid(const MessageView& view) const {
  if (view.slot >= channel_->params().pool_size()) return false;
  // Seqlock reader side: reads of the bytes, then this fence, then the
  // state check (the publisher changes state before writing bytes).
  std::atomic_thread_fence(std::memory_order_acquire);
  return internal::HoldsMessage(
      channel_->slot_header(view.slot)->state.load(std::memory_order_relaxed),
      view.queue_index);
}

bool Reader::SkipLost(uint64_t r, uint64_t* missed) {
  // Message r is gone. The ring holds [tail - D, tail): resume at the oldest
  // of those (or just after r) and count every index skipped.
  const uint64_t depth = channel_->params().queue_depth;
  const uint64_t tail = channel_->header()->tail.load(std::memory_order_acquire);
  if (tail <= r || tail > internal::kMaxQueueIndex) {
    channel_->ReportCorruption(
        "the ring is ahead of the tail (lost queue index, tail)", r, tail);
    return false;
  }
  const uint64_t resume = std::max(r + 1, tail - std::min(tail, depth));
  *missed += resume - r;
  next_ = resume;
  return true;
}

TETHER_HOT_PATH ReadStatus Reader::Next(MessageView* view) {
  return Checked(NextImpl(view));
}

ReadStatus Reader::Latest(MessageView* view) {
  return Checked(LatestImpl(view));
}

ReadStatus Reader::Checked(ReadStatus status) {
  // A SIGBUS during the read (the file shrank) was absorbed by the mapping
  // guard; whatever the read saw is zero pages, not the channel.
  if (status != ReadStatus::kCorrupt && channel_->corrupt()) {
    Release();
    return ReadStatus::kCorrupt;
  }
  return status;
}

TETHER_HOT_PATH bool Reader::HeaderOverwritten(uint64_t tail) const {
  // Shared-memory check of the channel header, for the paths that found
  // nothing new: a header overwritten under a live channel (`dd
  // if=/dev/zero` over it) stops its publishers, which report it, but
  // leaves the ring as it was, so without a look at the header a reader
  // would find nothing new forever and say nothing. No healthy channel
  // shows either sign:
  //   - the magic is written before the file is linked into place and
  //     never again;
  //   - the tail only grows, and is at least next_ - 1: next_ is a tail
  //     this reader loaded (Create, SkipLost, Latest: <= tail + 1, tail
  //     itself maybe placed and not yet bumped) or r + 1 after reading
  //     message r, whose ring entry a publisher placed after loading
  //     tail == r (publishers place only at the tail, so at most one
  //     index is placed beyond it). Coherence makes any later load of the
  //     tail in this thread see at least those values (relaxed suffices:
  //     the loads that saw them come before). A cursor of 0 or 1 (no
  //     message yet, or one) can meet a zeroed tail legitimately: there
  //     only the magic tells. A re-created channel is a new file; this
  //     mapping never sees its tail.
  // Cost: one relaxed load of a line nobody writes (a cache hit), and
  // three compares. The tail comes from the caller: Latest has it loaded
  // already; Next and HasNext load it (relaxed) on their nothing-new path
  // only, a line that moves with each commit as the ring entry they just
  // loaded does. No value they had loaded could show this: an overwritten
  // header leaves the ring as it was.
  //   - a tail past the cursor means message next_ was placed: the entry
  //     is stored before the tail is bumped past it (acq_rel), so after an
  //     acquire load of such a tail the entry no longer holds next_ - D.
  //     A healthy channel shows tail > next_ here only when a send raced
  //     in since the entry was loaded; that costs the two acquire loads,
  //     once (the next call delivers the message).
  const uint64_t magic =
      std::atomic_ref<uint64_t>(channel_->header()->magic).load(
          std::memory_order_relaxed);
  if (magic != internal::kMagic || tail > internal::kMaxQueueIndex ||
      tail + 1 < next_ ||
      channel_->header()->corrupt_found.load(std::memory_order_relaxed) !=
          0) {
    return true;
  }
  return tail > next_ && TailAheadOfUnplacedEntry();
}

bool Reader::TailAheadOfUnplacedEntry() const {
  const uint64_t depth = channel_->params().queue_depth;
  const uint64_t tail = channel_->header()->tail.load(std::memory_order_acquire);
  const uint64_t e =
      channel_->ring_entry(next_)->load(std::memory_order_acquire);
  return tail > next_ && internal::EntryTag(e) == internal::Tag(next_ - depth);
}

ReadStatus Reader::ReportHeaderOverwritten(uint64_t tail) {
  // Error path. A SIGBUS repair (zero pages over a truncated file) shows
  // the same signs; its own report says more, so it goes first.
  if (channel_->corrupt()) return ReadStatus::kCorrupt;
  const uint64_t magic =
      std::atomic_ref<uint64_t>(channel_->header()->magic).load(
          std::memory_order_relaxed);
  if (magic != internal::kMagic) {
    channel_->ReportCorruption(
        "the channel header was overwritten: its magic number is gone, so "
        "no send can reach this reader (magic found)",
        magic);
  } else if (channel_->header()->corrupt_found.load(
                 std::memory_order_relaxed) != 0) {
    channel_->ReportCorruption(
        "another process found this channel's shared memory corrupt and "
        "stopped using it (its own error, and `tether list`, say what and "
        "where); no more sends will reach this reader");
  } else if (tail > internal::kMaxQueueIndex) {
    channel_->ReportCorruption(
        "the channel's tail is beyond the largest queue index (tail)", tail);
  } else if (tail > next_) {
    channel_->ReportCorruption(
        "the channel header was overwritten: its tail is past a message no "
        "publisher placed, so no send can reach this reader (tail, next "
        "queue index)",
        tail, next_);
  } else {
    channel_->ReportCorruption(
        "the channel header was overwritten: its tail is behind this "
        "reader's cursor, which no send can do (tail, next queue index)",
        tail, next_);
  }
  return ReadStatus::kCorrupt;
}

TETHER_HOT_PATH ReadStatus Reader::NextImpl(MessageView* view) {
  Release();
  if (channel_->corrupt()) return ReadStatus::kCorrupt;
  const uint64_t depth = channel_->params().queue_depth;
  uint64_t missed = 0;
  for (int attempt = 0; attempt < internal::kMaxAttempts; ++attempt) {
    const uint64_t r = next_;
    const uint64_t e = channel_->ring_entry(r)->load(std::memory_order_acquire);
    const uint64_t ahead = (internal::EntryTag(e) - internal::Tag(r)) &
                           internal::kTagMask;
    if (ahead == 0) {
      switch (TryTake(internal::EntrySlot(e), r, view)) {
        case Take::kRead:
          next_ = r + 1;
          view->missed = pending_missed_ + missed;
          total_missed_ += view->missed;
          pending_missed_ = 0;
          return ReadStatus::kOk;
        case Take::kCorrupt:
          return ReadStatus::kCorrupt;
        case Take::kGone:
          break;  // overwritten after we read the entry
      }
    } else if (ahead == (internal::Tag(0 - depth))) {
      // The entry still holds r - D: message r is not committed yet, or the
      // header was overwritten and nothing will be (HeaderOverwritten). A
      // path that delivers a message never pays for that look; this one
      // pays two relaxed loads (the tail, the magic) and three compares.
      pending_missed_ += missed;
      const uint64_t tail =
          channel_->header()->tail.load(std::memory_order_relaxed);
      if (HeaderOverwritten(tail)) return ReportHeaderOverwritten(tail);
      return ReadStatus::kNothingNew;
    } else if ((ahead & (depth - 1)) != 0) {
      // A tag not congruent to its position.
      channel_->ReportCorruption(
          "a ring entry has a tag that fits no queue index at its position "
          "(queue index, tag)",
          r, internal::EntryTag(e));
      return ReadStatus::kCorrupt;
    }
    if (!SkipLost(r, &missed)) return ReadStatus::kCorrupt;
  }
  channel_->ReportCorruption(
      "a read found no readable message after the most attempts (queue "
      "index)",
      next_);
  return ReadStatus::kCorrupt;
}

TETHER_HOT_PATH bool Reader::HasNext() const {
  if (channel_->corrupt()) return true;  // so that a waiter looks and sees it
  const uint64_t depth = channel_->params().queue_depth;
  const uint64_t e = channel_->ring_entry(next_)->load(std::memory_order_acquire);
  if (internal::EntryTag(e) != internal::Tag(next_ - depth)) return true;
  // Nothing new: true all the same when the header was overwritten, so
  // that a loop calls Next(), which reports it (see NextImpl: two relaxed
  // loads and three compares, on this path only).
  return HeaderOverwritten(
      channel_->header()->tail.load(std::memory_order_relaxed));
}

ReadStatus Reader::LatestImpl(MessageView* view) {
  Release();
  if (channel_->corrupt()) return ReadStatus::kCorrupt;
  internal::ChannelHeader* h = channel_->header();
  uint64_t previous_tail = internal::kMaxQueueIndex + 1;
  for (int attempt = 0; attempt < internal::kMaxAttempts; ++attempt) {
    const uint64_t tail = h->tail.load(std::memory_order_acquire);
    if (tail > internal::kMaxQueueIndex) {
      channel_->ReportCorruption(
          "the channel's tail is beyond the largest queue index (tail)", tail);
      return ReadStatus::kCorrupt;
    }
    // tail itself may be placed but not yet bumped.
    const uint64_t at_tail =
        channel_->ring_entry(tail)->load(std::memory_order_acquire);
    const bool placed = internal::EntryTag(at_tail) == internal::Tag(tail);
    const uint64_t q = placed ? tail : tail - 1;
    if ((!placed && tail == 0) || q < next_) {
      // Nothing newer than the cursor, or an overwritten header (see
      // HeaderOverwritten: one more load and three compares, on the tail
      // already loaded, on this path only).
      if (HeaderOverwritten(tail)) return ReportHeaderOverwritten(tail);
      return ReadStatus::kNothingNew;
    }
    const uint64_t e = placed ? at_tail
                              : channel_->ring_entry(q)->load(
                                    std::memory_order_acquire);
    if (internal::EntryTag(e) != internal::Tag(q)) {
      // The newest entry must name the newest message; it may only have
      // been overwritten if the tail moved on meanwhile.
      if (tail == previous_tail &&
          h->tail.load(std::memory_order_acquire) == tail) {
        channel_->ReportCorruption(
            "the ring entry behind the tail does not name the newest message "
            "(queue index, tag)",
            q, internal::EntryTag(e));
        return ReadStatus::kCorrupt;
      }
      previous_tail = tail;
      continue;  // raced with publishers
    }
    switch (TryTake(internal::EntrySlot(e), q, view)) {
      case Take::kRead:
        next_ = q + 1;
        view->missed = 0;
        return ReadStatus::kOk;
      case Take::kCorrupt:
        return ReadStatus::kCorrupt;
      case Take::kGone:
        continue;
    }
  }
  channel_->ReportCorruption(
      "Latest found no readable newest message after the most attempts");
  return ReadStatus::kCorrupt;
}

}  // namespace tether::shm
