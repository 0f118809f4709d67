#include "shm/channel.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sys/statvfs.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <functional>
#include <new>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "shm/clock.h"
#include "shm/file_access.h"
#include "shm/futex.h"
#include "shm/layout.h"
#include "shm/mapping_guard.h"

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

constexpr std::string_view kTmpMarker = ".tmp.";
// Reader-state files are <escaped name>@readers.<16 hex digits of the
// nonce>: '@' never appears in an escaped channel name's own file.
constexpr char kStateMarker[] = "@readers.";

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
          msg, " (you are ", internal::DescribeSelf(), ")"));
    case ENOSPC:
    case ENOMEM:
      return absl::ResourceExhaustedError(
          absl::StrCat(msg, " (is /dev/shm full? see `df -h /dev/shm`)"));
    default:
      return absl::InternalError(msg);
  }
}

// The mode of an instance folder: the owner has everything; the group may
// enter (and list) when it may read either file, and create or remove
// files when it may write the data file (its publishers may create the
// channels they use); others may enter when they may read the data. The
// setgid bit makes files that members create inherit the folder's group.
// No sticky bit: inside an instance, any member who may write the folder
// may remove another member's leftovers (tether clean), which the sticky
// bit would forbid.
mode_t InstanceDirMode(mode_t mode, mode_t reader_mode, bool has_group) {
  const mode_t any = mode | reader_mode;
  mode_t d = 0700;
  if (any & 0040) d |= 0050;
  if (mode & 0020) d |= 0020;
  if (any & 0004) d |= 0005;
  if (has_group && (d & 0070) != 0) d |= S_ISGID;
  return d;
}

// mkdir -p. Folders above the instance that we create are made like
// /dev/shm itself (1777: every stack's user may add an instance, nobody may
// remove another's); the instance folder gets InstanceDirMode and the
// stack's group. The umask never narrows either (explicit chmod).
absl::Status MakeDirs(const std::string& dir, const ChannelOptions& options,
                      mode_t reader_mode, std::optional<gid_t> group) {
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    const std::string part = dir.substr(0, pos);
    const bool instance = pos == dir.size();
    const mode_t want = instance ? InstanceDirMode(options.mode, reader_mode,
                                                   group.has_value())
                                 : (S_ISVTX | 0777);
    if (::mkdir(part.c_str(), 0700) != 0) {
      if (errno == EEXIST) continue;
      return ErrnoStatus(errno, absl::StrCat("cannot create directory ", part));
    }
    if (instance && group.has_value() && ::chown(part.c_str(), -1, *group) != 0) {
      return ErrnoStatus(errno, absl::StrCat("cannot give ", part, " group ",
                                             *group));
    }
    if (::chmod(part.c_str(), want) != 0) {
      return ErrnoStatus(errno, absl::StrCat("cannot chmod ", part));
    }
  }
  // A folder anyone may write lets anyone replace channel files: refuse it.
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0) {
    return ErrnoStatus(errno, absl::StrCat("cannot stat ", dir));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(
        dir, " is not a folder (a symbolic link or a file): remove it, or "
             "choose another --root/--instance"));
  }
  if ((st.st_mode & S_IWOTH) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the instance folder ", dir, " (", internal::DescribeFile(dir),
        ") is writable by every user, so anyone could replace its channel "
        "files: chmod o-w ", dir));
  }
  return absl::OkStatus();
}

std::string DescribeParams(const QueueParams& p) {
  return absl::StrFormat(
      "{slot_size=%u, queue_depth=%u, max_publishers=%u, max_pinned=%u}",
      p.slot_size, p.queue_depth, p.max_publishers, p.max_pinned);
}

uint64_t NewNonce() {
  uint64_t n = 0;
  if (::getrandom(&n, sizeof(n), 0) != static_cast<ssize_t>(sizeof(n))) {
    n = MonotonicNs() ^ (uint64_t{static_cast<uint32_t>(::getpid())} << 32);
  }
  return n == 0 ? 1 : n;
}

std::string StatePath(const std::string& data_path, uint64_t nonce) {
  return absl::StrCat(data_path, kStateMarker, absl::Hex(nonce, absl::kZeroPad16));
}

