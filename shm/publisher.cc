#include "shm/publisher.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "shm/clock.h"
#include "shm/file_access.h"
#include "shm/futex.h"
#include "shm/layout.h"
#include "util/hot_path.h"

namespace tether::shm {
namespace {

using internal::PublisherEntry;
using internal::SlotHeader;

}  // namespace

const char* ToString(SendStatus status) {
  switch (status) {
    case SendStatus::kOk:
      return "ok";
    case SendStatus::kTooLarge:
      return "message larger than the channel's slot size";
    case SendStatus::kNoLoan:
      return "no slot to build in (all slots pinned or held)";
    case SendStatus::kCorrupt:
      return "channel shared memory is corrupt";
  }
  return "unknown";
}

absl::StatusOr<std::unique_ptr<Publisher>> Publisher::Create(Channel* channel) {
  const QueueParams& p = channel->params();
  if (!channel->data_writable()) {
    return internal::AccessDenied(
        channel->path(),
        absl::StrCat("channel ", channel->name(), " (publishing writes it)"),
        "write");
  }
  // A corrupt channel is refused before registering: every send on it
  // would fail (kCorrupt), and a registration left by a publisher that dies
  // can never be reclaimed, because Sweep() leaves a corrupt channel as it
  // is. So a restarted publisher meets this error, never a registry full
  // of the dead.
  if (channel->corrupt()) {
    return channel->CorruptionError("no publisher can send on it");
  }
  const OwnerToken token = channel->self_token();
  for (int round = 0; round < 2; ++round) {
    for (uint32_t i = 0; i < p.max_publishers; ++i) {
      OwnerToken expected = kNoOwner;
      if (!channel->publisher_entry(i)->owner.compare_exchange_strong(
              expected, token, std::memory_order_acq_rel)) {
        continue;
      }
      PublisherEntry* e = channel->publisher_entry(i);
      e->messages_sent.store(0, std::memory_order_relaxed);
      e->send_failures.store(0, std::memory_order_relaxed);
      std::unique_ptr<Publisher> pub(
          new Publisher(channel, i, static_cast<uint32_t>(TokenPid(token))));
      pub->hint_ = (uint64_t{i} * 7919) % p.pool_size();
      pub->loan_ = channel->ClaimFreeSlot(i, &pub->hint_, /*sweep=*/true);
      if (pub->loan_ < 0) {
        if (channel->corrupt()) {  // found by the sweep ClaimFreeSlot ran
          return channel->CorruptionError("no publisher can send on it");
        }
        return absl::ResourceExhaustedError(absl::StrCat(
            "channel ", channel->name(),
            ": no free slot for a new publisher (every slot is in the ring, "
            "loaned or pinned by a reader that can hold a pin): a process "
            "that writes its files took them (`tether list` then warns); to "
            "start afresh, stop the processes that use it and run `",
            channel->clean_command_, "`"));
      }
      return pub;
    }
    channel->Sweep();  // a dead publisher may hold an entry
  }
  // The sweep found the channel corrupt (and so reclaimed nothing): the
  // entries may be held by the dead, and raising max_publishers would not
  // help.
  if (channel->corrupt()) {
    return channel->CorruptionError(absl::StrCat(
        "its max_publishers=", p.max_publishers,
        " publisher entries are taken, and no entry of a dead publisher is "
        "reclaimed from a corrupt channel"));
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "channel ", channel->name(), " already has max_publishers=",
      p.max_publishers,
      " publishers: raise maxPublishers in the channel's config"));
}

Publisher::~Publisher() {
  if (loan_ >= 0) {
    uint64_t own = internal::Owned(index_);
    channel_->slot_header(loan_)->state.compare_exchange_strong(
        own, internal::kFree, std::memory_order_seq_cst);
  }
  channel_->publisher_entry(index_)->owner.store(kNoOwner,
                                                 std::memory_order_release);
}

TETHER_HOT_PATH std::span<std::byte> Publisher::Loan() {
  if (loan_ < 0) {
    loan_ = channel_->ClaimFreeSlot(index_, &hint_, /*sweep=*/false);
    if (loan_ < 0) {
      // No slot because the slot headers are corrupt: no send will follow
      // (a caller gives up on an empty loan), so say it here.
      if (channel_->corrupt()) [[unlikely]] AnnounceCorruptionOnce();
      return {};
    }
  }
  return {channel_->payload(loan_), channel_->params().slot_size};
}

