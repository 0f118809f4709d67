#include "shm/channel.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sys/statvfs.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <new>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "shm/clock.h"
#include "shm/futex.h"
#include "shm/layout.h"
#include "shm/mapping_guard.h"

namespace tether::shm {
namespace {

using internal::ChannelHeader;
using internal::Layout;
using internal::PublisherEntry;
using internal::ReaderEntry;
using internal::SleeperEntry;
using internal::SlotHeader;

constexpr std::string_view kTmpMarker = ".tmp.";

std::string HumanBytes(uint64_t n) {
  if (n >= (uint64_t{1} << 30)) return absl::StrFormat("%.1f GiB", n / 1073741824.0);
  if (n >= (uint64_t{1} << 20)) return absl::StrFormat("%.1f MiB", n / 1048576.0);
  if (n >= (uint64_t{1} << 10)) return absl::StrFormat("%.1f KiB", n / 1024.0);
  return absl::StrFormat("%u B", n);
}

absl::Status NoSpaceStatus(const std::string& name, const std::string& dir,
                           uint64_t bytes) {
  return NoSpaceError(absl::StrCat("channel ", name, " needs"), dir, bytes);
}

std::string Escape(std::string_view name) {
  std::string out;
  for (char c : name) {
    if (c == '/') {
      out += "%2F";
    } else if (c == '%') {
      out += "%25";
    } else {
      out += c;
    }
  }
  return out;
}

std::string Unescape(std::string_view file) {
  std::string out;
  for (size_t i = 0; i < file.size(); ++i) {
    if (file.substr(i, 3) == "%2F") {
      out += '/';
      i += 2;
    } else if (file.substr(i, 3) == "%25") {
      out += '%';
      i += 2;
    } else {
      out += file[i];
    }
  }
  return out;
}

absl::Status ErrnoStatus(int err, const std::string& what) {
  std::string msg = absl::StrCat(what, ": ", std::strerror(err));
  switch (err) {
    case ENOENT:
      return absl::NotFoundError(msg);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(absl::StrCat(
          msg, " (check the file's mode and group, or run as its owner)"));
    case ENOSPC:
    case ENOMEM:
      return absl::ResourceExhaustedError(
          absl::StrCat(msg, " (is /dev/shm full? see `df -h /dev/shm`)"));
    default:
      return absl::InternalError(msg);
  }
}

absl::Status MakeDirs(const std::string& dir, mode_t mode) {
  // mkdir -p; directories get the x bits wherever the file mode has r bits.
  mode_t dir_mode = mode | ((mode & 0444) >> 2) | 0700;
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos == dir.size() || dir[pos] == '/') {
      std::string part = dir.substr(0, pos);
      if (::mkdir(part.c_str(), dir_mode) != 0 && errno != EEXIST) {
        return ErrnoStatus(errno, absl::StrCat("cannot create directory ", part));
      }
    }
  }
  return absl::OkStatus();
}

std::string DescribeParams(const QueueParams& p) {
  return absl::StrFormat(
      "{slot_size=%u, queue_depth=%u, max_publishers=%u, max_pinned=%u}",
      p.slot_size, p.queue_depth, p.max_publishers, p.max_pinned);
}

