#include "shm/channel.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <new>
#include <optional>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "shm/channel_files.h"
#include "shm/clock.h"
#include "shm/file_access.h"
#include "shm/futex.h"
#include "shm/layout.h"
#include "shm/mapping_guard.h"
#include "util/hot_path.h"

namespace tether::shm {
namespace {

using internal::ChannelHeader;
using internal::Layout;
using internal::PublisherEntry;
using internal::ReaderEntry;
using internal::ReaderStateHeader;
using internal::StateLayout;
using internal::SleeperEntry;
using internal::SlotHeader;
using internal::BuildFile;
using internal::BuiltFile;
using internal::DescribeParams;
using internal::ErrnoStatus;
using internal::Escape;
using internal::Initialise;
using internal::InitialiseState;
using internal::NewNonce;
using internal::NoRoomForAFile;
using internal::NoSpaceStatus;
using internal::RemoveStateFiles;
using internal::StatePath;

// The payload on OpenOrCreate's refusals of a channel of another shape or
// metadata (Map), which OpenOrCreate makes anew when nobody uses it.
constexpr char kMismatchPayload[] = "tether.shm/mismatch";

// True if `fd` (the channel file at `path`) was made by another tether
// build -- a layout version other than ours, from 2 on -- and no process
// maps it: builds since layout 2 hold a shared flock on a channel file
// while they map it, so an exclusive one we get says it is a leftover of a
// stack that stopped (an upgrade). Takes that lock and leaves it with fd.
bool IsUnusedOtherLayout(int fd, const std::string& path) {
  ChannelHeader h;
  if (::pread(fd, &h, sizeof(h), 0) != static_cast<ssize_t>(sizeof(h)) ||
      h.magic != internal::kMagic ||
      h.layout_version == internal::kLayoutVersion ||
      h.layout_version < internal::kFirstLockingLayout) {
    return false;
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) return false;
  // Still the file at `path`, not one made since we opened it.
  struct stat opened, now;
  return ::fstat(fd, &opened) == 0 && ::lstat(path.c_str(), &now) == 0 &&
         opened.st_dev == now.st_dev && opened.st_ino == now.st_ino;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Channel>> Channel::OpenOrCreate(
    const ChannelOptions& options, std::string_view name,
    const QueueParams& params, std::span<const std::byte> metadata) {
  // Debian's Abseil 20220623 has its own string_view: keep std::string here.
  const std::string name_str(name);
  if (name.empty()) return absl::InvalidArgumentError("channel name is empty");
  if (absl::Status s = Validate(params); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("channel ", name_str, ": ", s.message()));
  }
  if (metadata.size() > internal::kMaxMetadataSize) {
    return absl::InvalidArgumentError(absl::StrCat(
        "channel ", name_str, ": metadata of ", metadata.size(),
        " bytes is larger than ", internal::kMaxMetadataSize));
  }
  const mode_t reader_mode = ReaderModeFor(options);
  const std::optional<gid_t> reader_group =
      options.reader_group.has_value() ? options.reader_group : options.group;
  const std::string dir = absl::StrCat(options.root, "/", options.instance);
  const std::string path = PathFor(options, name);
  const std::string escaped = Escape(name);
  bool open_lost = false;  // a channel with a lost reader state is in use
  for (int attempt = 0; attempt < 3; ++attempt) {
    absl::StatusOr<internal::OpenedFile> existing =
        internal::OpenBestAccess(path, absl::StrCat("channel ", name_str));
    if (existing.ok()) {
      // A stopped stack's channel of another layout version is made anew
      // with ours (its messages are of no use to this build).
      if (IsUnusedOtherLayout(existing->fd, path) &&
          Remove(options, name).ok()) {
        ::close(existing->fd);
        continue;
      }
      absl::StatusOr<std::unique_ptr<Channel>> mapped =
          Map(options, name_str, path, existing->fd, existing->writable,
              params, metadata);
      // Removed (or replaced) while we opened it: open or make it again.
      if (absl::IsAborted(mapped.status())) continue;
      // Another shape or type that no process uses (a stopped stack's,
      // from before a config or schema change): made anew, as a channel of
      // another layout version is. Decided and removed under the exclusive
      // lock, so a process opening it meanwhile keeps it.
      if (mapped.status().GetPayload(kMismatchPayload).has_value()) {
        absl::StatusOr<bool> removed = RemoveIfUnused(options, name);
        if (removed.ok() && *removed) continue;
      }
      // So is one whose reader-state file was lost (a stopped stack's
      // handles would all be private); while in use, it is opened so.
      if (mapped.ok() && (*mapped)->reader_state_lost() && !open_lost) {
        mapped->reset();  // our own lock must not count
        absl::StatusOr<bool> removed = RemoveIfUnused(options, name);
        open_lost = !removed.ok() || !*removed;
        continue;
      }
      return mapped;
    }
    if (existing.status().code() != absl::StatusCode::kNotFound) {
      return existing.status();
    }
    if (absl::StatusOr<std::vector<std::string>> made =
            MakeInstanceFolder(options);
        !made.ok()) {
      return made.status();
    }
    // Refuse up front what cannot fit: reserving it page by page would fill
    // the filesystem (and RAM, on tmpfs) before failing.
    const uint64_t data_size = Layout::For(params, metadata.size()).total;
    const uint64_t state_size = StateLayout::For(params).total;
    if (std::optional<FreeSpace> free = FreeSpaceOf(dir); free.has_value()) {
      const uint64_t space =
          SpaceFor(params, metadata.size(), free->block_size);
      if (space > free->bytes) return NoSpaceStatus(name_str, dir, space);
    }
    const uint64_t nonce = NewNonce();
    const OwnerToken creator = CurrentProcessToken();
    absl::StatusOr<BuiltFile> state = BuildFile(
        dir, escaped, name_str, state_size, reader_mode, reader_group,
        /*huge=*/false, [&](std::byte* m) { InitialiseState(m, params, nonce, creator); });
    if (!state.ok()) return state.status();
    absl::StatusOr<BuiltFile> data = BuildFile(
        dir, escaped, name_str, data_size, options.mode, options.group,
        options.huge_pages, [&](std::byte* m) { Initialise(m, params, metadata, nonce); });
    if (!data.ok()) {
      ::close(state->fd);
      ::unlink(state->tmp.c_str());
      return data.status();
    }
    // The reader-state file first, under its nonce name (nobody else's),
    // then the data file: whoever opens the data file finds both.
    const std::string state_path = StatePath(path, nonce);
    const int state_linked = ::link(state->tmp.c_str(), state_path.c_str());
    const int state_errno = errno;
    ::unlink(state->tmp.c_str());
    ::close(state->fd);
    if (state_linked != 0) {
      ::close(data->fd);
      ::unlink(data->tmp.c_str());
      // A tmpfs takes an inode for each link too, so a filesystem with
      // room for the two unnamed files can still refuse their names.
      if (state_errno == ENOSPC) return NoRoomForAFile(name_str, dir);
      return ErrnoStatus(state_errno, absl::StrCat("cannot publish ", state_path));
    }
    const int linked = ::link(data->tmp.c_str(), path.c_str());
    const int link_errno = errno;
    ::unlink(data->tmp.c_str());
    if (linked == 0) {
      // What creators that died between their two links left behind.
      RemoveStateFiles(dir, escaped, nonce, /*only_dead_creators=*/true);
      absl::StatusOr<std::unique_ptr<Channel>> made =
          Map(options, name_str, path, data->fd, /*writable=*/true, params,
              metadata);
      if (!made.ok()) {
        // Made but unusable: ours to take back, unless someone opened it.
        absl::StatusOr<bool> busy = InUse(options, name);
        if (busy.ok() && !*busy) (void)Remove(options, name);
        return made.status();
      }
      (*made)->created_ = true;
      return made;
    }
    ::close(data->fd);
    ::unlink(state_path.c_str());  // ours, and nobody's now
    if (link_errno == ENOSPC) return NoRoomForAFile(name_str, dir);
    if (link_errno != EEXIST) {
      return ErrnoStatus(link_errno, absl::StrCat("cannot publish ", path));
    }
    // Lost the race: open the winner's channel.
  }
  return absl::AbortedError(absl::StrCat(
      "channel ", path, " kept appearing and disappearing while opening it"));
}

absl::StatusOr<std::unique_ptr<Channel>> Channel::Open(
    const ChannelOptions& options, std::string_view name) {
  const std::string path = PathFor(options, name);
  const std::string name_str(name);
  for (int attempt = 0;; ++attempt) {
    absl::StatusOr<internal::OpenedFile> f =
        internal::OpenBestAccess(path, absl::StrCat("channel ", name_str));
    if (!f.ok()) {
      if (f.status().code() == absl::StatusCode::kNotFound) {
        return absl::NotFoundError(absl::StrCat(
            "channel ", name_str, " does not exist (no file ", path,
            "): is the stack running, and with the same root and instance?"));
      }
      return f.status();
    }
    absl::StatusOr<std::unique_ptr<Channel>> mapped =
        Map(options, name_str, path, f->fd, f->writable, std::nullopt, {});
    // Removed (or replaced) while we opened it: open what is there now.
    if (!absl::IsAborted(mapped.status()) || attempt + 1 == kOpenAttempts) {
      return mapped;
    }
  }
}

absl::StatusOr<std::unique_ptr<Channel>> Channel::Map(
    const ChannelOptions& options, std::string name, std::string path, int fd,
    bool writable, const std::optional<QueueParams>& expected,
    std::span<const std::byte> expected_metadata) {
  auto close_fd = [fd] { ::close(fd); };
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    close_fd();
    return ErrnoStatus(errno, absl::StrCat("cannot stat ", path));
  }
  uint64_t file_size = st.st_size;
  const dev_t data_dev = st.st_dev;  // `st` is reused for the state file
  const ino_t data_ino = st.st_ino;
  // The path no longer names the file we opened: removed (tether clean)
  // and maybe made anew since. Such an open is Aborted, and Open() tries
  // again, rather than map an orphan nobody else will open.
  const auto removed_since_open = [&] {
    struct stat now;
    return ::lstat(path.c_str(), &now) != 0 || now.st_dev != data_dev ||
           now.st_ino != data_ino;
  };
  const auto removed_error = [&] {
    return absl::AbortedError(absl::StrCat(
        "channel ", name, " was removed while this process opened it"));
  };
  if (file_size < sizeof(ChannelHeader)) {
    close_fd();
    return absl::DataLossError(absl::StrCat(
        "channel file ", path, " is ", file_size,
        " bytes, too small to be a tether channel: remove it (rm ", path,
        ")"));
  }
  // Read the header through pread: nothing is trusted until checked.
  ChannelHeader h;
  if (::pread(fd, &h, sizeof(h), 0) != static_cast<ssize_t>(sizeof(h))) {
    int err = errno;
    close_fd();
    return ErrnoStatus(err, absl::StrCat("cannot read ", path));
  }
  if (h.magic != internal::kMagic) {
    close_fd();
    return absl::DataLossError(absl::StrCat(
        path, " is not a tether channel (bad magic): remove it (rm ", path,
        ")"));
  }
  if (h.layout_version != internal::kLayoutVersion ||
      h.header_size != sizeof(ChannelHeader)) {
    close_fd();
    return absl::FailedPreconditionError(absl::StrCat(
        "channel ", name, " has layout version ", h.layout_version,
        ", this build uses ", internal::kLayoutVersion,
        ": another tether build made it (", path,
        "); run every process of a stack with one tether build. A stack "
        "launched by this build makes it anew once the other build's "
        "processes have stopped, or `", CleanCommand(options),
        "` removes it then"));
  }
  QueueParams found{h.slot_size, h.queue_depth, h.max_publishers,
                    h.max_pinned};
  if (absl::Status s = Validate(found); !s.ok()) {
    close_fd();
    return absl::DataLossError(absl::StrCat(
        "channel ", path, " has corrupt params: ", s.message(),
        "; remove it once nothing uses it (`", CleanCommand(options),
        "`, or rm ", path, ") and start the stack's nodes again"));
  }
  if (h.params_hash != internal::ParamsHash(found) ||
      h.metadata_size > internal::kMaxMetadataSize) {
    close_fd();
    return absl::DataLossError(absl::StrCat(
        "channel ", path,
        " header is corrupt (params hash or metadata size): remove it once "
        "nothing uses it (`", CleanCommand(options), "`, or rm ", path,
        ") and start the stack's nodes again"));
  }
  if (expected.has_value() && !(found == *expected)) {
    close_fd();
    absl::Status mismatch = absl::FailedPreconditionError(absl::StrCat(
        "channel ", name, " exists with params ", DescribeParams(found),
        " but this process expects ", DescribeParams(*expected),
        ": make every process use the same config; ",
        ChangeAdvice(options, name)));
    mismatch.SetPayload(kMismatchPayload, absl::Cord("params"));
    return mismatch;
  }
  Layout l = Layout::For(found, h.metadata_size);
  StateLayout sl = StateLayout::For(found);
  if (h.file_size != l.total || file_size != l.total ||
      h.state_file_size != sl.total) {
    close_fd();
    return absl::DataLossError(absl::StrCat(
        "channel ", path, " is ", file_size, " bytes but its params need ",
        l.total, ": the file was ",
        file_size < l.total ? "truncated" : "grown",
        " (or its header is corrupt); remove it once nothing uses it (`",
        CleanCommand(options), "`, or rm ", path,
        ") and start the stack's nodes again"));
  }
  // The reader-state file its nonce names, checked the same way.
  const std::string state_path = StatePath(path, h.nonce);
  absl::StatusOr<internal::OpenedFile> state = internal::OpenBestAccess(
      state_path, absl::StrCat("the reader state of channel ", name));
  if (!state.ok()) {
    close_fd();
    if (state.status().code() == absl::StatusCode::kNotFound) {
      // Removed between our open of the data file and this one.
      if (removed_since_open()) return removed_error();
      return absl::DataLossError(absl::StrCat(
          "channel ", name, " has no reader-state file (", state_path,
          " is missing: removed by hand?): remove the channel (tether clean, "
          "or rm ", path, ") and restart the stack's nodes on it"));
    }
    if (state.status().code() == absl::StatusCode::kPermissionDenied) {
      return absl::PermissionDeniedError(absl::StrCat(
          "you can read ", path, " but not its reader state: ",
          state.status().message()));
    }
    return state.status();
  }
  const int sfd = state->fd;
  auto close_both = [fd, sfd] {
    ::close(fd);
    ::close(sfd);
  };
  // Only the size is checked here. A file of another size (a process with
  // write access truncated or grew it) is not shared: this handle works on
  // a private reader state (reader_state_lost), so that one reader cannot
  // stop every publisher and reader that opens the channel from then on.
  // Its header is not checked: the file was found by the nonce name the
  // data file's header gives (a stale file of another incarnation has
  // another name), and nothing else uses the header's identity fields
  // (layout.h, "What the reader-state file cannot do"). Whoever may write
  // the file may write garbage there; CheckConsistency reports a bad
  // header, never sticky (ReaderStateProblem).
  if (::fstat(sfd, &st) != 0) {
    const int err = errno;
    close_both();
    return ErrnoStatus(err, absl::StrCat("cannot stat ", state_path));
  }
  const bool state_lost = static_cast<uint64_t>(st.st_size) != sl.total;
  int flags = MAP_SHARED | (options.prefault ? MAP_POPULATE : 0);
  void* m = internal::MapFile(fd, l.total,
                              PROT_READ | (writable ? PROT_WRITE : 0), flags);
  int map_errno = errno;
  if (m == MAP_FAILED) {
    close_both();
    return ErrnoStatus(map_errno, absl::StrCat("cannot map ", path));
  }
  void* sm = state_lost ? MapPrivateState(nullptr, sl.total, found, h.nonce)
                        : ::mmap(nullptr, sl.total,
                                 PROT_READ |
                                     (state->writable ? PROT_WRITE : 0),
                                 flags, sfd, 0);
  map_errno = errno;
  ::close(sfd);  // the mapping keeps the file
  if (sm == MAP_FAILED) {
    ::munmap(m, l.total);
    close_fd();
    return ErrnoStatus(map_errno, absl::StrCat("cannot map ", state_path));
  }
  // A shared lock for as long as the channel is mapped: a tool can tell a
  // channel nobody uses (InUse) from one a process has open, whatever its
  // registries say. InUse's probe holds the exclusive lock for a moment:
  // try again for up to ~20 ms rather than stay unlocked (and look unused)
  // because of it. A process that keeps the exclusive lock (hostile) only
  // leaves us unlocked, as before; it never blocks the open.
  for (int i = 0; i < 200 && ::flock(fd, LOCK_SH | LOCK_NB) != 0 &&
                  errno == EWOULDBLOCK;
       ++i) {
    ::usleep(100);
  }
  // Still the file at `path`? RemoveIfUnused (tether clean) unlinks under
  // its exclusive lock, so one removed before we held ours is gone or
  // replaced by now.
  if (removed_since_open()) {
    ::munmap(sm, sl.total);
    ::munmap(m, l.total);
    close_fd();
    return removed_error();
  }
  std::unique_ptr<Channel> c(new Channel());
  c->fd_ = fd;
  c->data_writable_ = writable;
  c->guard_ = internal::RegisterMapping(m, l.total);
  c->state_guard_ = state_lost ? -1 : internal::RegisterMapping(sm, sl.total);
  if (state_lost) {
    c->state_lost_.store(kStateLost, std::memory_order_relaxed);
    c->state_size_at_open_ = static_cast<uint64_t>(st.st_size);
  }
  c->lock_memory_ = options.lock_memory;
  c->name_ = std::move(name);
  c->path_ = std::move(path);
  c->clean_command_ = CleanCommand(options);
  c->state_path_ = state_path;
  c->params_ = found;
  c->base_ = static_cast<std::byte*>(m);
  c->size_ = l.total;
  c->state_base_ = static_cast<std::byte*>(sm);
  c->state_size_ = sl.total;
  c->state_writable_ = state->writable;
  c->header_ = reinterpret_cast<ChannelHeader*>(m);
  c->state_header_ = reinterpret_cast<ReaderStateHeader*>(sm);
  c->nonce_ = h.nonce;
  c->metadata_ = std::span<const std::byte>(c->base_ + l.metadata,
                                            h.metadata_size);
  c->publishers_offset_ = l.publishers;
  c->readers_offset_ = sl.readers;
  c->sleepers_offset_ = sl.sleepers;
  c->pins_offset_ = sl.pins;
  c->ring_offset_ = l.ring;
  c->slot_headers_offset_ = l.slot_headers;
  c->payloads_offset_ = l.payloads;
  c->payload_stride_ = l.payload_stride;
  c->ring_mask_ = found.queue_depth - 1;
  if (c->self_token() == kNoOwner) {
    return absl::FailedPreconditionError(
        "cannot read /proc/self/stat: tether needs /proc to track process "
        "liveness");
  }
  if (expected.has_value() &&
      (expected_metadata.size() != c->metadata_.size() ||
       !std::equal(expected_metadata.begin(), expected_metadata.end(),
                   c->metadata_.begin()))) {
    const size_t found_bytes = c->metadata_.size();
    const std::string channel_name = c->name_;  // `name` was moved there
    c.reset();  // unmapped and unlocked: ChangeAdvice() sees others only
    absl::Status mismatch = absl::FailedPreconditionError(absl::StrCat(
        "channel ", channel_name, " exists with different metadata (",
        found_bytes, " bytes vs ", expected_metadata.size(),
        " expected): another process created it with another type or "
        "schema; make every process use the same config; ",
        ChangeAdvice(options, channel_name)));
    mismatch.SetPayload(kMismatchPayload, absl::Cord("metadata"));
    return mismatch;
  }
  if (options.lock_memory &&
      (::mlock(m, l.total) != 0 || ::mlock(sm, sl.total) != 0)) {
    return ErrnoStatus(errno, absl::StrCat(
        "cannot mlock channel ", c->name_, " (", l.total + sl.total,
        " bytes): raise RLIMIT_MEMLOCK in /etc/security/limits.conf or "
        "grant CAP_IPC_LOCK"));
  }
  // A corrupt channel opens (tools must be able to report it), but the
  // handle is corrupt from the start and says why, and it is not swept.
  // Reader-state findings do not stop the sweep of the data file's dead.
  (void)c->CheckConsistency();
  c->Sweep();
  return c;
}

OwnerToken Channel::self_token() {
  pid_t pid = ::getpid();
  if (pid != token_pid_ || self_token_ == kNoOwner) {
    self_token_ = CurrentProcessToken();
    token_pid_ = pid;
  }
  return self_token_;
}

Channel::~Channel() {
  if (guard_ >= 0) internal::UnregisterMapping(guard_);
  if (state_guard_ >= 0) internal::UnregisterMapping(state_guard_);
  if (base_ != nullptr) ::munmap(base_, size_);
  if (state_base_ != nullptr) ::munmap(state_base_, state_size_);
  if (fd_ >= 0) ::close(fd_);  // drops the shared lock
}

TETHER_HOT_PATH internal::PublisherEntry* Channel::publisher_entry(
    uint32_t i) const {
  return reinterpret_cast<PublisherEntry*>(base_ + publishers_offset_ +
                                           uint64_t{i} * sizeof(PublisherEntry));
}

internal::ReaderEntry* Channel::reader_entry(uint32_t i) const {
  return reinterpret_cast<ReaderEntry*>(state_base_ + readers_offset_ +
                                        uint64_t{i} * sizeof(ReaderEntry));
}

internal::SleeperEntry* Channel::sleeper_entry(uint32_t i) const {
  return reinterpret_cast<SleeperEntry*>(state_base_ + sleepers_offset_ +
                                         uint64_t{i} * sizeof(SleeperEntry));
}

std::atomic<uint32_t>* Channel::wake_word() const {
  static_assert(sizeof(SlotHeader) == kSlotHeaderBytes,
                "Channel::slot_header's stride");
  return &header_->wake_word;
}

uint32_t Channel::LoadWakeWord() const {
  return header_->wake_word.load(std::memory_order_acquire);
}

void Channel::WakeAll() {
  // A read-only mapping cannot bump the word: the wake alone makes waiters
  // look again (they re-check before sleeping).
  if (data_writable_) header_->wake_word.fetch_add(1, std::memory_order_seq_cst);
  FutexWake(&header_->wake_word);
}

bool Channel::ClaimIfFree(uint64_t slot, uint32_t owner) {
  SlotHeader* sh = slot_header(slot);
  uint64_t expected = internal::kFree;
  std::atomic<uint64_t>* pins = pin_word(slot);
  if (pins->load(std::memory_order_relaxed) != 0) return false;
  if (!sh->state.compare_exchange_strong(expected, internal::Owned(owner),
                                         std::memory_order_seq_cst)) {
    return false;
  }
  // Dekker with a reader pinning a stale view of this slot: state first,
  // then pins (both seq_cst). A pin seen here makes us hand it back.
  if (pins->load(std::memory_order_seq_cst) != 0) {
    sh->state.store(internal::kFree, std::memory_order_seq_cst);
    return false;
  }
  std::atomic_thread_fence(std::memory_order_release);  // see Publisher
  return true;
}

int64_t Channel::ClaimFreeSlot(uint32_t owner, uint64_t* hint, bool sweep) {
  const uint64_t n = params_.pool_size();
  bool cleared = false, swept = false;
  for (;;) {
    for (uint64_t i = 0; i < n; ++i) {
      uint64_t slot = (*hint + i) % n;
      if (ClaimIfFree(slot, owner)) {
        *hint = (slot + 1) % n;
        return static_cast<int64_t>(slot);
      }
    }
    if (!cleared) {
      cleared = true;
      if (ClearImpossiblePins()) continue;
    }
    if (!sweep || swept) break;
    swept = true;
    Sweep();
  }
  // Failure path (O(pool), no allocation): slots every publisher's sends
  // fail on for ever if their states were overwritten. Say so, once, as
  // corruption, rather than let it pass as a full pool (kNoLoan).
  for (uint64_t slot = 0; slot < n; ++slot) {
    const uint64_t state =
        slot_header(slot)->state.load(std::memory_order_relaxed);
    if (internal::NoStepLeavesASlotIn(state, params_.max_publishers)) {
      ReportCorruption(
          "no slot is free and a slot is in a state no send can leave it "
          "in: the slot headers are overwritten (slot, state)",
          slot, state);
      break;
    }
  }
  return -1;
}

}  // namespace tether::shm