TETHER_HOT_PATH void Publisher::TakeNextLoan(uint64_t evicted,
                                             uint64_t evicted_index) {
  SlotHeader* sh = channel_->slot_header(evicted);
  const bool initial = evicted_index >= internal::kMaxQueueIndex;
  for (int tries = 0; tries < 2; ++tries) {
    uint64_t state = sh->state.load(std::memory_order_seq_cst);
    bool still_evicted = initial ? state == internal::kEmpty
                                 : internal::HoldsMessage(state, evicted_index);
    if (!still_evicted) break;  // a sweeper freed it: scan below
    // Claim, then look for pins (Dekker with Reader::Pin, see layout.h).
    if (sh->state.compare_exchange_strong(state, internal::Owned(index_),
                                          std::memory_order_seq_cst)) {
      if (channel_->pin_word(evicted)->load(std::memory_order_seq_cst) == 0) {
        // Seqlock writer side: the state change is visible before any of
        // our next writes into the slot, so an unpinned reader that saw new
        // bytes also sees the state change when it re-checks.
        std::atomic_thread_fence(std::memory_order_release);
        loan_ = static_cast<int64_t>(evicted);
        return;
      }
      // A reader still reads it; it becomes free when unpinned.
      sh->state.store(internal::kFree, std::memory_order_seq_cst);
      break;
    }
    // Lost a race with the committer turning Pending into committed: retry.
  }
  loan_ = channel_->ClaimFreeSlot(index_, &hint_, /*sweep=*/false);
}

void Publisher::AnnounceCorruptionOnce() {
  if (announced_corruption_) return;
  announced_corruption_ = true;
  channel_->AnnounceCorruption();
}

void Publisher::CountFailure() {
  PublisherEntry* e = channel_->publisher_entry(index_);
  e->send_failures.fetch_add(1, std::memory_order_relaxed);
  ++failures_;
}

SendResult Publisher::Fail(SendStatus status) {
  CountFailure();
  return {status};
}

TETHER_HOT_PATH SendResult Publisher::Send(size_t size, const SendTimes* times,
                                           size_t offset) {
  SendResult r = SendImpl(size, times, offset);
  // A SIGBUS during the send (the file shrank) was absorbed by the mapping
  // guard: the message went to zero pages, not the channel.
  if (r.status == SendStatus::kOk && channel_->corrupt()) {
    r = Fail(SendStatus::kCorrupt);
  }
  // This publisher sends no more: its readers must not wait for it.
  if (r.status == SendStatus::kCorrupt) [[unlikely]] AnnounceCorruptionOnce();
  return r;
}

