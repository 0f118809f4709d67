// shm: a channel's files as files -- their names and paths, the instance
// folder, the space they take, listing, removing, and the probes tools run
// (channel.h declares them all). Split from channel.cc, which maps a
// channel and runs its queue.
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
#include "shm/channel_files.h"
#include "shm/mapping_guard.h"

namespace tether::shm {
namespace {

using internal::Layout;
using internal::StateLayout;
using internal::ErrnoStatus;
using internal::Escape;
using internal::kStateMarker;
using internal::MakeDirs;
using internal::RemoveStateFiles;
using internal::Unescape;

}  // namespace

std::string Channel::PathFor(const ChannelOptions& options,
                             std::string_view name) {
  return absl::StrCat(options.root, "/", options.instance, "/", Escape(name));
}

std::string Channel::CompanionPathFor(const ChannelOptions& options,
                                      std::string_view name,
                                      std::string_view kind,
                                      std::string_view owner) {
  return absl::StrCat(options.root, "/", options.instance, "/.", Escape(name),
                      "@", std::string(kind), ".", Escape(owner));
}

std::optional<std::string> Channel::CompanionOf(std::string_view file) {
  if (file.size() < 2 || file[0] != '.') return std::nullopt;
  const size_t at = file.find('@');
  if (at == std::string_view::npos || at == 1) return std::nullopt;
  return Unescape(file.substr(1, at - 1));
}

std::string Channel::CleanCommand(const ChannelOptions& options) {
  // Single quotes where a shell would split or expand the value.
  auto quoted = [](const std::string& v) {
    const bool plain =
        !v.empty() &&
        v.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                            "0123456789_-./:,+=@%") == std::string::npos;
    if (plain) return v;
    std::string out = "'";
    for (char ch : v) {
      if (ch == '\'') {
        out += "'\\''";
      } else {
        out += ch;
      }
    }
    return out + "'";
  };
  return absl::StrCat("tether clean --root ", quoted(options.root),
                      " --instance ", quoted(options.instance));
}

std::string Channel::ChangeAdvice(const ChannelOptions& options,
                                  std::string_view name) {
  const absl::StatusOr<bool> busy = InUse(options, name);
  if (busy.ok() && !*busy) {
    return absl::StrCat("no live process uses it, so `", CleanCommand(options),
                        "` removes it and the next start makes it anew");
  }
  return absl::StrCat(
      "to change it, stop every process that uses it (a live one does), "
      "then `", CleanCommand(options),
      "` removes it and the next start makes it anew (a file removed under "
      "a live process splits the stack: that process keeps the old "
      "channel)");
}

mode_t Channel::ReaderModeFor(const ChannelOptions& options) {
  return options.reader_mode.value_or(options.mode |
                                      ((options.mode & 0040) >> 1));
}

absl::StatusOr<std::vector<std::string>> Channel::MakeInstanceFolder(
    const ChannelOptions& options) {
  std::vector<std::string> made;
  if (absl::Status s = MakeDirs(options, &made); !s.ok()) return s;
  return made;
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

absl::StatusOr<bool> Channel::RemoveIfUnused(const ChannelOptions& options,
                                             std::string_view name) {
  const std::string path = PathFor(options, name);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    return ErrnoStatus(errno, absl::StrCat("cannot open ", path));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK) return false;
    return ErrnoStatus(err, absl::StrCat("cannot lock ", path));
  }
  // Held across the unlink: an opener that took its shared lock after us
  // finds the file gone and opens (or makes) the one at the path then.
  struct stat opened, now;
  if (::fstat(fd, &opened) != 0 || ::lstat(path.c_str(), &now) != 0 ||
      opened.st_dev != now.st_dev || opened.st_ino != now.st_ino) {
    ::close(fd);
    return false;  // made anew meanwhile: someone's
  }
  absl::Status removed = Remove(options, name);
  ::close(fd);
  if (!removed.ok()) return removed;
  return true;
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

bool Channel::LockTellsUse(const ChannelOptions& options,
                           std::string_view name) {
  const std::string path = PathFor(options, name);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  internal::ChannelHeader h;
  const bool read =
      ::pread(fd, &h, sizeof(h), 0) == static_cast<ssize_t>(sizeof(h));
  ::close(fd);
  if (!read || h.layout_version < internal::kFirstLockingLayout ||
      h.layout_version > internal::kLayoutVersion) {
    return false;
  }
  if (h.magic == internal::kMagic) return true;
  // Damaged magic: ours if the nonce pairs it with a reader-state file of
  // its name (layout 3 on), which junk does not do by chance.
  struct stat st;
  return ::stat(internal::StatePath(path, h.nonce).c_str(), &st) == 0;
}

int Channel::ProbeHugePages(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return errno;
  int err = 0;
  if (int e = ::posix_fallocate(fd, 0, internal::kHugePage); e != 0) {
    err = e;
  } else if (void* m = internal::MapFile(fd, internal::kHugePage,
                                         PROT_READ | PROT_WRITE, MAP_SHARED);
             m == MAP_FAILED) {
    err = errno;
  } else {
    err = internal::CollapseToHugePages(static_cast<std::byte*>(m),
                                        internal::kHugePage);
    ::munmap(m, internal::kHugePage);
  }
  ::close(fd);
  return err;
}

uint64_t Channel::FileSizeFor(const QueueParams& params,
                              uint32_t metadata_size) {
  return Layout::For(params, metadata_size).total +
         StateLayout::For(params).total;
}

uint64_t Channel::SpaceFor(const QueueParams& params, uint32_t metadata_size,
                           uint64_t block_size) {
  const uint64_t b = block_size == 0 ? 1 : block_size;
  auto blocks = [b](uint64_t bytes) { return (bytes + b - 1) / b * b; };
  return blocks(Layout::For(params, metadata_size).total) +
         blocks(StateLayout::For(params).total);
}

std::optional<FreeSpace> FreeSpaceOf(const std::string& dir) {
  struct statvfs fs;
  if (::statvfs(dir.c_str(), &fs) != 0) return std::nullopt;
  const uint64_t block = fs.f_frsize != 0 ? fs.f_frsize : fs.f_bsize;
  return FreeSpace{.bytes = uint64_t{fs.f_bavail} * block,
                   .block_size = block == 0 ? 1 : block};
}

}  // namespace tether::shm
