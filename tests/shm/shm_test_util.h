// Test helpers for shm: a unique shared-memory root per test (so parallel
// tests never collide) that is removed afterwards, a message pattern whose
// every byte is derived from (publisher, sequence) so torn or stale reads
// are detected, and the channel tests' small shape and metadata bytes.
#ifndef TETHER_TESTS_SHM_SHM_TEST_UTIL_H_
#define TETHER_TESTS_SHM_SHM_TEST_UTIL_H_

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "shm/channel.h"

namespace tether::shm::testing {

// rm -rf `path` (not following symbolic links). An entry that cannot be
// removed does not stop the walk (nftw stops at the first callback that
// returns non-zero, which left the rest of a test's channels behind when
// one entry had gone already); a second walk takes what the first could
// not (a directory that was not empty yet), and what is left after it is
// named on stderr, so a leak is seen, not found days later in /dev/shm.
inline void RemoveTree(const std::string& path) {
  const auto walk = [&path] {
    ::nftw(
        path.c_str(),
        [](const char* p, const struct stat*, int, struct FTW*) {
          (void)::remove(p);
          return 0;
        },
        16, FTW_DEPTH | FTW_PHYS);
  };
  struct stat st;
  for (int i = 0; i < 2 && ::lstat(path.c_str(), &st) == 0; ++i) walk();
  if (::lstat(path.c_str(), &st) == 0) {
    std::fprintf(stderr, "test cleanup: could not remove all of %s\n",
                 path.c_str());
  }
}

// True in a death-test child of GoogleTest's "threadsafe" style: the test
// binary run again with --gtest_internal_run_death_test, which sets up the
// test's fixture anew and then dies without tearing it down.
inline bool InDeathTestChild() {
  const int fd = ::open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  std::string cmdline;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof(buf))) > 0;) {
    cmdline.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return cmdline.find(std::string("\0--gtest_internal_run_death_test", 32)) !=
         std::string::npos;
}

// A fresh /dev/shm/tether-test-<pid>-<n>-<random> root, removed in the
// destructor (with everything under it). A death-test child's roots are
// named after the parent's newest (<that root>-child-<pid>-<n>, passed in
// the environment) and removed with it: the child dies without cleaning
// up, and a name of its own would be left in /dev/shm.
class ScopedRoot {
 public:
  static constexpr char kParentVar[] = "TETHER_TEST_SCOPED_ROOT";
  ScopedRoot() {
    static std::atomic<int> counter{0};
    std::random_device rd;
    char buf[256];
    const char* parent = std::getenv(kParentVar);
    if (parent != nullptr && InDeathTestChild()) {
      std::snprintf(buf, sizeof(buf), "%s-child-%d-%d", parent,
                    static_cast<int>(::getpid()), counter.fetch_add(1));
    } else {
      std::snprintf(buf, sizeof(buf), "/dev/shm/tether-test-%d-%d-%08x",
                    static_cast<int>(::getpid()), counter.fetch_add(1), rd());
      ::setenv(kParentVar, buf, /*overwrite=*/1);
    }
    root_ = buf;
    options_.root = root_;
    options_.instance = "test";
  }
  ~ScopedRoot() {
    RemoveTree(root_);
    // What death-test children of this root left.
    const std::string prefix =
        root_.substr(root_.rfind('/') + 1) + "-child-";
    if (DIR* d = ::opendir("/dev/shm")) {
      std::vector<std::string> left;
      while (dirent* e = ::readdir(d)) {
        if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0) {
          left.push_back(std::string("/dev/shm/") + e->d_name);
        }
      }
      ::closedir(d);
      for (const std::string& path : left) RemoveTree(path);
    }
    const char* parent = std::getenv(kParentVar);
    if (parent != nullptr && root_ == parent) ::unsetenv(kParentVar);
  }
  ScopedRoot(const ScopedRoot&) = delete;
  ScopedRoot& operator=(const ScopedRoot&) = delete;

  const std::string& root() const { return root_; }
  const ChannelOptions& options() const { return options_; }
  ChannelOptions& options() { return options_; }

 private:
  std::string root_;
  ChannelOptions options_;
};

// Test message: header then a pattern over the rest of `size` bytes.
struct PatternHeader {
  uint32_t publisher;
  uint32_t size;
  uint64_t sequence;
};

inline uint8_t PatternByte(uint32_t publisher, uint64_t sequence, size_t i) {
  return static_cast<uint8_t>((publisher * 131u) ^ (sequence * 7u) ^ (i * 13u));
}

inline size_t WritePattern(std::span<std::byte> slot, uint32_t publisher,
                           uint64_t sequence, size_t size) {
  if (size < sizeof(PatternHeader)) size = sizeof(PatternHeader);
  PatternHeader h{publisher, static_cast<uint32_t>(size), sequence};
  std::memcpy(slot.data(), &h, sizeof(h));
  auto* bytes = reinterpret_cast<uint8_t*>(slot.data());
  for (size_t i = sizeof(h); i < size; ++i) {
    bytes[i] = PatternByte(publisher, sequence, i);
  }
  return size;
}

// True if `data` is an intact pattern message; fills *out.
inline bool CheckPattern(std::span<const std::byte> data, PatternHeader* out) {
  if (data.size() < sizeof(PatternHeader)) return false;
  std::memcpy(out, data.data(), sizeof(*out));
  if (out->size != data.size()) return false;
  auto* bytes = reinterpret_cast<const uint8_t*>(data.data());
  for (size_t i = sizeof(PatternHeader); i < data.size(); ++i) {
    if (bytes[i] != PatternByte(out->publisher, out->sequence, i)) return false;
  }
  return true;
}

// The channel tests' shape (channel_test.cc and its siblings): 8 slots of
// 128 bytes, 2 publishers, 2 pins.
inline QueueParams SmallParams() {
  return {.slot_size = 128, .queue_depth = 8, .max_publishers = 2,
          .max_pinned = 2};
}

// The bytes of `s` (a channel's metadata), without its terminating NUL.
inline std::span<const std::byte> Bytes(const char* s) {
  return {reinterpret_cast<const std::byte*>(s), std::strlen(s)};
}

}  // namespace tether::shm::testing

#endif  // TETHER_TESTS_SHM_SHM_TEST_UTIL_H_