// Lays out a fresh data file in a zeroed mapping.
void Initialise(std::byte* base, const QueueParams& p,
                std::span<const std::byte> metadata, uint64_t nonce) {
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
  h->nonce = nonce;
  h->state_file_size = StateLayout::For(p).total;
  h->tail.store(0, std::memory_order_relaxed);
  h->wake_word.store(0, std::memory_order_relaxed);
  if (!metadata.empty()) {
    std::memcpy(base + l.metadata, metadata.data(), metadata.size());
  }
  for (uint32_t i = 0; i < p.max_publishers; ++i) {
    new (base + l.publishers + i * sizeof(PublisherEntry)) PublisherEntry{};
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

// Lays out a fresh reader-state file in a zeroed mapping.
void InitialiseState(std::byte* base, const QueueParams& p, uint64_t nonce,
                     OwnerToken creator) {
  StateLayout l = StateLayout::For(p);
  auto* h = new (base) ReaderStateHeader{};
  h->magic = internal::kStateMagic;
  h->layout_version = internal::kLayoutVersion;
  h->header_size = sizeof(ReaderStateHeader);
  h->params_hash = internal::ParamsHash(p);
  h->nonce = nonce;
  h->file_size = l.total;
  h->creator = creator;
  h->sleeper_mask.store(0, std::memory_order_relaxed);
  h->anonymous_sleepers.store(0, std::memory_order_relaxed);
  for (uint32_t i = 0; i < p.max_pinned; ++i) {
    new (base + l.readers + i * sizeof(ReaderEntry)) ReaderEntry{};
  }
  for (uint32_t i = 0; i < internal::kMaxSleepers; ++i) {
    new (base + l.sleepers + i * sizeof(SleeperEntry)) SleeperEntry{};
  }
  auto* pins = reinterpret_cast<std::atomic<uint64_t>*>(base + l.pins);
  for (uint64_t s = 0; s < p.pool_size(); ++s) {
    new (&pins[s]) std::atomic<uint64_t>(0);
  }
  std::atomic_thread_fence(std::memory_order_release);
}

// A file of `size` bytes under a private name in `dir`, space reserved,
// laid out by `init` — the first half of race-free creation (the caller
// links it into place). Returns its private name and fd, or an error (and
// leaves nothing behind).
struct BuiltFile {
  std::string tmp;
  int fd = -1;
};
absl::StatusOr<BuiltFile> BuildFile(
    const std::string& dir, const std::string& escaped,
    const std::string& name, uint64_t size, mode_t mode,
    std::optional<gid_t> group,
    const std::function<void(std::byte*)>& init) {
  static std::atomic<uint32_t> counter{0};
  BuiltFile b;
  b.tmp = absl::StrCat(dir, "/.", escaped, std::string(kTmpMarker), ::getpid(),
                       ".", counter.fetch_add(1));
  b.fd = ::open(b.tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
                mode);
  if (b.fd < 0) {
    if (errno == EACCES || errno == EPERM) {
      return internal::AccessDenied(dir, absl::StrCat("channel ", name,
                                                      " (create it in ", dir, ")"),
                                    "write");
    }
    return ErrnoStatus(errno, absl::StrCat("cannot create channel ", b.tmp));
  }
  auto fail = [&](absl::Status s) -> absl::StatusOr<BuiltFile> {
    ::close(b.fd);
    ::unlink(b.tmp.c_str());
    return s;
  };
  // The umask must not narrow the mode the stack asked for.
  if (::fchmod(b.fd, mode) != 0) {
    return fail(ErrnoStatus(errno, absl::StrCat("cannot chmod ", b.tmp)));
  }
  if (group.has_value() && ::fchown(b.fd, -1, *group) != 0) {
    return fail(ErrnoStatus(
        errno, absl::StrCat("cannot give ", b.tmp, " group ", *group,
                            " (a process may give its files only groups it "
                            "is in, unless it is root)")));
  }
  if (::ftruncate(b.fd, size) != 0) {
    if (errno == EFBIG || errno == ENOSPC) {
      return fail(NoSpaceStatus(name, dir, size));
    }
    return fail(ErrnoStatus(errno, absl::StrCat("cannot size channel ", name,
                                                " to ", size, " bytes")));
  }
  // Reserve every page now, before the file is linked into place: a full
  // filesystem fails here, with a message, never as a SIGBUS at a later
  // page fault in a running node.
  if (int err = ::posix_fallocate(b.fd, 0, static_cast<off_t>(size)); err != 0) {
    if (err == ENOSPC || err == EFBIG || err == ENOMEM) {
      return fail(NoSpaceStatus(name, dir, size));
    }
    if (err != EOPNOTSUPP && err != EINVAL) {
      return fail(ErrnoStatus(err, absl::StrCat("cannot reserve ", size,
                                                " bytes for channel ", name)));
    }
    // A filesystem that cannot reserve (rare for shm roots): go on sparse.
  }
  void* m = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, b.fd, 0);
  if (m == MAP_FAILED) {
    return fail(ErrnoStatus(errno, absl::StrCat("cannot map ", b.tmp)));
  }
  init(static_cast<std::byte*>(m));
  ::munmap(m, size);
  return b;
}

// The nonce of reader-state file name `f` of escaped channel `escaped`, or
// nullopt if `f` is not one.
std::optional<uint64_t> StateNonce(std::string_view f, std::string_view escaped) {
  const std::string prefix = absl::StrCat(std::string(escaped), kStateMarker);
  if (f.size() != prefix.size() + 16 || f.substr(0, prefix.size()) != prefix) {
    return std::nullopt;
  }
  uint64_t n = 0;
  for (char c : f.substr(prefix.size())) {
    const int v = (c >= '0' && c <= '9') ? c - '0'
                  : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                                           : -1;
    if (v < 0) return std::nullopt;
    n = n << 4 | static_cast<uint64_t>(v);
  }
  return n;
}

// Removes the reader-state files of channel `escaped` in `dir` other than
// `keep`'s, when `only_dead_creators`, only those whose creator died (left
// between a creator's two links). Best effort.
void RemoveStateFiles(const std::string& dir, const std::string& escaped,
                      std::optional<uint64_t> keep, bool only_dead_creators) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  std::vector<std::string> doomed;
  while (dirent* e = ::readdir(d)) {
    const std::optional<uint64_t> nonce = StateNonce(e->d_name, escaped);
    if (!nonce.has_value() || nonce == keep) continue;
    const std::string path = absl::StrCat(dir, "/", e->d_name);
    if (only_dead_creators) {
      const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
      if (fd < 0) continue;
      ReaderStateHeader h;
      const bool read = ::pread(fd, &h, sizeof(h), 0) ==
                        static_cast<ssize_t>(sizeof(h));
      ::close(fd);
      if (read && h.magic == internal::kStateMagic && TokenAlive(h.creator)) {
        continue;  // a creator still between its two links, or still using it
      }
    }
    doomed.push_back(path);
  }
  ::closedir(d);
  for (const std::string& path : doomed) ::unlink(path.c_str());
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
  const mode_t reader_mode =
      options.reader_mode.value_or(options.mode | ((options.mode & 0040) >> 1));
  const std::optional<gid_t> reader_group =
      options.reader_group.has_value() ? options.reader_group : options.group;
  const std::string dir = absl::StrCat(options.root, "/", options.instance);
  const std::string path = PathFor(options, name);
  const std::string escaped = Escape(name);
  for (int attempt = 0; attempt < 3; ++attempt) {
    absl::StatusOr<internal::OpenedFile> existing =
        internal::OpenBestAccess(path, absl::StrCat("channel ", name_str));
    if (existing.ok()) {
      return Map(options, name_str, path, existing->fd, existing->writable,
                 params, metadata);
    }
    if (existing.status().code() != absl::StatusCode::kNotFound) {
      return existing.status();
    }
    if (absl::Status s = MakeDirs(dir, options, reader_mode, options.group);
        !s.ok()) {
      return s;
    }
    // Refuse up front what cannot fit: reserving it page by page would fill
    // the filesystem (and RAM, on tmpfs) before failing.
    const uint64_t data_size = Layout::For(params, metadata.size()).total;
    const uint64_t state_size = StateLayout::For(params).total;
    struct statvfs fs;
    if (::statvfs(dir.c_str(), &fs) == 0 &&
        data_size + state_size > uint64_t{fs.f_bavail} * fs.f_frsize) {
      return NoSpaceStatus(name_str, dir, data_size + state_size);
    }
    const uint64_t nonce = NewNonce();
    const OwnerToken creator = CurrentProcessToken();
    absl::StatusOr<BuiltFile> state = BuildFile(
        dir, escaped, name_str, state_size, reader_mode, reader_group,
        [&](std::byte* m) { InitialiseState(m, params, nonce, creator); });
    if (!state.ok()) return state.status();
    absl::StatusOr<BuiltFile> data = BuildFile(
        dir, escaped, name_str, data_size, options.mode, options.group,
        [&](std::byte* m) { Initialise(m, params, metadata, nonce); });
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
      return ErrnoStatus(state_errno, absl::StrCat("cannot publish ", state_path));
    }
    const int linked = ::link(data->tmp.c_str(), path.c_str());
    const int link_errno = errno;
    ::unlink(data->tmp.c_str());
    if (linked == 0) {
      // What creators that died between their two links left behind.
      RemoveStateFiles(dir, escaped, nonce, /*only_dead_creators=*/true);
      return Map(options, name_str, path, data->fd, /*writable=*/true, params,
                 metadata);
    }
    ::close(data->fd);
    ::unlink(state_path.c_str());  // ours, and nobody's now
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
  return Map(options, name_str, path, f->fd, f->writable, std::nullopt, {});
}

