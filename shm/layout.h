// shm internal: the bytes of a channel file and the lock-free protocol on
// them. Only shm/*.cc include this; everything here lives in shared memory,
// so it is standard-layout, pointer-free and sized from QueueParams.
//
// ============================================================================
// Two files per channel (every part starts on a 64-byte cache line)
//
// The data file <escaped name>, written only by publishers and sweepers of
// dead publishers; readers without write access map it PROT_READ:
//   ChannelHeader          magic, version, params, hash, sizes, nonce,
//                          tail (own line), wake word (own line)
//   metadata               bytes given by the creator (transport: type info)
//   PublisherEntry[P]      publisher registry, one line each
//   ring: atomic<u64>[D]   D = queue_depth (a power of two)
//   SlotHeader[N]          N = D + P + K, one line each
//   payload[N]             slot_size rounded up to 64 bytes each
//
// The reader-state file <escaped name>@readers.<nonce>, written by readers
// (and sweepers of dead readers); publishers only read it:
//   ReaderStateHeader      magic, version, hash, the data file's nonce,
//                          sizes, creator; sleeper mask (own line)
//   ReaderEntry[K]         pinning-reader registry, one line each
//   SleeperEntry[64]       sleeper registry (owner tokens), 8 a line
//   pin words: atomic<u64>[N]   bit k = pinning reader k holds the slot
//
// Why two files: who may write what is then a file permission. A process
// that may read messages but not write the data file cannot forge or
// corrupt a message (its mapping is read-only: the kernel enforces it). A
// reader that can write the reader-state file pins slots and announces
// itself as a sleeper; one that cannot (a "guest") reads unpinned (copy,
// then check the slot still holds the message) and polls the wake word
// with a bounded FUTEX_WAIT, so it affects nobody. The nonce (random, set
// at creation, in both headers and in the reader-state file's name) pairs
// the two files: an opener finds the reader-state file by the nonce in the
// data file's header, so a re-created channel never meets a stale
// reader-state file. The reader-state file's own header is not trusted for
// that (its writers are readers): opening checks only the file's size, and
// a header that differs is a reader-state finding (CheckConsistency).
//
// Creation is race-free and openers never wait: both files are built (and
// their space reserved) under private names; the reader-state file is
// hard-linked to its nonce name first (unique: it can collide with
// nothing), then the data file is hard-linked to the channel's name. That
// link is the one atomic "initialised" step: exactly one creator wins, and
// whoever sees the data file finds its reader-state file already there.
// A loser unlinks its own reader-state file; one a creator left when it
// died between the two links (no data file names its nonce, its creator
// token is dead) is removed by the next creator of that channel or by
// Channel::Remove.
//
// ============================================================================
// Protocol
//
// Queue index q: a 64-bit count of messages ever committed. `tail` is the
// next index to commit. Ring position q & (D-1) holds an entry
// (tag = q mod 2^40, slot index) naming the slot with message q. A 40-bit
// tag is the ABA guard: an entry compares equal only to the same q, and a
// thread would have to stall for 2^40 messages for a tag to come round.
// Initially ring[i] holds (tag of i - D, slot i): "message i - D", never
// readable.
//
// Slot state (SlotHeader::state, one atomic u64) says who holds a slot:
//   q < 2^62             committed message q (in the ring, or just evicted)
//   kEmpty               initial contents of ring position = slot index
//   kFree                nobody's; claimable when its pin word is 0
//   Owned(i)             publisher i's loan (it builds here alone)
//   Pending(i, q)        publisher i is committing message q from here:
//                        payload and header are final; readers accept it as
//                        message q once they have seen the ring entry
// Ownership moves only by CAS on this word, so two parties can never both
// own a slot, whoever crashes.
//
// Send (publisher i, loan S), at most kMaxAttempts rounds:
//   1. q = tail (acquire); e = ring[q] (acquire).
//      tag(e) == q      -> a publisher placed q but did not bump tail (maybe
//                          it died): help, CAS tail q -> q+1, retry.
//      tag(e) != q - D  -> tail moved under us: retry; if tail did not
//                          move, the ring is corrupt: error.
//   2. Write S's header fields (relaxed), then CAS S.state
//      Owned(i)/Pending(i, *) -> Pending(i, q) (seq_cst).
//   3. CAS ring[q] e -> (q, S) (seq_cst). Fails: retry from 1.
//   4. CAS tail q -> q+1 (anyone may have done it).
//   5. CAS S.state Pending(i, q) -> q (a sweeper may have done it).
//   6. wake_word += 1 (seq_cst); if sleeper_mask or anonymous_sleepers
//      (seq_cst) != 0: FUTEX_WAKE.
//   7. Claim the evicted slot E = slot(e) for the next loan:
//      CAS E.state (message q - D, or kEmpty) -> Owned(i) (seq_cst), then
//      load pin[E] (seq_cst). Pinned: E.state = kFree (its reader will
//      unpin it later) and claim any kFree slot with pin == 0 instead.
//   A reader never sees half a message: S's bytes are written before the
//   seq_cst CAS of step 3, which readers acquire.
//
// Pin vs reuse (Dekker, across the two mappings): a reader pins with
// pin[S].fetch_or(bit) (seq_cst, reader-state file) and then checks S.state
// is still its message (seq_cst load, data file); a publisher claims with a
// CAS of S.state (seq_cst, data file) and then loads pin[S] (seq_cst,
// reader-state file). In the single total order of seq_cst operations one
// of the two second steps comes after the other's first step, so at least
// one side sees the other: the publisher does not reuse a pinned slot, or
// the reader sees the state changed and reports the message as overwritten
// (missed). The argument never needed the two words to share a line or a
// file: seq_cst orders operations on any two locations, and both mappings
// are MAP_SHARED views of the same physical pages in every process (x86:
// locked RMWs and mfence-fenced stores; arm64: ldar/stlr), whatever the
// virtual addresses or a mapping's PROT_READ. Release of a pin is
// fetch_and (release); the publisher's seq_cst load of the pin word
// acquires it, so the reader's reads happen before any reuse.
//
// What the reader-state file cannot do: nothing a publisher reads from it
// is used as an index or size unchecked (pin words and the sleeper mask
// are compared with zero, and only a pin bit below max_pinned picks a
// reader entry; the header's identity fields are only compared, by
// CheckConsistency, and its creator token is read only to remove files of
// creators that died between their two links), so any bytes there can
// make a publisher look longer for a slot (every slot pinned: it then
// clears the pins no reader can hold, Channel::ClearImpossiblePins; only
// pins re-set faster than that make sends fail, counted) or cost wake
// syscalls (sleeper bits set), but never corrupt the data file or crash a
// publisher. Pin bits one reader clears of another are not prevented (a
// shared word per slot keeps sends O(1) in readers): the victim's slot may
// be reused under it, and a pinned
// reader detects that when it lets go (Reader::Release counts
// overwritten_while_read when its bit is gone and the slot no longer holds
// its message, or when the slot holds another message; a slot freed or
// handed back while the bit stayed set was never written).
//
// Read (cursor r): e = ring[r] (acquire).
//   tag == r          pin the slot, check its state is message r (or
//                     Pending(*, r)), deliver in place; else it was
//                     overwritten after we read e: count it missed.
//   tag == r - D      nothing new, unless the header was overwritten: no
//                     message will come then, so a reader that finds
//                     nothing new also checks the magic and that the tail
//                     is at least r - 1 (a cursor is at most tail + 1:
//                     message `tail` placed, the tail not yet bumped), and
//                     reports corruption if not.
//   tag == r + kD     the reader fell behind: jump to max(r+1, tail - D) and
//                     count every index skipped as missed (exact).
//   anything else     corrupt.
//
// Wake (no lost wakeups): a waiter registers once (setup) in the sleeper
// registry and owns bit k of sleeper_mask (or, when all 64 entries are
// taken, counts in anonymous_sleepers instead; both in the reader-state
// file, so a guest that cannot write it never announces itself and waits
// with a bounded timeout instead). About to sleep it sets its
// bit (fetch_or, seq_cst), reads wake_word, re-checks the ring, then waits
// on the value read; after waking it clears the bit (fetch_and). A
// publisher commits, bumps wake_word (seq_cst) and then reads sleeper_mask
// and anonymous_sleepers (seq_cst, one line of the reader-state file). A
// waiter whose bit a writer of that file cleared is not woken, but every
// loop looks at its readers about every 100 ms whatever woke it
// (loop/wake_port.h, the lost-wake check).
// If it saw both zero,
// its bump precedes the waiter's announcement in the total order, so the
// waiter's re-check sees the message. "Nobody is waiting" means no loop is
// inside (or about to enter) its blocking wait: a loop keeps io_uring waits
// armed all the time but announces itself only around the blocking
// io_uring_enter, so busy subscribers cost publishers no syscall. A stale
// armed wait is harmless: its next completion is a spurious wake that the
// loop re-checks. A sleeper's bit belongs to its registry entry, so a
// waiter that dies asleep is swept like any dead owner: its bit is cleared
// and publishers go back to making no wake syscall.
//
// Death at any instruction (recovery by Channel::Sweep, run on every open
// and on demand):
//   - Registry entries hold owner tokens (pid + start time). A sweeper CASes
//     a dead owner's token to its own, cleans up, then frees the entry, so
//     two sweepers never clean the same entry and an entry is never reused
//     before its slots are cleaned.
//   - Dead publisher i: Owned(i) slots -> kFree (the message in flight is
//     lost); Pending(i, q) slots -> committed q if ring[q] names them
//     (finishing step 5, and helping step 4), else kFree.
//   - A slot evicted by a publisher that died before step 7 is a committed
//     message (or kEmpty) no ring entry names any more: -> kFree.
//   - Dead pinning reader k: clear bit k in every slot's pin word.
//   A process sweeps what it can write: dead publishers and orphaned slots
//   need write access to the data file, dead readers and sleepers to the
//   reader-state file; the rest is left to a process that can (and a
//   sweep says nothing about what it could not look at).
//   - Dead sleeper k: clear bit k of sleeper_mask. (An anonymous sleeper,
//     registered when the registry was full, cannot be attributed: if it
//     dies asleep, publishers keep making a wake syscall they could skip
//     until the channel is re-created; nothing is lost or blocked.)
//
// Hostile memory: every slot index, size, tag, state and tail read from
// shared memory is checked against this process's own copy of the params
// (never re-read from the file) before use; loops are bounded; a violation
// is reported as corruption to the caller, and the Channel handle stays
// corrupt from then on (every later operation says so, with the first
// finding: what and where). Impossible states count as corruption, never as
// loss: a ring entry naming a slot whose state is an *older* message, the
// initial kEmpty, or an owner beyond max_publishers. A file that shrinks
// under a live process cannot SIGBUS it (mapping_guard.h guards both
// mappings); the access past the end is what reports it. On a file backed
// by huge pages (channel_files.h) a cut inside a huge page leaves the rest
// of that page readable as zeros, with no SIGBUS: there the file's size,
// which CheckConsistency (every opener and tool) compares, reports it, and
// a running reader may read zeros in place of payload bytes until then, as
// it would read any bytes a writer put there. Space for both files is
// reserved (fallocate) before they are linked into place, so a full
// filesystem fails at creation, never at a later page fault. Findings in
// the reader-state file's contents never make the data file's handle
// corrupt (a hostile reader must not be able to stop publishers):
// CheckConsistency reports them, Sweep leaves them alone. Neither does a
// reader-state file that shrinks or grows: a handle
// that meets it (a SIGBUS absorbed by the guard, or the wrong size at open)
// goes on with a private reader state whose publishers always wake
// (Channel::reader_state_lost); pins and sleeper bits are then no longer
// shared, which costs wake syscalls and lets slots be reused under readers
// that read in place, who count it (overwritten_while_read).
// ============================================================================
#ifndef TETHER_SHM_LAYOUT_H_
#define TETHER_SHM_LAYOUT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "shm/owner.h"
#include "shm/queue_params.h"

