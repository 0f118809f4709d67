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

// Removes `folders` (outermost first) from the innermost out, each only if
// it is empty.
void RemoveFolders(const std::vector<std::string>& folders) {
  for (auto it = folders.rbegin(); it != folders.rend(); ++it) {
    if (::rmdir(it->c_str()) != 0) break;
  }
}

std::string LockPath(const shm::ChannelOptions& options) {
  return absl::StrCat(FolderOf(options), "/", kInstanceLockFile);
}

}  // namespace

absl::StatusOr<InstanceLock> InstanceLock::Acquire(
    const shm::ChannelOptions& options) {
  // The folders get what every instance folder gets, whoever makes it first.
  absl::StatusOr<std::vector<std::string>> made =
      shm::Channel::MakeInstanceFolder(options);
  if (!made.ok()) return made.status();
  // Nothing this call made stays behind when it fails.
  auto fail = [&](absl::Status s) -> absl::StatusOr<InstanceLock> {
    RemoveFolders(*made);
    return s;
  };
  const std::string path = LockPath(options);
  // `tether clean` may unlink the file between our open and flock: then the
  // lock is on a file nobody else will find, so take it again on the new one.
  for (int attempt = 0; attempt < 100; ++attempt) {
    // Read-only is enough for flock, so a file another user of the group
    // made serves every launcher of the instance.
    int fd = ::open(path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
                    0664);
    if (fd < 0) {
      return fail(ErrnoError(errno, absl::StrCat("cannot open ", path)));
    }
    Fd owned(fd);
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK) {
        return fail(ErrnoError(errno, absl::StrCat("cannot lock ", path)));
      }
      std::string who = "another launcher";
      if (std::optional<pid_t> pid = Holder(options); pid && *pid > 0) {
        who = absl::StrCat("another launcher (pid ", *pid, ")");
      }
      return fail(absl::FailedPreconditionError(absl::StrCat(
          who, " is running stack instance \"", options.instance, "\" under ",
          options.root, " (it holds ", path,
          "); stop it first, or pick another --instance")));
    }
    struct stat held, now;
    if (::fstat(fd, &held) == 0 && ::stat(path.c_str(), &now) == 0 &&
        held.st_dev == now.st_dev && held.st_ino == now.st_ino) {
      return InstanceLock(std::move(owned), path, std::move(*made));
    }
  }
  return fail(absl::InternalError(absl::StrCat(
      "cannot lock ", path, ": it is replaced as fast as it is locked")));
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

void InstanceLock::Abandon() {
  if (!fd_.valid()) return;
  // Unlinked while still held: a launcher that opened the old file sees it
  // replaced and retries on a new one (Acquire).
  ::unlink(path_.c_str());
  fd_ = Fd();
  RemoveFolders(made_folders_);
}

}  // namespace tether::tools
