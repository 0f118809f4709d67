#include "tools/instance_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace tether::tools {
namespace {

std::string FolderOf(const shm::ChannelOptions& options) {
  return absl::StrCat(options.root, "/", options.instance);
}

absl::Status ErrnoError(int err, const std::string& what) {
  const std::string message = absl::StrCat(what, ": ", std::strerror(err));
  if (err == EACCES || err == EPERM) {
    return absl::PermissionDeniedError(absl::StrCat(
        message, "; run as a user who may write there, or pick another "
        "--root"));
  }
  return absl::InternalError(message);
}

// mkdir -p, with x bits wherever the channel file mode has r bits (as the
// channel files' own folders get).
absl::Status MakeFolders(const std::string& dir, mode_t file_mode) {
  const mode_t mode = file_mode | ((file_mode & 0444) >> 2);
  std::string path;
  for (absl::string_view part : absl::StrSplit(dir, '/')) {
    if (part.empty()) {
      if (path.empty()) path = "/";
      continue;
    }
    if (!path.empty() && path.back() != '/') path += '/';
    absl::StrAppend(&path, part);
    if (::mkdir(path.c_str(), mode) != 0 && errno != EEXIST) {
      return ErrnoError(errno, absl::StrCat("cannot create ", path));
    }
  }
  return absl::OkStatus();
}

// The pid of the FLOCK on `inode` of device `dev`, from /proc/locks lines
// like "3: FLOCK  ADVISORY  WRITE 1234 00:1a:5678 0 EOF".
std::optional<pid_t> FlockHolder(dev_t dev, ino_t inode) {
  std::ifstream locks("/proc/locks");
  std::string line;
  while (std::getline(locks, line)) {
    std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    // "-> " marks a waiter; a holder's line has 8 fields.
    if (f.size() < 8 || f[1] != "FLOCK") continue;
    std::vector<std::string> id = absl::StrSplit(f[5], ':');
    uint64_t ino = 0;
    int pid = 0;
    if (id.size() != 3 || !absl::SimpleAtoi(id[2], &ino) || ino != inode ||
        !absl::SimpleAtoi(f[4], &pid)) {
      continue;
    }
    uint32_t major = 0, minor = 0;
    if (!absl::SimpleHexAtoi(id[0], &major) ||
        !absl::SimpleHexAtoi(id[1], &minor) ||
        makedev(major, minor) != dev) {
      continue;
    }
    return pid;
  }
  return std::nullopt;
}

std::string LockPath(const shm::ChannelOptions& options) {
  return absl::StrCat(FolderOf(options), "/", kInstanceLockFile);
}

}  // namespace

absl::StatusOr<InstanceLock> InstanceLock::Acquire(
    const shm::ChannelOptions& options) {
  if (absl::Status s = MakeFolders(FolderOf(options), options.mode); !s.ok()) {
    return s;
  }
  const std::string path = LockPath(options);
  // `tether clean` may unlink the file between our open and flock: then the
  // lock is on a file nobody else will find, so take it again on the new one.
  for (int attempt = 0; attempt < 100; ++attempt) {
    // Read-only is enough for flock, so a file another user of the group
    // made serves every launcher of the instance.
    int fd = ::open(path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
                    0664);
    if (fd < 0) return ErrnoError(errno, absl::StrCat("cannot open ", path));
    Fd owned(fd);
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK) {
        return ErrnoError(errno, absl::StrCat("cannot lock ", path));
      }
      std::string who = "another launcher";
      if (std::optional<pid_t> pid = Holder(options); pid && *pid > 0) {
        who = absl::StrCat("another launcher (pid ", *pid, ")");
      }
      return absl::FailedPreconditionError(absl::StrCat(
          who, " is running stack instance \"", options.instance, "\" under ",
          options.root, " (it holds ", path,
          "); stop it first, or pick another --instance"));
    }
    struct stat held, now;
    if (::fstat(fd, &held) == 0 && ::stat(path.c_str(), &now) == 0 &&
        held.st_dev == now.st_dev && held.st_ino == now.st_ino) {
      return InstanceLock(std::move(owned), path);
    }
  }
  return absl::InternalError(absl::StrCat(
      "cannot lock ", path, ": it is replaced as fast as it is locked"));
}

std::optional<pid_t> InstanceLock::Holder(const shm::ChannelOptions& options) {
  struct stat st;
  if (::stat(LockPath(options).c_str(), &st) != 0) return std::nullopt;
  return FlockHolder(st.st_dev, st.st_ino);
}

absl::StatusOr<bool> InstanceLock::RemoveIfUnused(
    const shm::ChannelOptions& options) {
  const std::string path = LockPath(options);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    if (errno == ENOENT) return true;
    return ErrnoError(errno, absl::StrCat("cannot open ", path));
  }
  Fd owned(fd);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) return false;
    return ErrnoError(errno, absl::StrCat("cannot lock ", path));
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return ErrnoError(errno, absl::StrCat("cannot remove ", path));
  }
  return true;
}

}  // namespace tether::tools