namespace tether::shm::internal {

inline constexpr uint64_t kMagic = 0x48435245'48544554ull;  // "TETHERCH"
// "TETHERRS": the reader-state file.
inline constexpr uint64_t kStateMagic = 0x53525245'48544554ull;
// 3: reader state (registry, pins, sleepers) in a file of its own.
// 4: a data file of 2 MiB or more is a whole number of huge pages.
// 5: a slot header carries the message's origin (SendTimes::origin).
inline constexpr uint32_t kLayoutVersion = 5;
// From layout 2 on, every process that maps a channel's data file holds a
// shared flock on it for as long as it does (Channel::InUse probes it).
inline constexpr uint32_t kFirstLockingLayout = 2;
// What a private reader state (Channel::reader_state_lost) counts as
// anonymous sleepers, so that the publishers of that handle, who can no
// longer see anyone's sleeper bits, make the wake syscall on every send.
inline constexpr uint32_t kLostStateSleepers = 1u << 30;
inline constexpr size_t kCacheLine = 64;
inline constexpr uint32_t kMaxMetadataSize = 1u << 20;

// Bounded retries: each failed round means another publisher made progress
// (lock-free), so a bound far above any real contention only trips on
// corrupt memory, which must not hang us.
inline constexpr int kMaxAttempts = 1 << 16;

// --- ring entries -----------------------------------------------------------
inline constexpr int kTagBits = 40;
inline constexpr uint64_t kTagMask = (uint64_t{1} << kTagBits) - 1;
inline constexpr int kSlotBits = 64 - kTagBits;  // up to 16M slots
inline constexpr uint64_t kSlotMask = (uint64_t{1} << kSlotBits) - 1;

inline uint64_t Tag(uint64_t queue_index) { return queue_index & kTagMask; }
inline uint64_t MakeEntry(uint64_t queue_index, uint32_t slot) {
  return (Tag(queue_index) << kSlotBits) | slot;
}
inline uint64_t EntryTag(uint64_t entry) { return entry >> kSlotBits; }
inline uint64_t EntrySlot(uint64_t entry) { return entry & kSlotMask; }

// --- slot states --------------------------------------------------------------
inline constexpr uint64_t kFree = ~uint64_t{0};
inline constexpr uint64_t kEmpty = ~uint64_t{0} - 1;
inline constexpr uint64_t kMaxQueueIndex = (uint64_t{1} << 62) - 1;
inline constexpr uint64_t kOwnedBit = uint64_t{1} << 63;
inline constexpr uint64_t kPendingBit = uint64_t{1} << 62;
inline constexpr int kOwnerShift = kTagBits;  // owner index in bits 40..61
inline constexpr uint64_t kOwnerMask = (uint64_t{1} << 22) - 1;

inline bool IsMessage(uint64_t state) { return state <= kMaxQueueIndex; }
inline bool IsOwnedOrPending(uint64_t state) {
  return state != kFree && state != kEmpty && (state & kOwnedBit) != 0;
}
inline bool IsPending(uint64_t state) {
  return IsOwnedOrPending(state) && (state & kPendingBit) != 0;
}
inline uint64_t Owned(uint32_t publisher) {
  return kOwnedBit | (uint64_t{publisher} << kOwnerShift);
}
inline uint64_t Pending(uint32_t publisher, uint64_t queue_index) {
  return Owned(publisher) | kPendingBit | Tag(queue_index);
}
inline uint32_t StateOwner(uint64_t state) {
  return static_cast<uint32_t>((state >> kOwnerShift) & kOwnerMask);
}
// True when a slot in `state` holds message q (committed or being committed).
inline bool HoldsMessage(uint64_t state, uint64_t q) {
  return state == q || (IsPending(state) && (state & kTagMask) == Tag(q));
}

// A slot named by the ring entry for message q is not in a state holding q.
// Either it was reused after the entry was read (the message is gone), or
// it is in a state no protocol step can leave it in then: an *older*
// message, the initial kEmpty, an owner beyond the publisher registry, or
// bits that make no state. True for the latter: corruption, not loss.
inline bool ImpossibleAfterEntry(uint64_t state, uint64_t q,
                                 uint32_t max_publishers) {
  if (IsMessage(state)) return state < q;
  if (state == kFree) return false;
  if (state == kEmpty) return true;
  if ((state & kOwnedBit) == 0) return true;
  return StateOwner(state) >= max_publishers;
}

// A slot state no protocol step leaves any slot in, at any time: bits that
// make no state (neither free, empty, a queue index nor owned), an owner
// beyond the publisher registry, or an owned slot with a tag but no
// pending bit. Corruption of the slot headers.
inline bool NoStepLeavesASlotIn(uint64_t state, uint32_t max_publishers) {
  if (IsMessage(state) || state == kFree || state == kEmpty) return false;
  if ((state & kOwnedBit) == 0) return true;
  if (StateOwner(state) >= max_publishers) return true;
  return !IsPending(state) && (state & kTagMask) != 0;
}

// --- shared structs -------------------------------------------------------------
struct alignas(kCacheLine) ChannelHeader {
  uint64_t magic;
  uint32_t layout_version;
  uint32_t header_size;
  uint64_t params_hash;
  uint32_t slot_size;
  uint32_t queue_depth;
  uint32_t max_publishers;
  uint32_t max_pinned;
  uint64_t file_size;
  uint32_t metadata_size;
  uint32_t creator_pid;
  uint64_t created_realtime_ns;
  // Pairs this file with its reader-state file (see above).
  uint64_t nonce;
  uint64_t state_file_size;

