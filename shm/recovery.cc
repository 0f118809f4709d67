// shm: recovery from process death — reclaiming the registrations, loans,
// pins and half-done sends of processes that died at any instruction (see
// "Death at any instruction" in layout.h) — and from a reader-state file
// lost under a live channel (Channel::reader_state_lost). Part of Channel.
#include <sys/mman.h>

#include <bit>
#include <set>

#include "shm/channel.h"
#include "shm/channel_files.h"
#include "shm/futex.h"
#include "shm/layout.h"

namespace tether::shm {

using internal::PublisherEntry;
using internal::ReaderEntry;
using internal::SlotHeader;

void* Channel::MapPrivateState(void* at, size_t size,
                               const QueueParams& params, uint64_t nonce) {
  void* m = ::mmap(at, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE |
                       (at != nullptr ? MAP_FIXED : 0),
                   -1, 0);
  if (m == MAP_FAILED) return m;
  internal::InitialiseState(static_cast<std::byte*>(m), params, nonce,
                            kNoOwner);
  static_cast<internal::ReaderStateHeader*>(m)->anonymous_sleepers.store(
      internal::kLostStateSleepers, std::memory_order_release);
  return m;
}

bool Channel::LoseReaderState() const {
  int was = kStateShared;
  if (!state_lost_.compare_exchange_strong(was, kStateLosing,
                                           std::memory_order_acq_rel)) {
    // Lost already, or another thread is replacing it: until that thread
    // is done this one may see the guard's zero pages, whose missing wakes
    // that thread's FUTEX_WAKE makes up for.
    return true;
  }
  // Over the whole mapping: the guard replaced only the pages from the
  // fault on, and what is left of the file is no longer anyone's state.
  if (MapPrivateState(state_base_, state_size_, params_, nonce_) ==
      MAP_FAILED) {
    state_lost_.store(kStateShared, std::memory_order_release);
    return false;
  }
  if (lock_memory_) (void)::mlock(state_base_, state_size_);
  state_lost_.store(kStateLost, std::memory_order_release);
  // A send that read the sleeper bits from zero pages made no wake: every
  // waiter looks again now (spurious wakes are harmless, layout.h "Wake").
  FutexWake(&header_->wake_word);
  return true;
}

bool Channel::ClearImpossiblePins() {
  // A guest's mapping of the reader state is read-only.
  if (!state_writable_ && !reader_state_lost()) return false;
  const uint64_t n = params_.pool_size();
  const uint64_t readers = params_.max_pinned >= 64
                               ? ~uint64_t{0}
                               : (uint64_t{1} << params_.max_pinned) - 1;
  // Pins first, then owners: a reader registers before it pins and lets
  // go before it unregisters, so a bit seen set whose entry is free later
  // was never a registered reader's, or is released by now.
  uint8_t slots_with_bit[64] = {};
  uint64_t seen = 0;
  for (uint64_t slot = 0; slot < n; ++slot) {
    const uint64_t pins = pin_word(slot)->load(std::memory_order_acquire);
    seen |= pins;
    for (uint64_t bits = pins & readers; bits != 0; bits &= bits - 1) {
      uint8_t& count = slots_with_bit[std::countr_zero(bits)];
      if (count < 2) ++count;
    }
  }
  uint64_t impossible = seen & ~readers;
  for (uint64_t bits = seen & readers; bits != 0; bits &= bits - 1) {
    const int k = std::countr_zero(bits);
    if (slots_with_bit[k] >= 2 ||
        reader_entry(static_cast<uint32_t>(k))
                ->owner.load(std::memory_order_acquire) == kNoOwner) {
      impossible |= uint64_t{1} << k;
    }
  }
  if (impossible == 0) return false;
  for (uint64_t slot = 0; slot < n; ++slot) {
    std::atomic<uint64_t>* pins = pin_word(slot);
    if ((pins->load(std::memory_order_relaxed) & impossible) != 0) {
      pins->fetch_and(~impossible, std::memory_order_acq_rel);
    }
  }
  return true;
}

bool Channel::TakeOverDeadEntry(std::atomic<OwnerToken>& owner) {
  OwnerToken token = owner.load(std::memory_order_acquire);
  if (token == kNoOwner || TokenAlive(token)) return false;
  return owner.compare_exchange_strong(token, self_token(),
                                       std::memory_order_acq_rel);
}

void Channel::SweepPublisher(uint32_t index, SweepReport* report) {
  PublisherEntry* e = publisher_entry(index);
  if (!TakeOverDeadEntry(e->owner)) return;
  ++report->dead_publishers;
  const uint64_t n = params_.pool_size();
  for (uint64_t s = 0; s < n; ++s) {
    SlotHeader* sh = slot_header(s);
    uint64_t state = sh->state.load(std::memory_order_seq_cst);
    if (!internal::IsOwnedOrPending(state) ||
        internal::StateOwner(state) != index) {
      continue;
    }
    if (internal::IsPending(state)) {
      // Did its ring CAS land? Then finish the send; else drop it.
      uint64_t tail = header_->tail.load(std::memory_order_acquire);
      // Reconstruct the full index from the 40-bit tag near tail.
      uint64_t tag = state & internal::kTagMask;
      // (the newest q <= tail with that tag; q == tail when it was placed
      // but tail not yet bumped).
      uint64_t q = tail - ((tail - tag) & internal::kTagMask);
      uint64_t want = internal::MakeEntry(q, static_cast<uint32_t>(s));
      if (ring_entry(q)->load(std::memory_order_acquire) == want) {
        uint64_t expected_tail = q;
        header_->tail.compare_exchange_strong(expected_tail, q + 1,
                                              std::memory_order_acq_rel);
        if (sh->state.compare_exchange_strong(state, q,
                                              std::memory_order_seq_cst)) {
          ++report->commits_finished;
        }
        continue;
      }
    }
    if (sh->state.compare_exchange_strong(state, internal::kFree,
                                          std::memory_order_seq_cst)) {
      ++report->slots_freed;
    }
  }
  e->messages_sent.store(0, std::memory_order_relaxed);
  e->send_failures.store(0, std::memory_order_relaxed);
  e->owner.store(kNoOwner, std::memory_order_release);
}

void Channel::SweepReader(uint32_t index, SweepReport* report) {
  ReaderEntry* e = reader_entry(index);
  if (!TakeOverDeadEntry(e->owner)) return;
  ++report->dead_readers;
  const uint64_t bit = uint64_t{1} << index;
  for (uint64_t s = 0; s < params_.pool_size(); ++s) {
    pin_word(s)->fetch_and(~bit, std::memory_order_release);
  }
  e->owner.store(kNoOwner, std::memory_order_release);
}

void Channel::SweepSleeper(uint32_t index, SweepReport* report) {
  internal::SleeperEntry* e = sleeper_entry(index);
  if (!TakeOverDeadEntry(e->owner)) return;
  // Its bit is set only if it died asleep: then publishers would make a
  // wake syscall on every send for nobody.
  const uint64_t bit = uint64_t{1} << index;
  if ((state_header_->sleeper_mask.fetch_and(~bit, std::memory_order_seq_cst) &
       bit) != 0) {
    ++report->dead_sleepers;
  }
  e->owner.store(kNoOwner, std::memory_order_release);
}

RegisteredProcesses Channel::Registered() const {
  std::set<OwnerToken> tokens;
  auto add = [&tokens](const std::atomic<OwnerToken>& owner) {
    const OwnerToken t = owner.load(std::memory_order_acquire);
    if (t != kNoOwner) tokens.insert(t);
  };
  for (uint32_t i = 0; i < params_.max_publishers; ++i) {
    add(publisher_entry(i)->owner);
  }
  for (uint32_t i = 0; i < params_.max_pinned; ++i) add(reader_entry(i)->owner);
  for (uint32_t i = 0; i < internal::kMaxSleepers; ++i) {
    add(sleeper_entry(i)->owner);
  }
  // Tokens are shared memory too: a garbage one names a pid that is dead,
  // or alive with another start time (dead, then), never one to trust more.
  std::set<pid_t> alive, dead;
  for (OwnerToken t : tokens) {
    (TokenAlive(t) ? alive : dead).insert(TokenPid(t));
  }
  // A pid both alive and dead (a reused pid): the live one counts.
  for (pid_t pid : alive) dead.erase(pid);
  return {{alive.begin(), alive.end()}, {dead.begin(), dead.end()}};
}

SweepReport Channel::Sweep() {
  SweepReport report;
  // A corrupt channel is left as it is: "repairing" garbage would hide
  // what was lost.
  if (corrupt()) return report;
  // Each process sweeps the file it can write (layout.h, "Death").
  if (data_writable_) {
    for (uint32_t i = 0; i < params_.max_publishers; ++i) {
      SweepPublisher(i, &report);
    }
  } else {
    report.skipped_data = true;
  }
  if (state_writable_) {
    for (uint32_t i = 0; i < params_.max_pinned; ++i) SweepReader(i, &report);
    for (uint32_t i = 0; i < internal::kMaxSleepers; ++i) {
      SweepSleeper(i, &report);
    }
    // Pin bits of readers that cannot exist (beyond max_pinned) hold slots
    // forever; no registration can own them, so clearing them races
    // nobody.
    const uint64_t impossible =
        params_.max_pinned >= 64 ? 0 : ~uint64_t{0} << params_.max_pinned;
    for (uint64_t s = 0; impossible != 0 && s < params_.pool_size(); ++s) {
      if ((pin_word(s)->load(std::memory_order_relaxed) & impossible) != 0) {
        pin_word(s)->fetch_and(~impossible, std::memory_order_release);
        ++report.corrupt_entries;
      }
    }
  } else {
    report.skipped_reader_state = true;
  }
  if (data_writable_) SweepOrphanedSlots(&report);
  return report;
}

void Channel::SweepOrphanedSlots(SweepReport* report) {
  // Slots evicted from the ring by a publisher that died before claiming
  // them: committed (or initial) contents no ring entry names any more.
  const uint64_t n = params_.pool_size();
  for (uint64_t s = 0; s < n; ++s) {
    SlotHeader* sh = slot_header(s);
    uint64_t state = sh->state.load(std::memory_order_seq_cst);
    uint64_t want;
    if (internal::IsMessage(state)) {
      want = internal::MakeEntry(state, static_cast<uint32_t>(s));
      const uint64_t at = ring_entry(state)->load(std::memory_order_seq_cst);
      if (at == want) continue;
      // An orphan's message was evicted: its ring position moved on to a
      // later index. A position still naming that index, but another slot,
      // or an index not yet committed, is no state a send leaves: corrupt
      // (freeing it would hide lost messages).
      if (internal::EntryTag(at) == internal::Tag(state) ||
          state >= header_->tail.load(std::memory_order_acquire)) {
        ReportCorruption(
            "a slot claims a message the ring does not name it for (slot, "
            "message)",
            s, state);
        ++report->corrupt_entries;
        return;
      }
    } else if (state == internal::kEmpty) {
      if (s >= params_.queue_depth) {
        ++report->corrupt_entries;
        continue;
      }
      want = internal::MakeEntry(s - uint64_t{params_.queue_depth},
                                 static_cast<uint32_t>(s));
      if (ring_entry(s)->load(std::memory_order_seq_cst) == want) continue;
    } else {
      if (internal::IsOwnedOrPending(state) &&
          internal::StateOwner(state) >= params_.max_publishers) {
        ++report->corrupt_entries;
      }
      continue;
    }
    // A committed message leaves the ring only by being replaced, and then
    // never returns with the same index, so this check cannot go stale.
    // The evicting publisher may be claiming it right now: one CAS wins.
    if (sh->state.compare_exchange_strong(state, internal::kFree,
                                          std::memory_order_seq_cst)) {
      ++report->slots_freed;
    }
  }
}

}  // namespace tether::shm