// Lays out a fresh channel in a zeroed mapping.
void Initialise(std::byte* base, const QueueParams& p,
                std::span<const std::byte> metadata) {
  Layout l = Layout::For(p, metadata.size());
  auto* h = new (base) ChannelHeader{};
  h->magic = internal::kMagic;
  h->layout_version = internal::kLayoutVersion;
  h->header_size = sizeof(ChannelHeader);
  h->params_hash = internal::ParamsHash(p);
  h->slot_size = p.slot_size;
  h->queue_depth = p.queue_depth;
  h->max_publishers = p.max_publishers;
  h->max_pinned = p.max_pinned;
  h->file_size = l.total;
  h->metadata_size = metadata.size();
  h->creator_pid = ::getpid();
  h->created_realtime_ns = RealtimeNs();
  h->tail.store(0, std::memory_order_relaxed);
  h->wake_word.store(0, std::memory_order_relaxed);
  h->sleeper_mask.store(0, std::memory_order_relaxed);
  h->anonymous_sleepers.store(0, std::memory_order_relaxed);
  if (!metadata.empty()) {
    std::memcpy(base + l.metadata, metadata.data(), metadata.size());
  }
  for (uint32_t i = 0; i < p.max_publishers; ++i) {
    new (base + l.publishers + i * sizeof(PublisherEntry)) PublisherEntry{};
  }
  for (uint32_t i = 0; i < p.max_pinned; ++i) {
    new (base + l.readers + i * sizeof(ReaderEntry)) ReaderEntry{};
  }
  for (uint32_t i = 0; i < internal::kMaxSleepers; ++i) {
    new (base + l.sleepers + i * sizeof(SleeperEntry)) SleeperEntry{};
  }
  auto* ring = reinterpret_cast<std::atomic<uint64_t>*>(base + l.ring);
  for (uint32_t i = 0; i < p.queue_depth; ++i) {
    // Ring position i starts as "message i - D" in slot i (never readable).
    new (&ring[i]) std::atomic<uint64_t>(internal::MakeEntry(
        uint64_t{i} - p.queue_depth, i));
  }
  for (uint64_t s = 0; s < p.pool_size(); ++s) {
    auto* sh = new (base + l.slot_headers + s * sizeof(SlotHeader)) SlotHeader{};
    sh->state.store(s < p.queue_depth ? internal::kEmpty : internal::kFree,
                    std::memory_order_relaxed);
  }
  // The link() that publishes the file orders these stores for openers
  // (they map it afterwards); a release fence documents the intent.
  std::atomic_thread_fence(std::memory_order_release);
}

}  // namespace

absl::Status NoSpaceError(std::string_view what_needs, const std::string& dir,
                          uint64_t bytes) {
  struct statvfs fs;
  std::string free_text = "an unknown amount";
  std::string size_text;
  if (::statvfs(dir.c_str(), &fs) == 0) {
    free_text = HumanBytes(uint64_t{fs.f_bavail} * fs.f_frsize);
    size_text = absl::StrCat(" of ", HumanBytes(uint64_t{fs.f_blocks} * fs.f_frsize));
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      std::string(what_needs), " ", HumanBytes(bytes), " (", bytes,
      " bytes) of shared memory in ", dir, " but only ", free_text, size_text,
      " is free there: free space (tether clean, remove old instances), shrink "
      "the channels (maxSize x queueDepth), or give the filesystem more room "
      "(mount -o remount,size=2G /dev/shm; Docker: docker run --shm-size=2g)"));
}

