// shm: a handle's sticky corruption finding, the announcement of one to
// readers (AnnounceCorruption), the counters tools show (Stats) and the
// whole-structure consistency check of a channel (Channel::CheckConsistency),
// for tools and opening. Live publishers and
// readers may run meanwhile, so what a racing commit can legitimately show
// is tolerated, and a finding is re-checked once before it is reported.
#include <sys/stat.h>

#include <bit>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "shm/channel.h"
#include "shm/file_access.h"
#include "shm/futex.h"
#include "shm/layout.h"
#include "shm/mapping_guard.h"
#include "util/hot_path.h"

namespace tether::shm {
namespace {

int64_t FloorDiv(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

// A snapshot of what the check looks at, taken between two loads of the
// tail (publishers may commit meanwhile).
struct Snapshot {
  uint64_t tail_before = 0;
  uint64_t tail_after = 0;
  std::vector<uint64_t> ring;
  std::vector<uint64_t> states;
  std::vector<uint32_t> sizes;
  std::vector<uint32_t> offsets;
};

// What is wrong in `snap`, or empty.
std::string FindProblem(const Snapshot& snap, const QueueParams& p) {
  const uint64_t depth = p.queue_depth;
  const uint64_t pool = p.pool_size();
  const uint64_t before = snap.tail_before;
  const uint64_t after = snap.tail_after;
  if (before > internal::kMaxQueueIndex || after > internal::kMaxQueueIndex) {
    return absl::StrCat("the tail (", after,
                        ") is beyond the largest queue index: the header is "
                        "overwritten");
  }
  if (after < before) {
    return absl::StrCat("the tail went backwards (", before, " -> ", after,
                        "): the header is overwritten");
  }
  for (uint64_t pos = 0; pos < depth; ++pos) {
    const uint64_t e = snap.ring[pos];
    const uint64_t tag = internal::EntryTag(e);
    const uint64_t s = internal::EntrySlot(e);
    if (s >= pool) {
      return absl::StrCat("ring position ", pos, " names slot ", s,
                          ", beyond the pool of ", pool,
                          ": the ring is overwritten");
    }
    // The newest index at this position before the snapshot (negative: the
    // initial "message pos - depth"), or any later one committed during it
    // (up to `after`: placed, tail not yet bumped).
    const int64_t d = static_cast<int64_t>(depth);
    const int64_t first =
        static_cast<int64_t>(pos) +
        d * FloorDiv(static_cast<int64_t>(before) - 1 -
                         static_cast<int64_t>(pos),
                     d);
    int64_t named = -1;
    bool ok = false;
    for (int64_t q = first; q <= static_cast<int64_t>(after); q += d) {
      if (tag == internal::Tag(static_cast<uint64_t>(q))) {
        ok = true;
        named = q;
        break;
      }
    }
    if (!ok) {
      return absl::StrFormat(
          "ring position %u has tag %u, which is no queue index that "
          "position can hold at tail %u: the ring is overwritten",
          pos, tag, before);
    }
    // A committed message's slot holds it, or was reused since (states are
    // read after the ring, so only a newer state can race in).
    if (named >= 0) {
      const uint64_t q = static_cast<uint64_t>(named);
      const uint64_t state = snap.states[s];
      if (!internal::HoldsMessage(state, q) && internal::ImpossibleAfterEntry(state, q, p.max_publishers)) {
        return absl::StrFormat(
            "ring position %u names message %u in slot %u, whose state 0x%x "
            "no send can leave it in: the slot headers are overwritten",
            pos, q, s, state);
      }
    }
  }
  absl::flat_hash_map<uint64_t, uint64_t> holder;  // message -> slot
  for (uint64_t s = 0; s < pool; ++s) {
    const uint64_t state = snap.states[s];
    if (internal::IsMessage(state)) {
      auto [it, inserted] = holder.emplace(state, s);
      if (!inserted) {
        return absl::StrCat("slots ", it->second, " and ", s,
                            " both claim to hold message ", state,
                            ": the slot headers are overwritten");
      }
    }
    if (snap.sizes[s] > p.slot_size ||
        snap.offsets[s] > p.slot_size - snap.sizes[s]) {
      return absl::StrCat("slot ", s, " claims a message of ", snap.sizes[s],
                          " bytes at offset ", snap.offsets[s],
                          ", outside its ", p.slot_size,
                          " bytes: the slot headers are overwritten");
    }
    if (internal::IsMessage(state)) {
      if (state > after) {
        return absl::StrCat("slot ", s, " claims to hold message ", state,
                            ", beyond the tail (", after,
                            "): the slot headers are overwritten");
      }
      continue;
    }
    if (state == internal::kFree || state == internal::kEmpty) continue;
    if ((state & internal::kOwnedBit) == 0 ||
        internal::StateOwner(state) >= p.max_publishers) {
      return absl::StrFormat(
          "slot %u is in state 0x%x, which no publisher can leave it in: "
          "the slot headers are overwritten",
          s, state);
    }
  }
  return "";
}

}  // namespace

bool Channel::MappingDamaged() const {
  if (internal::MappingDamaged(guard_)) {
    ReportCorruption(
        "the channel file was truncated (or shrank) under this process: the "
        "access at this offset of the mapping raised SIGBUS",
        internal::DamageOffset(guard_));
    return true;
  }
  if (internal::MappingDamaged(state_guard_)) {
    // Not corruption (reader_state_lost): the handle goes on with a
    // private reader state, unless it could not be made.
    if (LoseReaderState()) return false;
    ReportCorruption(
        "the channel's reader-state file was truncated (or shrank) under "
        "this process (a process with write access to it did that): the "
        "access at this offset of its mapping raised SIGBUS",
        internal::DamageOffset(state_guard_));
    return true;
  }
  return false;
}

std::string Channel::GuestReason() const {
  constexpr char kGuest[] =
      "this process reads as a guest: unpinned copies checked after "
      "copying, and a bounded poll of the wake word instead of a wakeup";
  if (reader_state_lost()) {
    return absl::StrCat(
        "the reader state of channel ", name_, " (", state_path_,
        ") is lost to this process: ", ReaderStateProblem(), "; ", kGuest,
        "; once every process of the stack has stopped, `", clean_command_,
        "` removes the channel and the next start makes it anew");
  }
  if (state_writable_) return "";
  return absl::StrCat("you (", internal::DescribeSelf(), ") can read ", path_,
                      " but not write its reader state ", state_path_, " (",
                      internal::DescribeFile(state_path_), "), so ", kGuest,
                      "; to read in place, pinned and woken: ",
                      internal::AccessFix(state_path_, "write"));
}

std::string Channel::ReaderStateProblem() const {
  if (reader_state_lost()) {
    const std::string what =
        state_size_at_open_ != kNone
            ? absl::StrCat("the file is ", state_size_at_open_,
                           " bytes but its params need ", state_size_)
            : "the file shrank under this process";
    return absl::StrCat(
        what,
        " (a process with write access to it truncated or grew it), so "
        "processes that touch it now use a private reader state: their "
        "publishers wake on every send, their pins no longer hold slots for "
        "readers in other processes, and their new readers read as guests");
  }
  const internal::ReaderStateHeader* h = state_header_;
  // The identity fields creation wrote. Opening does not refuse a file
  // whose header differs (channel.cc, Map: a reader must not be able to
  // stop the channel) and nothing else reads them, so this is where a
  // header overwritten by a process with write access shows.
  const char* field = nullptr;
  if (h->magic != internal::kStateMagic) {
    field = "magic";
  } else if (h->layout_version != internal::kLayoutVersion) {
    field = "layout version";
  } else if (h->header_size != sizeof(internal::ReaderStateHeader)) {
    field = "header size";
  } else if (h->params_hash != internal::ParamsHash(params_)) {
    field = "params hash";
  } else if (h->nonce != nonce_) {
    field = "nonce";
  } else if (h->file_size != state_size_) {
    field = "file size";
  }
  if (field != nullptr) {
    return absl::StrCat("its header was overwritten (its ", field,
                        " is not the one the channel was created with)");
  }
  uint64_t registered = 0;
  for (uint32_t k = 0; k < params_.max_pinned; ++k) {
    if (reader_entry(k)->owner.load(std::memory_order_acquire) != kNoOwner) {
      registered |= uint64_t{1} << k;
    }
  }
  for (uint64_t s = 0; s < params_.pool_size(); ++s) {
    const uint64_t pins = pin_word(s)->load(std::memory_order_acquire);
    if ((pins & ~registered) != 0) {
      return absl::StrFormat(
          "slot %u is pinned by readers that are not registered (bits "
          "0x%x): those slots are held until the channel is re-created",
          s, pins & ~registered);
    }
  }
  uint64_t sleepers = 0;
  for (uint32_t k = 0; k < internal::kMaxSleepers; ++k) {
    if (sleeper_entry(k)->owner.load(std::memory_order_acquire) != kNoOwner) {
      sleepers |= uint64_t{1} << k;
    }
  }
  const uint64_t mask = h->sleeper_mask.load(std::memory_order_acquire);
  if ((mask & ~sleepers) != 0) {
    return absl::StrFormat(
        "sleeper bits 0x%x belong to no registered waiter: publishers make a "
        "wake syscall on every send for nobody",
        mask & ~sleepers);
  }
  return "";
}

TETHER_HOT_PATH uint64_t Channel::CorruptionEvents() {
  return internal::CorruptionEvents();
}

std::string_view Channel::corruption() const {
  if (corrupt_state_.load(std::memory_order_acquire) != 2) return {};
  return corruption_;
}

absl::Status Channel::CorruptionError(std::string_view consequence) const {
  const std::string_view what = corruption();
  return absl::DataLossError(absl::StrCat(
      "channel ", name_, " is corrupt: ",
      what.empty() ? std::string("(the finding is still being recorded)")
                   : std::string(what),
      " (", path_, ")", consequence.empty() ? "" : "; ",
      std::string(consequence),
      ". To recover, stop the processes that use it (stop the stack), then "
      "run `",
      clean_command_,
      "` (it removes a corrupt channel that no live process uses) and start "
      "them again"));
}

void Channel::ReportCorruption(const char* what, uint64_t a,
                               uint64_t b) const {
  int expected = 0;
  if (!corrupt_state_.compare_exchange_strong(expected, 1,
                                              std::memory_order_acq_rel)) {
    return;  // the first finding stays
  }
  // No allocation: a fixed buffer and a hand-rolled decimal writer.
  size_t n = 0;
  const size_t cap = sizeof(corruption_) - 1;
  auto put = [&](const char* text) {
    while (*text != '\0' && n < cap) corruption_[n++] = *text++;
  };
  auto put_number = [&](uint64_t v) {
    char digits[21];
    int d = 0;
    do {
      digits[d++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v != 0);
    while (d > 0 && n < cap) corruption_[n++] = digits[--d];
  };
  put(what);
  if (a != kNone) {
    put(" (");
    put_number(a);
    if (b != kNone) {
      put(", ");
      put_number(b);
    }
    put(")");
  }
  corruption_[n] = '\0';
  corrupt_state_.store(2, std::memory_order_release);
  internal::CountCorruptionEvent();
}

void Channel::AnnounceCorruption() const {
  // A guest cannot write the header; a header page the mapping guard
  // replaced takes the stores privately (readers there meet the
  // truncation themselves).
  if (!data_writable_) return;
  internal::ChannelHeader* h = header();
  h->corrupt_found.store(1, std::memory_order_relaxed);
  h->wake_word.fetch_add(1, std::memory_order_release);
  (void)FutexWake(&h->wake_word);
}

ChannelStats Channel::Stats() const {
  ChannelStats s;
  s.next_queue_index = header_->tail.load(std::memory_order_acquire);
  for (uint32_t i = 0; i < params_.max_publishers; ++i) {
    if (publisher_entry(i)->owner.load(std::memory_order_relaxed) != kNoOwner) {
      ++s.publishers;
    }
  }
  for (uint32_t i = 0; i < params_.max_pinned; ++i) {
    if (reader_entry(i)->owner.load(std::memory_order_relaxed) != kNoOwner) {
      ++s.pinning_readers;
    }
  }
  for (uint32_t i = 0; i < internal::kMaxSleepers; ++i) {
    if (sleeper_entry(i)->owner.load(std::memory_order_relaxed) != kNoOwner) {
      ++s.registered_sleepers;
    }
  }
  for (uint32_t i = 0; i < params_.max_publishers; ++i) {
    s.send_failures +=
        publisher_entry(i)->send_failures.load(std::memory_order_relaxed);
  }
  s.sleepers = static_cast<uint32_t>(std::popcount(
                   state_header_->sleeper_mask.load(std::memory_order_relaxed))) +
               state_header_->anonymous_sleepers.load(std::memory_order_relaxed);
  // A private state's bias is nobody asleep.
  if (reader_state_lost()) s.sleepers -= internal::kLostStateSleepers;
  s.file_size = size_ + state_size_;
  return s;
}

absl::Status Channel::CheckConsistency() const {
  // Every data-file finding, as this handle recorded it first.
  const auto corrupt_error = [this] {
    return absl::DataLossError(absl::StrCat(
        "channel ", name_, " is corrupt: ", std::string(corruption()),
        "; remove ", path_, " and restart the stack's nodes on it"));
  };
  if (corrupt()) {
    return corrupt_error();
  }
  // A publisher stopped on a finding of its own (AnnounceCorruption): the
  // channel stays corrupt for every later opener, tools and restarted
  // nodes included, until it is made anew.
  if (header_->corrupt_found.load(std::memory_order_relaxed) != 0) {
    ReportCorruption(
        "a publisher of this channel found its shared memory corrupt and "
        "stopped sending (its own error says what and where)");
    return corrupt_error();
  }
  // A file cut short inside one of its huge pages (channel_files.h) reads
  // as zeros up to that page's end instead of raising SIGBUS: tmpfs keeps
  // the rest of the page until memory pressure splits it. Its size is then
  // the only sign, so it is checked here as well.
  struct stat st;
  if (fd_ >= 0 && ::fstat(fd_, &st) == 0 &&
      static_cast<uint64_t>(st.st_size) != size_) {
    ReportCorruption(
        "the channel file was truncated (or resized) under this process: "
        "its size (first number) no longer matches its params (second)",
        static_cast<uint64_t>(st.st_size), size_);
    return corrupt_error();
  }
  std::string problem;
  Snapshot snap;
  snap.ring.resize(params_.queue_depth);
  snap.states.resize(params_.pool_size());
  snap.sizes.resize(params_.pool_size());
  snap.offsets.resize(params_.pool_size());
  // A finding is re-checked once: a racing commit can show a moment that a
  // second look does not.
  for (int attempt = 0; attempt < 2; ++attempt) {
    snap.tail_before = header_->tail.load(std::memory_order_acquire);
    for (uint64_t pos = 0; pos < params_.queue_depth; ++pos) {
      snap.ring[pos] = ring_entry(pos)->load(std::memory_order_acquire);
    }
    for (uint64_t s = 0; s < params_.pool_size(); ++s) {
      snap.states[s] = slot_header(s)->state.load(std::memory_order_acquire);
      snap.sizes[s] = slot_header(s)->size.load(std::memory_order_relaxed);
      snap.offsets[s] = slot_header(s)->offset.load(std::memory_order_relaxed);
    }
    snap.tail_after = header_->tail.load(std::memory_order_acquire);
    problem = FindProblem(snap, params_);
    if (problem.empty()) break;
  }
  if (problem.empty()) {
    // The reader-state file: reported, never sticky (see channel.h).
    std::string state_problem;
    for (int attempt = 0; attempt < 2; ++attempt) {
      state_problem = ReaderStateProblem();
      if (state_problem.empty()) return absl::OkStatus();
    }
    return absl::DataLossError(absl::StrCat(
        "the reader state of channel ", name_, " (", state_path_,
        ") is inconsistent: ", state_problem,
        ". Messages are intact; a process with write access to that file "
        "wrote it (or a reader crashed in a way tether does not expect); "
        "re-create the channel: once every process of the stack has "
        "stopped, `",
        clean_command_, "` removes it and the next start makes it anew"));
  }
  ReportCorruption(problem.c_str());
  return corrupt_error();
}

}  // namespace tether::shm
