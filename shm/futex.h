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

namespace internal {

// futex(2) as the bare syscall instruction where the ABI is known, not
// through libc's syscall(3): the wrapper lives on a libc code page that
// nothing else on a message's path touches, and after a switch between
// two processes on one CPU (a TLB flush where the CPU has no PCID) its
// first touch costs a page walk. Measured on the 2-vCPU guest
// (docs/performance-history.md, 2026-12-06): the raw futex ping-pong 3%
// faster on one CPU, the io_uring floor 5%, tether's path 1%. x86-64
// only, where it was measured; elsewhere libc's wrapper. Returns the
// kernel's answer (>= 0, or -errno); errno is left as it was (also by
// the wrapper path). Any thread, also a signal handler; RT-safe.
inline long RawFutex(uint32_t* word, int op, uint32_t value,
                     const struct timespec* timeout) {
#if defined(__x86_64__)
  long r;
  register const struct timespec* r10 asm("r10") = timeout;
  asm volatile("syscall"
               : "=a"(r)
               : "a"(long{SYS_futex}), "D"(word), "S"(long{op}),
                 "d"(long{value}), "r"(r10)
               : "rcx", "r11", "memory");
  return r;
#else
  const int saved = errno;
  long r = ::syscall(SYS_futex, word, op, value, timeout, nullptr, 0);
  if (r < 0) {
    r = -errno;
    errno = saved;
  }
  return r;
#endif
}

}  // namespace internal

// Wakes up to `count` waiters on `word`. Returns how many were woken, or
// -errno. Any thread; RT-safe (one syscall, no allocation, no lock).
inline int FutexWake(std::atomic<uint32_t>* word, int count = INT_MAX) {
  return static_cast<int>(
      internal::RawFutex(reinterpret_cast<uint32_t*>(word), FUTEX_WAKE,
                         static_cast<uint32_t>(count), nullptr));
}

// Sleeps while *word == expected, at most `timeout` (relative; nullptr =
// forever). Returns 0 when woken (maybe spuriously: re-check), -EAGAIN when
// the word already differed, -ETIMEDOUT, -EINTR. Blocks: loop/fallback
// backends and tests only.
inline int FutexWait(std::atomic<uint32_t>* word, uint32_t expected,
                     const struct timespec* timeout) {
  const long r = internal::RawFutex(reinterpret_cast<uint32_t*>(word),
                                    FUTEX_WAIT, expected, timeout);
  return r < 0 ? static_cast<int>(r) : 0;
}

}  // namespace tether::shm

#endif  // TETHER_SHM_FUTEX_H_