std::string Channel::PathFor(const ChannelOptions& options,
                             std::string_view name) {
  return absl::StrCat(options.root, "/", options.instance, "/", Escape(name));
}

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
  std::string dir = absl::StrCat(options.root, "/", options.instance);
  std::string path = PathFor(options, name);
  for (int attempt = 0; attempt < 3; ++attempt) {
    int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd >= 0) {
      return Map(options, std::string(name), path, fd, params, metadata);
    }
    if (errno != ENOENT) {
      return ErrnoStatus(errno, absl::StrCat("cannot open channel ", path));
    }
    if (absl::Status s = MakeDirs(dir, options.mode); !s.ok()) return s;
    // Refuse up front what cannot fit: reserving it page by page would fill
    // the filesystem (and RAM, on tmpfs) before failing.
    const uint64_t needed = Layout::For(params, metadata.size()).total;
    struct statvfs fs;
    if (::statvfs(dir.c_str(), &fs) == 0 &&
        needed > uint64_t{fs.f_bavail} * fs.f_frsize) {
      return NoSpaceStatus(name_str, dir, needed);
    }
    // Build under a private name, then link into place: the link is the
    // atomic "initialised" step, so exactly one creator wins.
    static std::atomic<uint32_t> counter{0};
    std::string tmp = absl::StrCat(dir, "/.", Escape(name), std::string(kTmpMarker),
                                   ::getpid(), ".", counter.fetch_add(1));
    int tfd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC,
                     options.mode);
    if (tfd < 0) {
      return ErrnoStatus(errno, absl::StrCat("cannot create channel ", tmp));
    }
    auto fail = [&](absl::Status s) {
      ::close(tfd);
      ::unlink(tmp.c_str());
      return s;
    };
    // The umask must not narrow the mode the stack asked for.
    if (::fchmod(tfd, options.mode) != 0) {
      return fail(ErrnoStatus(errno, absl::StrCat("cannot chmod ", tmp)));
    }
    if (options.group.has_value() && ::fchown(tfd, -1, *options.group) != 0) {
      return fail(ErrnoStatus(
          errno, absl::StrCat("cannot give ", tmp, " group ", *options.group)));
    }
    Layout l = Layout::For(params, metadata.size());
    if (::ftruncate(tfd, l.total) != 0) {
      if (errno == EFBIG || errno == ENOSPC) {
        return fail(NoSpaceStatus(name_str, dir, l.total));
      }
      return fail(ErrnoStatus(
          errno, absl::StrCat("cannot size channel ", name_str, " to ", l.total,
                              " bytes")));
    }
    // Reserve every page now, before the file is linked into place: a full
    // filesystem fails here, with a message, never as a SIGBUS at a later
    // page fault in a running node.
    if (int err = ::posix_fallocate(tfd, 0, static_cast<off_t>(l.total));
        err != 0) {
      if (err == ENOSPC || err == EFBIG || err == ENOMEM) {
        return fail(NoSpaceStatus(name_str, dir, l.total));
      }
      if (err != EOPNOTSUPP && err != EINVAL) {
        return fail(ErrnoStatus(err, absl::StrCat("cannot reserve ", l.total,
                                                  " bytes for channel ",
                                                  name_str)));
      }
      // A filesystem that cannot reserve (rare for shm roots): go on sparse.
    }
    void* m = ::mmap(nullptr, l.total, PROT_READ | PROT_WRITE, MAP_SHARED,
                     tfd, 0);
    if (m == MAP_FAILED) {
      return fail(ErrnoStatus(errno, absl::StrCat("cannot map ", tmp)));
    }
    Initialise(static_cast<std::byte*>(m), params, metadata);
    ::munmap(m, l.total);
    int linked = ::link(tmp.c_str(), path.c_str());
    int link_errno = errno;
    ::unlink(tmp.c_str());
    if (linked != 0 && link_errno != EEXIST) {
      ::close(tfd);
      return ErrnoStatus(link_errno, absl::StrCat("cannot publish ", path));
    }
    if (linked == 0) {
      return Map(options, std::string(name), path, tfd, params, metadata);
    }
    ::close(tfd);  // lost the race: open the winner's file
  }
  return absl::AbortedError(absl::StrCat(
      "channel ", path, " kept appearing and disappearing while opening it"));
}

absl::StatusOr<std::unique_ptr<Channel>> Channel::Open(
    const ChannelOptions& options, std::string_view name) {
  std::string path = PathFor(options, name);
  const std::string name_str(name);
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) {
      return absl::NotFoundError(absl::StrCat(
          "channel ", name_str, " does not exist (no file ", path,
          "): is the stack running, and with the same root and instance?"));
    }
    return ErrnoStatus(errno, absl::StrCat("cannot open channel ", path));
  }
  return Map(options, std::string(name), path, fd, std::nullopt, {});
}

