#include "shm/owner.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tether::shm {
namespace {

// Parses /proc/<pid>/stat: "pid (comm) state ppid ... starttime(22) ...".
// comm may contain spaces and parentheses, so parse from the last ')'.
bool ReadStat(const char* path, char* state, uint64_t* start_time) {
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[1024];
  ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
  ::close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  char* p = std::strrchr(buf, ')');
  if (p == nullptr || p[1] != ' ') return false;
  p += 2;
  *state = *p;
  // Field 3 is the state; starttime is field 22: skip 19 more fields.
  for (int field = 3; field < 22; ++field) {
    p = std::strchr(p, ' ');
    if (p == nullptr) return false;
    ++p;
  }
  char* end = nullptr;
  *start_time = std::strtoull(p, &end, 10);
  return end != p;
}

OwnerToken MakeToken(pid_t pid, uint64_t start_time) {
  return ((start_time & 0xffffffffu) << 32) | static_cast<uint32_t>(pid);
}

}  // namespace

OwnerToken ProcessToken(pid_t pid) {
  if (pid <= 0) return kNoOwner;
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  char state = 0;
  uint64_t start = 0;
  if (!ReadStat(path, &state, &start)) return kNoOwner;
  if (state == 'Z' || state == 'X' || state == 'x') return kNoOwner;
  return MakeToken(pid, start);
}

OwnerToken CurrentProcessToken() { return ProcessToken(::getpid()); }

bool TokenAlive(OwnerToken token) {
  if (token == kNoOwner) return false;
  return ProcessToken(TokenPid(token)) == token;
}

}  // namespace tether::shm