  alignas(kCacheLine) std::atomic<uint64_t> tail;
  // The futex word readers sleep on; bumped after every commit.
  alignas(kCacheLine) std::atomic<uint32_t> wake_word;
  // Nonzero once a publisher stopped because it found the channel corrupt
  // (Channel::AnnounceCorruption): it sets this, bumps wake_word and wakes
  // every waiter, so that readers whose own reads never reach the damage
  // (a slot header, the publisher registry) stop and report it rather
  // than wait forever for sends that stopped. Tools that find corruption
  // do not set it (a check's finding must not stop a live stack). Never
  // cleared (a corrupt channel is made anew); zero in a healthy file.
  // Relaxed: a hint that only ever makes a reader report corruption.
  std::atomic<uint32_t> corrupt_found;
};

struct alignas(kCacheLine) ReaderStateHeader {
  uint64_t magic;
  uint32_t layout_version;
  uint32_t header_size;
  uint64_t params_hash;
  uint64_t nonce;  // the data file's
  uint64_t file_size;
  OwnerToken creator;  // for removing what a creator left when it died

  // Bit k: registered sleeper k is inside (or entering) a blocking wait.
  alignas(kCacheLine) std::atomic<uint64_t> sleeper_mask;
  // Sleepers that found the registry full, inside a blocking wait.
  std::atomic<uint32_t> anonymous_sleepers;
};

// Registered waiters (one per watched channel per loop or tool).
inline constexpr uint32_t kMaxSleepers = 64;
struct SleeperEntry {
  std::atomic<OwnerToken> owner;
};

struct alignas(kCacheLine) PublisherEntry {
  std::atomic<OwnerToken> owner;
  std::atomic<uint64_t> messages_sent;
  // Sends that failed (too large, no loan, corrupt, and the transport's
  // malformed or overflowing builds: Publisher::CountFailure): visible to
  // tools, so a publisher's failures are never silent.
  std::atomic<uint64_t> send_failures;
};

struct alignas(kCacheLine) ReaderEntry {
  std::atomic<OwnerToken> owner;
};

struct alignas(kCacheLine) SlotHeader {
  std::atomic<uint64_t> state;
  // Written by the owning publisher before commit, read by readers after the
  // ring entry's acquire. Relaxed atomics: an unpinned peek may race a reuse
  // and then discards what it read.
  std::atomic<uint64_t> monotonic_ns;
  std::atomic<uint64_t> realtime_ns;
  std::atomic<uint64_t> publisher_sequence;
  std::atomic<uint32_t> size;
  std::atomic<uint32_t> publisher_pid;
  std::atomic<uint32_t> publisher_index;
  // Where the message starts in the payload (bytes, a multiple of 8);
  // offset + size <= slot_size.
  std::atomic<uint32_t> offset;
  // Where the message entered tether from outside (SendTimes::origin); 0
  // for a message made by a tether node. Written at every send, as the
  // fields above.
  std::atomic<uint64_t> origin;
  uint64_t reserved[1];
};

static_assert(std::is_standard_layout_v<ChannelHeader>);
static_assert(std::is_standard_layout_v<ReaderStateHeader>);
static_assert(std::is_standard_layout_v<PublisherEntry>);
static_assert(std::is_standard_layout_v<ReaderEntry>);
static_assert(std::is_standard_layout_v<SlotHeader>);
static_assert(std::is_standard_layout_v<SleeperEntry>);
static_assert(sizeof(SleeperEntry) == 8);
static_assert(sizeof(SlotHeader) == kCacheLine);
static_assert(sizeof(PublisherEntry) == kCacheLine);
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<uint32_t>::is_always_lock_free);

