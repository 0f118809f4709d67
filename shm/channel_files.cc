#include "shm/channel_files.h"

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
#include "shm/mounts.h"

namespace tether::shm {
namespace internal {

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

absl::Status NoRoomForAFile(const std::string& name, const std::string& dir) {
  // Space is checked before any file is made: a file that cannot be made
  // at all is a filesystem out of inodes (tmpfs nr_inodes), or one that
  // filled since.
  struct statvfs fs;
  if (::statvfs(dir.c_str(), &fs) == 0 && fs.f_files > 0 && fs.f_favail == 0) {
    std::string grow = "allow it more files";
    if (std::optional<MountFacts> m = MountOf(dir); m && m->fstype == "tmpfs") {
      grow = absl::StrCat("mount -o remount,nr_inodes=", 4 * fs.f_files, " ",
                          m->point);
    }
    return absl::ResourceExhaustedError(absl::StrCat(
        "cannot create channel ", name, " in ", dir,
        ": its filesystem has no free inodes (all ", fs.f_files,
        " files in use; see `df -i ", dir, "`): remove old instances "
        "(tether clean), or ", grow));
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "cannot create channel ", name, " in ", dir,
      ": no space left on its filesystem (see `df -h ", dir, "` and `df -i ",
      dir, "`): remove old instances (tether clean), or give it more room"));
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
      // The root need not be /dev/shm, and a tmpfs runs out of inodes
      // (nr_inodes) as well as of bytes: `what` names the file.
      return absl::ResourceExhaustedError(absl::StrCat(
          msg, " (its filesystem is out of space or of inodes: see `df -h` "
               "and `df -i` on its folder; remove stale stacks with `tether "
               "clean`, or give the tmpfs more size or nr_inodes)"));
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

// mkdir -p of options.root/options.instance (Channel::MakeInstanceFolder
// says what each folder gets). Appends the folders it made to `made`,
// outermost first; on an error removes them again (and leaves `made` as it
// was).
absl::Status MakeDirs(const ChannelOptions& options,
                      std::vector<std::string>* made) {
  const std::string dir = absl::StrCat(options.root, "/", options.instance);
  const size_t made_before = made->size();
  auto fail = [&](absl::Status s) {
    while (made->size() > made_before) {
      ::rmdir(made->back().c_str());
      made->pop_back();
    }
    return s;
  };
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    const std::string part = dir.substr(0, pos);
    const bool instance = pos == dir.size();
    const mode_t want =
        instance ? InstanceDirMode(options.mode,
                                   Channel::ReaderModeFor(options),
                                   options.group.has_value())
                 : (S_ISVTX | 0777);
    if (::mkdir(part.c_str(), 0700) != 0) {
      if (errno == EEXIST) continue;
      if (errno == EACCES || errno == EPERM) {
        const std::string parent = part.substr(0, part.rfind('/'));
        return fail(internal::AccessDenied(
            parent.empty() ? "/" : parent,
            absl::StrCat("the folder ", part, " (create it in ",
                         parent.empty() ? "/" : parent, ")"),
            "write"));
      }
      return fail(
          ErrnoStatus(errno, absl::StrCat("cannot create directory ", part)));
    }
    made->push_back(part);
    if (instance && options.group.has_value() &&
        ::chown(part.c_str(), -1, *options.group) != 0) {
      return fail(ErrnoStatus(
          errno, absl::StrCat("cannot give ", part, " group ", *options.group,
                              " (a process may give its folders only groups "
                              "it is in, unless it is root)")));
    }
    if (::chmod(part.c_str(), want) != 0) {
      return fail(ErrnoStatus(errno, absl::StrCat("cannot chmod ", part)));
    }
  }
  // A folder anyone may write lets anyone replace channel files: refuse it.
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0) {
    return fail(ErrnoStatus(errno, absl::StrCat("cannot stat ", dir)));
  }
  if (!S_ISDIR(st.st_mode)) {
    return fail(absl::FailedPreconditionError(absl::StrCat(
        dir, " is not a folder (a symbolic link or a file): remove it, or "
             "choose another --root/--instance")));
  }
  if ((st.st_mode & S_IWOTH) != 0) {
    return fail(absl::FailedPreconditionError(absl::StrCat(
        "the instance folder ", dir, " (", internal::DescribeFile(dir),
        ") is writable by every user, so anyone could replace its channel "
        "files: chmod o-w ", dir)));
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
absl::StatusOr<BuiltFile> BuildFile(
    const std::string& dir, const std::string& escaped,
    const std::string& name, uint64_t size, mode_t mode,
    std::optional<gid_t> group, bool huge,
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
    const int err = errno;
    if (err == ENOSPC) return NoRoomForAFile(name, dir);
    return ErrnoStatus(err, absl::StrCat("cannot create channel ", b.tmp));
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
  void* m = MapFile(b.fd, size, PROT_READ | PROT_WRITE, MAP_SHARED);
  if (m == MAP_FAILED) {
    return fail(ErrnoStatus(errno, absl::StrCat("cannot map ", b.tmp)));
  }
  init(static_cast<std::byte*>(m));
  // Before the file is linked into place: nobody maps it yet. A refusal
  // leaves 4 KiB pages (tether doctor says whether this kernel collapses).
  if (huge) (void)CollapseToHugePages(static_cast<std::byte*>(m), size);
  ::munmap(m, size);
  return b;
}

void* MapFile(int fd, uint64_t size, int prot, int flags) {
  if (size < kHugePage) return ::mmap(nullptr, size, prot, flags, fd, 0);
  // Reserve a huge page more than needed, map the file over the aligned
  // part of the reservation, and give back the rest.
  const uint64_t span = size + kHugePage;
  void* r = ::mmap(nullptr, span, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (r == MAP_FAILED) return r;
  const uintptr_t start = reinterpret_cast<uintptr_t>(r);
  const uintptr_t aligned = RoundUp(start, kHugePage);
  void* m = ::mmap(reinterpret_cast<void*>(aligned), size, prot,
                   flags | MAP_FIXED, fd, 0);
  if (m == MAP_FAILED) {
    const int err = errno;
    ::munmap(r, span);
    errno = err;
    return m;
  }
  if (aligned > start) ::munmap(r, aligned - start);
  const uintptr_t end = aligned + size;
  if (start + span > end) {
    ::munmap(reinterpret_cast<void*>(end), start + span - end);
  }
  return m;
}

int CollapseToHugePages(std::byte* base, uint64_t size) {
#ifndef MADV_COLLAPSE
  constexpr int MADV_COLLAPSE = 25;  // Linux 6.1; glibc 2.36 lacks the name
#endif
  const uint64_t whole = size / kHugePage * kHugePage;
  if (whole == 0) return EINVAL;
  return ::madvise(base, whole, MADV_COLLAPSE) == 0 ? 0 : errno;
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

}  // namespace internal

absl::Status NoSpaceError(std::string_view what_needs, const std::string& dir,
                          uint64_t bytes) {
  struct statvfs fs;
  std::string free_text = "an unknown amount";
  std::string size_text;
  if (::statvfs(dir.c_str(), &fs) == 0) {
    free_text = internal::HumanBytes(uint64_t{fs.f_bavail} * fs.f_frsize);
    size_text = absl::StrCat(" of ", internal::HumanBytes(uint64_t{fs.f_blocks} * fs.f_frsize));
  }
  // Name the mount to grow: /dev/shm (Docker's --shm-size), or the tmpfs
  // the root was put on.
  std::string grow = "give the filesystem more room";
  if (std::optional<MountFacts> m = MountOf(dir)) {
    if (m->fstype == "tmpfs") {
      grow = absl::StrCat("give ", m->point, " more room (mount -o remount,",
                          "size=2G ", m->point,
                          m->point == "/dev/shm"
                              ? "; Docker: docker run --shm-size=2g)"
                              : ")");
    } else {
      grow = absl::StrCat("free space on ", m->point, " (", m->fstype,
                          "); channels belong on a tmpfs such as /dev/shm");
    }
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      std::string(what_needs), " ", internal::HumanBytes(bytes), " (", bytes,
      " bytes) of shared memory in ", dir, " but only ", free_text, size_text,
      " is free there: free space (tether clean, remove old instances), shrink "
      "the channels (maxSize x queueDepth), or ", grow));
}

}  // namespace tether::shm
