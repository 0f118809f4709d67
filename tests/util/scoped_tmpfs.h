// Test helpers for filesystems of a test's own size: a tmpfs mounted on a
// fresh folder (needs root outside Bazel's sandbox; ok() says whether it
// worked, so a test can skip with error()), and what the files of a folder
// hold (their sizes) and take (their blocks).
#ifndef TETHER_TESTS_UTIL_SCOPED_TMPFS_H_
#define TETHER_TESTS_UTIL_SCOPED_TMPFS_H_

#include <dirent.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

namespace tether::testing {

// A tmpfs of `bytes` (rounded up to whole pages by the kernel) on a fresh
// /dev/shm/tether-tmpfs-XXXXXX, with no huge pages (each file takes whole
// base pages), unmounted and removed in the destructor.
class ScopedTmpfs {
 public:
  // `more`: further mount options, e.g. "nr_inodes=4".
  explicit ScopedTmpfs(uint64_t bytes, const std::string& more = "") {
    char dir[] = "/dev/shm/tether-tmpfs-XXXXXX";
    if (::mkdtemp(dir) == nullptr) {
      error_ = std::string("mkdtemp: ") + std::strerror(errno);
      return;
    }
    path_ = dir;
    const std::string size =
        "size=" + std::to_string(bytes) + (more.empty() ? "" : "," + more);
    if (::mount("tmpfs", dir, "tmpfs", 0, (size + ",huge=never").c_str()) ==
            0 ||
        ::mount("tmpfs", dir, "tmpfs", 0, size.c_str()) == 0) {
      mounted_ = true;
    } else {
      error_ = std::string("mount: ") + std::strerror(errno);
    }
  }
  ~ScopedTmpfs() {
    if (mounted_) ::umount2(path_.c_str(), MNT_DETACH);
    if (!path_.empty()) ::rmdir(path_.c_str());
  }
  ScopedTmpfs(const ScopedTmpfs&) = delete;
  ScopedTmpfs& operator=(const ScopedTmpfs&) = delete;

  bool ok() const { return mounted_; }
  const std::string& error() const { return error_; }
  const std::string& path() const { return path_; }
  // What statvfs says is free.
  uint64_t free_bytes() const {
    struct statvfs fs;
    if (::statvfs(path_.c_str(), &fs) != 0) return 0;
    return uint64_t{fs.f_bavail} * fs.f_frsize;
  }

 private:
  std::string path_;
  bool mounted_ = false;
  std::string error_;
};

// The regular files of a folder (not below it): what they hold and take.
struct FolderUsage {
  uint64_t bytes = 0;  // st_size
  uint64_t taken = 0;  // st_blocks x 512
  int files = 0;
};

inline FolderUsage UsageOf(const std::string& dir) {
  FolderUsage u;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return u;
  while (dirent* e = ::readdir(d)) {
    struct stat st;
    const std::string path = dir + "/" + e->d_name;
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    u.bytes += static_cast<uint64_t>(st.st_size);
    u.taken += static_cast<uint64_t>(st.st_blocks) * 512;
    ++u.files;
  }
  ::closedir(d);
  return u;
}

}  // namespace tether::testing

#endif  // TETHER_TESTS_UTIL_SCOPED_TMPFS_H_