absl::Status Channel::Remove(const ChannelOptions& options,
                             std::string_view name) {
  const std::string path = PathFor(options, name);
  if (::unlink(path.c_str()) != 0) {
    return ErrnoStatus(errno, absl::StrCat("cannot remove channel ", path));
  }
  // Every reader-state file of the name: the channel's and any a creator
  // left when it died.
  RemoveStateFiles(absl::StrCat(options.root, "/", options.instance),
                   Escape(name), std::nullopt, /*only_dead_creators=*/false);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> Channel::List(
    const ChannelOptions& options) {
  std::string dir = absl::StrCat(options.root, "/", options.instance);
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return names;
    if (errno == EACCES) {
      return internal::AccessDenied(dir, absl::StrCat("the channels in ", dir),
                                    "list");
    }
    return ErrnoStatus(errno, absl::StrCat("cannot list ", dir));
  }
  while (dirent* e = ::readdir(d)) {
    std::string_view f = e->d_name;
    if (f.empty() || f[0] == '.') continue;  // ".", "..", creators' tmp files
    if (f.find(kStateMarker) != std::string_view::npos) continue;
    names.push_back(Unescape(f));
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

std::string Channel::GuestReason() const {
  if (state_writable_) return "";
  return absl::StrCat(
      "you (", internal::DescribeSelf(), ") can read ", path_,
      " but not write its reader state ", state_path_, " (",
      internal::DescribeFile(state_path_),
      "), so this process reads as a guest: unpinned copies checked after "
      "copying, and a bounded poll of the wake word instead of a wakeup; to "
      "read in place, pinned and woken: ",
      internal::AccessFix(state_path_, "write"));
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
  StateLayout sl = StateLayout::For(found);
  if (h.file_size != l.total || file_size != l.total ||
      h.state_file_size != sl.total) {
    close_fd();
    return absl::DataLossError(absl::StrCat(
        "channel ", path, " is ", file_size, " bytes but its params need ",
        l.total, ": the file is truncated or corrupt"));
  }
  // The reader-state file its nonce names, checked the same way.
  const std::string state_path = StatePath(path, h.nonce);
  absl::StatusOr<internal::OpenedFile> state = internal::OpenBestAccess(
      state_path, absl::StrCat("the reader state of channel ", name));
  if (!state.ok()) {
    close_fd();
    if (state.status().code() == absl::StatusCode::kNotFound) {
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
  internal::ReaderStateHeader sh;
  if (::fstat(sfd, &st) != 0 ||
      ::pread(sfd, &sh, sizeof(sh), 0) != static_cast<ssize_t>(sizeof(sh)) ||
      sh.magic != internal::kStateMagic ||
      sh.layout_version != internal::kLayoutVersion ||
      sh.header_size != sizeof(internal::ReaderStateHeader) ||
      sh.params_hash != h.params_hash || sh.nonce != h.nonce ||
      sh.file_size != sl.total || static_cast<uint64_t>(st.st_size) != sl.total) {
    close_both();
    return absl::DataLossError(absl::StrCat(
        "the reader-state file ", state_path, " of channel ", name,
        " is not the one its data file was made with (header, size or nonce "
        "differ): remove the channel (tether clean, or rm ", path,
        ") and restart the stack's nodes on it"));
  }
  int flags = MAP_SHARED | (options.prefault ? MAP_POPULATE : 0);
  void* m = ::mmap(nullptr, l.total, PROT_READ | (writable ? PROT_WRITE : 0),
                   flags, fd, 0);
  int map_errno = errno;
  if (m == MAP_FAILED) {
    close_both();
    return ErrnoStatus(map_errno, absl::StrCat("cannot map ", path));
  }
  void* sm = ::mmap(nullptr, sl.total,
                    PROT_READ | (state->writable ? PROT_WRITE : 0), flags, sfd,
                    0);
  map_errno = errno;
  ::close(sfd);  // the mapping keeps the file
  if (sm == MAP_FAILED) {
    ::munmap(m, l.total);
    close_fd();
    return ErrnoStatus(map_errno, absl::StrCat("cannot map ", state_path));
  }
  // A shared lock for as long as the channel is mapped: a tool can tell a
  // channel nobody uses (InUse) from one a process has open, whatever its
  // registries say.
  (void)::flock(fd, LOCK_SH | LOCK_NB);
  std::unique_ptr<Channel> c(new Channel());
  c->fd_ = fd;
  c->data_writable_ = writable;
  c->guard_ = internal::RegisterMapping(m, l.total);
  c->state_guard_ = internal::RegisterMapping(sm, sl.total);
  c->name_ = std::move(name);
  c->path_ = std::move(path);
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
    return absl::FailedPreconditionError(absl::StrCat(
        "channel ", c->name_, " exists with different metadata (",
        c->metadata_.size(), " bytes vs ", expected_metadata.size(),
        " expected): another process created it with another type or "
        "schema; remove ", c->path_, " or fix the config"));
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

absl::StatusOr<bool> Channel::InUse(const ChannelOptions& options,
                                    std::string_view name) {
  const std::string path = PathFor(options, name);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    return ErrnoStatus(errno, absl::StrCat("cannot open ", path));
  }
  const bool busy = ::flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);
  return busy;
}

uint64_t Channel::FileSizeFor(const QueueParams& params,
                              uint32_t metadata_size) {
  return Layout::For(params, metadata_size).total +
         StateLayout::For(params).total;
}


internal::PublisherEntry* Channel::publisher_entry(uint32_t i) const {
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

std::atomic<uint64_t>* Channel::ring_entry(uint64_t queue_index) const {
  return reinterpret_cast<std::atomic<uint64_t>*>(base_ + ring_offset_) +
         (queue_index & ring_mask_);
}

internal::SlotHeader* Channel::slot_header(uint64_t slot) const {
  return reinterpret_cast<SlotHeader*>(base_ + slot_headers_offset_ +
                                       slot * sizeof(SlotHeader));
}

std::atomic<uint64_t>* Channel::pin_word(uint64_t slot) const {
  return reinterpret_cast<std::atomic<uint64_t>*>(state_base_ + pins_offset_) +
         slot;
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
  // A read-only mapping cannot bump the word: the wake alone makes waiters
  // look again (they re-check before sleeping).
  if (data_writable_) header_->wake_word.fetch_add(1, std::memory_order_seq_cst);
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
                   state_header_->sleeper_mask.load(std::memory_order_relaxed))) +
               state_header_->anonymous_sleepers.load(std::memory_order_relaxed);
  s.file_size = size_ + state_size_;
  return s;
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