TETHER_HOT_PATH SendResult Publisher::SendImpl(size_t size,
                                               const SendTimes* times,
                                               size_t offset) {
  if (channel_->corrupt()) return Fail(SendStatus::kCorrupt);
  if (loan_ < 0 && Loan().empty()) {
    // No slot, maybe because the slot headers are corrupt (ClaimFreeSlot
    // says so then).
    return Fail(channel_->corrupt() ? SendStatus::kCorrupt : SendStatus::kNoLoan);
  }
  const QueueParams& p = channel_->params();
  if (size > p.slot_size || offset > p.slot_size - size || offset % 8 != 0) {
    return Fail(SendStatus::kTooLarge);
  }
  internal::ChannelHeader* h = channel_->header();
  // Readers stop at a header whose magic is gone (Reader::
  // HeaderOverwritten): so do publishers, rather than go on sending into a
  // channel nobody reads and count nothing. One relaxed load of a line
  // nobody writes (a cache hit).
  if (const uint64_t magic =
          std::atomic_ref<uint64_t>(h->magic).load(std::memory_order_relaxed);
      magic != internal::kMagic) [[unlikely]] {
    channel_->ReportCorruption(
        "the channel header was overwritten: its magic number is gone, so "
        "no reader takes its messages (magic found)",
        magic);
    return Fail(SendStatus::kCorrupt);
  }
  const uint64_t slot = static_cast<uint64_t>(loan_);
  SlotHeader* sh = channel_->slot_header(slot);
  uint64_t own = sh->state.load(std::memory_order_relaxed);
  if (own != internal::Owned(index_)) {
    loan_ = -1;  // somebody took our loan: only corruption can do that
    channel_->ReportCorruption(
        "a publisher's loaned slot changed owner under it (slot, state)", slot,
        own);
    return Fail(SendStatus::kCorrupt);
  }
  sh->size.store(static_cast<uint32_t>(size), std::memory_order_relaxed);
  sh->offset.store(static_cast<uint32_t>(offset), std::memory_order_relaxed);
  sh->publisher_pid.store(pid_, std::memory_order_relaxed);
  sh->publisher_index.store(index_, std::memory_order_relaxed);
  sh->publisher_sequence.store(sequence_, std::memory_order_relaxed);
  sh->origin.store(times != nullptr ? times->origin : 0,
                   std::memory_order_relaxed);

  const uint64_t depth = p.queue_depth;
  const uint64_t pool = p.pool_size();
  for (int attempt = 0; attempt < internal::kMaxAttempts; ++attempt) {
    uint64_t q = h->tail.load(std::memory_order_acquire);
    if (q > internal::kMaxQueueIndex) {
      channel_->ReportCorruption(
          "the channel's tail is beyond the largest queue index (tail)", q);
      break;
    }
    std::atomic<uint64_t>* entry = channel_->ring_entry(q);
    uint64_t e = entry->load(std::memory_order_acquire);
    uint64_t tag = internal::EntryTag(e);
    if (tag == internal::Tag(q)) {
      // Placed by a publisher that has not bumped tail (or died): help.
      h->tail.compare_exchange_strong(q, q + 1, std::memory_order_acq_rel);
      continue;
    }
    if (tag != internal::Tag(q - depth)) {
      if (h->tail.load(std::memory_order_acquire) == q) {
        channel_->ReportCorruption(
            "the ring entry at the tail has a tag that fits no queue index "
            "there (tail, tag)",
            q, tag);
        break;
      }
      continue;  // tail moved on while we looked
    }
    uint64_t evicted = internal::EntrySlot(e);
    if (evicted >= pool) {
      channel_->ReportCorruption(
          "a ring entry names a slot beyond the pool (queue index, slot)",
          q - depth, evicted);
      break;
    }
    // Stamp per attempt so send times follow queue order as closely as the
    // race between publishers allows.
    sh->monotonic_ns.store(times && times->monotonic_ns
                               ? times->monotonic_ns
                               : MonotonicNs(),
                           std::memory_order_relaxed);
    sh->realtime_ns.store(times && times->realtime_ns ? times->realtime_ns
                                                      : RealtimeNs(),
                          std::memory_order_relaxed);
    uint64_t pending = internal::Pending(index_, q);
    if (!sh->state.compare_exchange_strong(own, pending,
                                           std::memory_order_seq_cst)) {
      loan_ = -1;
      channel_->ReportCorruption(
          "a publisher's loaned slot changed owner under it (slot, state)",
          slot, own);
      return Fail(SendStatus::kCorrupt);
    }
    own = pending;
    if (!entry->compare_exchange_strong(e, internal::MakeEntry(q, slot),
                                        std::memory_order_seq_cst)) {
      continue;  // another publisher took index q
    }
    // Committed. The bookkeeping below may be finished by anyone if we die.
    uint64_t expected_tail = q;
    h->tail.compare_exchange_strong(expected_tail, q + 1,
                                    std::memory_order_acq_rel);
    sh->state.compare_exchange_strong(pending, q, std::memory_order_seq_cst);
    h->wake_word.fetch_add(1, std::memory_order_seq_cst);
    // The sleeper announcements live in the reader-state file; any value
    // there costs at most this syscall, and clearing them at most a late
    // message: every loop looks at its readers about every 100 ms anyway
    // (layout.h, "Wake").
    internal::ReaderStateHeader* rs = channel_->state_header();
    if (rs->sleeper_mask.load(std::memory_order_seq_cst) != 0 ||
        rs->anonymous_sleepers.load(std::memory_order_seq_cst) != 0) {
      FutexWake(&h->wake_word);
    }
    ++sequence_;
    channel_->publisher_entry(index_)->messages_sent.store(
        sequence_, std::memory_order_relaxed);
    TakeNextLoan(evicted, q < depth ? ~uint64_t{0} : q - depth);
    return {SendStatus::kOk, q};
  }
  // Corrupt ring or tail: keep the loan as an unsent build.
  sh->state.compare_exchange_strong(own, internal::Owned(index_),
                                    std::memory_order_seq_cst);
  channel_->ReportCorruption(
      "a send found no free ring position after the most attempts");
  return Fail(SendStatus::kCorrupt);
}

}  // namespace tether::shm
