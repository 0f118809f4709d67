// shm: the shared futex primitives on a channel's wake word. Channel files are
// MAP_SHARED and mapped at different addresses in each process, so these are
// always shared (never FUTEX_PRIVATE_FLAG) futex operations.
#ifndef TETHER_SHM_FUTEX_H_
#define TETHER_SHM_FUTEX_H_

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdint>

namespace tether::shm {

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));

// Wakes up to `count` waiters on `word`. Returns how many were woken, or
// -errno. Any thread; RT-safe (one syscall, no allocation, no lock).
inline int FutexWake(std::atomic<uint32_t>* word, int count = INT_MAX) {
  long r = ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE,
                     count, nullptr, nullptr, 0);
  return r < 0 ? -errno : static_cast<int>(r);
}

// Sleeps while *word == expected, at most `timeout` (relative; nullptr =
// forever). Returns 0 when woken (maybe spuriously: re-check), -EAGAIN when
// the word already differed, -ETIMEDOUT, -EINTR. Blocks: loop/fallback
// backends and tests only.
inline int FutexWait(std::atomic<uint32_t>* word, uint32_t expected,
                     const struct timespec* timeout) {
  long r = ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT,
                     expected, timeout, nullptr, 0);
  return r < 0 ? -errno : 0;
}

}  // namespace tether::shm

#endif  // TETHER_SHM_FUTEX_H_
