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
// (docs/performance-history.md, 2026-12-06): the raw futex ping-pong 5%
// faster on one CPU, tether's 1%. Returns the kernel's answer (>= 0, or
// -errno); errno is left alone. Any thread; RT-safe.
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
#elif defined(__aarch64__)
  register long x8 asm("x8") = SYS_futex;
  register long x0 asm("x0") = reinterpret_cast<long>(word);
  register long x1 asm("x1") = op;
  register long x2 asm("x2") = value;
  register long x3 asm("x3") = reinterpret_cast<long>(timeout);
  asm volatile("svc #0"
               : "+r"(x0)
               : "r"(x8), "r"(x1), "r"(x2), "r"(x3)
               : "memory");
  return x0;
#else
  long r = ::syscall(SYS_futex, word, op, value, timeout, nullptr, 0);
  return r < 0 ? -errno : r;
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