absl::Status Channel::Remove(const ChannelOptions& options,
                             std::string_view name) {
  std::string path = PathFor(options, name);
  if (::unlink(path.c_str()) != 0) {
    return ErrnoStatus(errno, absl::StrCat("cannot remove channel ", path));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> Channel::List(
    const ChannelOptions& options) {
  std::string dir = absl::StrCat(options.root, "/", options.instance);
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return names;
    return ErrnoStatus(errno, absl::StrCat("cannot list ", dir));
  }
  while (dirent* e = ::readdir(d)) {
    std::string_view f = e->d_name;
    if (f.empty() || f[0] == '.') continue;  // ".", "..", creators' tmp files
    names.push_back(Unescape(f));
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

absl::StatusOr<std::unique_ptr<Channel>> Channel::Map(
    const ChannelOptions& options, std::string name, std::string path, int fd,
    const std::optional<QueueParams>& expected,
    std::span<const std::byte> expected_metadata) {
  auto close_fd = [fd] { ::close(fd); };
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    close_fd();
    return ErrnoStatus(errno, absl::StrCat("cannot stat ", path));
  }
  uint64_t file_size = st.st_size;
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
        ": restart the stack with one tether version (or remove ", path, ")"));
  }
  QueueParams found{h.slot_size, h.queue_depth, h.max_publishers,
                    h.max_pinned};
  if (absl::Status s = Validate(found); !s.ok()) {
    close_fd();
    return absl::DataLossError(
        absl::StrCat("channel ", path, " has corrupt params: ", s.message()));
  }
  if (h.params_hash != internal::ParamsHash(found) ||
      h.metadata_size > internal::kMaxMetadataSize) {
    close_fd();
    return absl::DataLossError(absl::StrCat(
        "channel ", path, " header is corrupt (params hash or metadata size)"));
  }
  if (expected.has_value() && !(found == *expected)) {
    close_fd();
    return absl::FailedPreconditionError(absl::StrCat(
        "channel ", name, " exists with params ", DescribeParams(found),
        " but this process expects ", DescribeParams(*expected),
        ": make every process use the same config, or remove ", path));
  }
  Layout l = Layout::For(found, h.metadata_size);
  if (h.file_size != l.total || file_size != l.total) {
    close_fd();
    return absl::DataLossError(absl::StrCat(
        "channel ", path, " is ", file_size, " bytes but its params need ",
        l.total, ": the file is truncated or corrupt"));
  }
  int flags = MAP_SHARED | (options.prefault ? MAP_POPULATE : 0);
  void* m = ::mmap(nullptr, l.total, PROT_READ | PROT_WRITE, flags, fd, 0);
  int map_errno = errno;
  if (m == MAP_FAILED) {
    close_fd();
    return ErrnoStatus(map_errno, absl::StrCat("cannot map ", path));
  }
  // A shared lock for as long as the channel is mapped: a tool can tell a
  // channel nobody uses (InUse) from one a process has open, whatever its
  // registries say.
  (void)::flock(fd, LOCK_SH | LOCK_NB);
  std::unique_ptr<Channel> c(new Channel());
  c->fd_ = fd;
  c->guard_ = internal::RegisterMapping(m, l.total);
  c->name_ = std::move(name);
  c->path_ = std::move(path);
  c->params_ = found;
  c->base_ = static_cast<std::byte*>(m);
  c->size_ = l.total;
  c->header_ = reinterpret_cast<ChannelHeader*>(m);
  c->metadata_ = std::span<const std::byte>(c->base_ + l.metadata,
                                            h.metadata_size);
  c->publishers_offset_ = l.publishers;
  c->readers_offset_ = l.readers;
  c->sleepers_offset_ = l.sleepers;
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
    return absl::FailedPreconditionError(absl::StrCat(
        "channel ", c->name_, " exists with different metadata (",
        c->metadata_.size(), " bytes vs ", expected_metadata.size(),
        " expected): another process created it with another type or "
        "schema; remove ", c->path_, " or fix the config"));
  }
  if (options.lock_memory && ::mlock(m, l.total) != 0) {
    return ErrnoStatus(errno, absl::StrCat(
        "cannot mlock channel ", c->name_, " (", l.total,
        " bytes): raise RLIMIT_MEMLOCK in /etc/security/limits.conf or "
        "grant CAP_IPC_LOCK"));
  }
  // A corrupt channel opens (tools must be able to report it), but the
  // handle is corrupt from the start and says why, and it is not swept.
  if (c->CheckConsistency().ok()) c->Sweep();
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
  if (base_ != nullptr) ::munmap(base_, size_);
  if (fd_ >= 0) ::close(fd_);  // drops the shared lock
}