inline constexpr uint64_t RoundUp(uint64_t n, uint64_t to) {
  return (n + to - 1) / to * to;
}

// A data file of at least this size is made a multiple of it, so that every
// byte of it can be backed by huge pages (channel_files.h, MapFile and
// CollapseToHugePages): the padding after the last slot costs less than
// 2 MiB, and only large channels (images, point clouds) have it.
inline constexpr uint64_t kHugePage = uint64_t{2} << 20;

// Byte offsets of each part of the data file, derived from params alone.
struct Layout {
  uint64_t metadata = 0;
  uint64_t publishers = 0;
  uint64_t ring = 0;
  uint64_t slot_headers = 0;
  uint64_t payloads = 0;
  uint64_t payload_stride = 0;
  uint64_t total = 0;

  static Layout For(const QueueParams& p, uint32_t metadata_size) {
    Layout l;
    l.metadata = RoundUp(sizeof(ChannelHeader), kCacheLine);
    l.publishers = l.metadata + RoundUp(metadata_size, kCacheLine);
    l.ring = l.publishers + uint64_t{p.max_publishers} * sizeof(PublisherEntry);
    l.slot_headers = l.ring + RoundUp(uint64_t{p.queue_depth} * 8, kCacheLine);
    l.payloads = l.slot_headers + p.pool_size() * sizeof(SlotHeader);
    l.payload_stride = RoundUp(p.slot_size, kCacheLine);
    l.total = l.payloads + p.pool_size() * l.payload_stride;
    if (l.total >= kHugePage) l.total = RoundUp(l.total, kHugePage);
    return l;
  }
};

// Byte offsets of each part of the reader-state file.
struct StateLayout {
  uint64_t readers = 0;
  uint64_t sleepers = 0;
  uint64_t pins = 0;
  uint64_t total = 0;

  static StateLayout For(const QueueParams& p) {
    StateLayout l;
    l.readers = RoundUp(sizeof(ReaderStateHeader), kCacheLine);
    l.sleepers = l.readers + uint64_t{p.max_pinned} * sizeof(ReaderEntry);
    l.pins = l.sleepers + RoundUp(kMaxSleepers * sizeof(SleeperEntry), kCacheLine);
    l.total = l.pins + RoundUp(p.pool_size() * 8, kCacheLine);
    return l;
  }
};

// FNV-1a over the layout version and the params: a mismatch on open means
// the two sides disagree about the channel's shape.
inline uint64_t ParamsHash(const QueueParams& p) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 0x100000001b3ull;
    }
  };
  mix(kLayoutVersion);
  mix(p.slot_size);
  mix(p.queue_depth);
  mix(p.max_publishers);
  mix(p.max_pinned);
  return h;
}

}  // namespace tether::shm::internal

#endif  // TETHER_SHM_LAYOUT_H_