absl::StatusOr<bool> Channel::InUse(const ChannelOptions& options,
                                    std::string_view name) {
  const std::string path = PathFor(options, name);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return ErrnoStatus(errno, absl::StrCat("cannot open ", path));
  }
  const bool busy = ::flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);
  return busy;
}

uint64_t Channel::FileSizeFor(const QueueParams& params,
                              uint32_t metadata_size) {
  return Layout::For(params, metadata_size).total;
}


internal::PublisherEntry* Channel::publisher_entry(uint32_t i) const {
  return reinterpret_cast<PublisherEntry*>(base_ + publishers_offset_ +
                                           uint64_t{i} * sizeof(PublisherEntry));
}

internal::ReaderEntry* Channel::reader_entry(uint32_t i) const {
  return reinterpret_cast<ReaderEntry*>(base_ + readers_offset_ +
                                        uint64_t{i} * sizeof(ReaderEntry));
}

internal::SleeperEntry* Channel::sleeper_entry(uint32_t i) const {
  return reinterpret_cast<SleeperEntry*>(base_ + sleepers_offset_ +
                                         uint64_t{i} * sizeof(SleeperEntry));
}

std::atomic<uint64_t>* Channel::ring_entry(uint64_t queue_index) const {
  return reinterpret_cast<std::atomic<uint64_t>*>(base_ + ring_offset_) +
         (queue_index & ring_mask_);
}

internal::SlotHeader* Channel::slot_header(uint64_t slot) const {
  return reinterpret_cast<SlotHeader*>(base_ + slot_headers_offset_ +
                                       slot * sizeof(SlotHeader));
}

std::byte* Channel::payload(uint64_t slot) const {
  return base_ + payloads_offset_ + slot * payload_stride_;
}

std::atomic<uint32_t>* Channel::wake_word() const {
  return &header_->wake_word;
}

uint32_t Channel::LoadWakeWord() const {
  return header_->wake_word.load(std::memory_order_acquire);
}


void Channel::WakeAll() {
  header_->wake_word.fetch_add(1, std::memory_order_seq_cst);
  FutexWake(&header_->wake_word);
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
                   header_->sleeper_mask.load(std::memory_order_relaxed))) +
               header_->anonymous_sleepers.load(std::memory_order_relaxed);
  s.file_size = size_;
  return s;
}

bool Channel::ClaimIfFree(uint64_t slot, uint32_t owner) {
  SlotHeader* sh = slot_header(slot);
  uint64_t expected = internal::kFree;
  if (sh->pinned_by.load(std::memory_order_relaxed) != 0) return false;
  if (!sh->state.compare_exchange_strong(expected, internal::Owned(owner),
                                         std::memory_order_seq_cst)) {
    return false;
  }
  // Dekker with a reader pinning a stale view of this slot: state first,
  // then pins (both seq_cst). A pin seen here makes us hand it back.
  if (sh->pinned_by.load(std::memory_order_seq_cst) != 0) {
    sh->state.store(internal::kFree, std::memory_order_seq_cst);
    return false;
  }
  std::atomic_thread_fence(std::memory_order_release);  // see Publisher
  return true;
}

int64_t Channel::ClaimFreeSlot(uint32_t owner, uint64_t* hint, bool sweep) {
  const uint64_t n = params_.pool_size();
  for (int round = 0; round < 2; ++round) {
    for (uint64_t i = 0; i < n; ++i) {
      uint64_t slot = (*hint + i) % n;
      if (ClaimIfFree(slot, owner)) {
        *hint = (slot + 1) % n;
        return static_cast<int64_t>(slot);
      }
    }
    if (!sweep) break;
    if (round == 0) Sweep();
  }
  return -1;
}

}  // namespace tether::shm
