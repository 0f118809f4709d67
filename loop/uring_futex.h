// loop: compat definitions for io_uring futex requests (Linux >= 6.7), which
// Debian 12's liburing 2.3 and 6.1 kernel headers lack, and SQE preparers.
#ifndef TETHER_LOOP_URING_FUTEX_H_
#define TETHER_LOOP_URING_FUTEX_H_

#include <liburing.h>
#include <linux/futex.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <string>

namespace tether::loop {

// io_uring opcodes (include/uapi/linux/io_uring.h, Linux 6.7). Prefixed names:
// newer liburing defines IORING_OP_FUTEX_* as enum constants, so a macro of
// the same name would break the build there.
inline constexpr int kTetherIoringOpFutexWait = 51;
inline constexpr int kTetherIoringOpFutexWake = 52;
inline constexpr int kTetherIoringOpFutexWaitv = 53;

// IORING_OP_TIMEOUT flag (Linux 6.4): the timeout re-fires every period,
// each completion flagged IORING_CQE_F_MORE while it stays armed.
inline constexpr unsigned kTetherIoringTimeoutMultishot = 1u << 6;

// futex2 flags, passed in sqe->fd for FUTEX_WAIT / FUTEX_WAKE and in
// futex_waitv::flags. Only the 32-bit size is accepted by the kernel.
inline constexpr uint32_t kTetherFutex2SizeU8 = 0x00;
inline constexpr uint32_t kTetherFutex2SizeU16 = 0x01;
inline constexpr uint32_t kTetherFutex2SizeU32 = 0x02;
inline constexpr uint32_t kTetherFutex2SizeU64 = 0x03;
inline constexpr uint32_t kTetherFutex2Numa = 0x04;
inline constexpr uint32_t kTetherFutex2Mpol = 0x08;
// Never set by tether: channel words live in MAP_SHARED files and are woken
// from other processes, which a private futex never sees. Also, on 6.16+
// kernels a PRIVATE io_uring wait armed while the process has one thread never
// completes once a second thread starts (see notes/io_uring-futex.md).
inline constexpr uint32_t kTetherFutex2Private = 0x80;

// The flags every tether futex request uses: 32-bit, shared (not PRIVATE).
inline constexpr uint32_t kTetherFutex2SharedU32 = kTetherFutex2SizeU32;

// The bitset that matches every waker; the kernel rejects a zero mask.
inline constexpr uint64_t kTetherFutexMatchAny = FUTEX_BITSET_MATCH_ANY;

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) &&
                  std::atomic<uint32_t>::is_always_lock_free,
              "a futex word must be a plain 32-bit word");

namespace internal {

inline void PrepFutex(int op, io_uring_sqe* sqe, const void* word,
                      uint64_t value, uint64_t mask) {
  // fd = futex2 flags, addr = word, off = expected value / max to wake,
  // len = 0, addr3 = bitset mask, rw_flags (futex_flags) = 0. prep_rw zeroes
  // buf_index, file_index, personality and addr3 before we set the mask.
  io_uring_prep_rw(op, sqe, static_cast<int>(kTetherFutex2SharedU32), word,
                   /*len=*/0, value);
  sqe->addr3 = mask;
}

}  // namespace internal

// Prepares `sqe` as a one-shot shared FUTEX_WAIT on the 32-bit `word`
// (4-byte aligned, may be in a MAP_SHARED mapping at any address). The CQE's
// res is 0 when woken (possibly spuriously: re-check the word), -EAGAIN when
// *word != expected at arm time, -ECANCELED when cancelled, -EINVAL on a
// kernel without io_uring futex ops. One CQE per request: re-arm after each.
// `word` must stay mapped until the request completes or is cancelled.
// Any thread owning the ring; RT-safe; does not allocate or block.
inline void PrepFutexWait(io_uring_sqe* sqe, const std::atomic<uint32_t>* word,
                          uint32_t expected,
                          uint64_t mask = kTetherFutexMatchAny) {
  internal::PrepFutex(kTetherIoringOpFutexWait, sqe, word, expected, mask);
}
inline void PrepFutexWait(io_uring_sqe* sqe, const uint32_t* word,
                          uint32_t expected,
                          uint64_t mask = kTetherFutexMatchAny) {
  internal::PrepFutex(kTetherIoringOpFutexWait, sqe, word, expected, mask);
}

// Prepares `sqe` as a shared FUTEX_WAKE of at most `max_to_wake` waiters on
// `word`; the CQE's res is the number woken. Same wake as the plain
// futex(FUTEX_WAKE) syscall without FUTEX_PRIVATE_FLAG.
// Any thread owning the ring; RT-safe; does not allocate or block.
inline void PrepFutexWake(io_uring_sqe* sqe, const std::atomic<uint32_t>* word,
                          uint32_t max_to_wake,
                          uint64_t mask = kTetherFutexMatchAny) {
  internal::PrepFutex(kTetherIoringOpFutexWake, sqe, word, max_to_wake, mask);
}
inline void PrepFutexWake(io_uring_sqe* sqe, const uint32_t* word,
                          uint32_t max_to_wake,
                          uint64_t mask = kTetherFutexMatchAny) {
  internal::PrepFutex(kTetherIoringOpFutexWake, sqe, word, max_to_wake, mask);
}

// Prepares `sqe` as FUTEX_WAITV over `count` (1..FUTEX_WAITV_MAX) waiters;
// each waiter's flags must be kTetherFutex2SharedU32. The CQE's res is the
// index of the woken waiter, or -EAGAIN if one word differed at arm time.
// `waiters` must stay valid until the request completes.
// Any thread owning the ring; RT-safe; does not allocate or block.
inline void PrepFutexWaitv(io_uring_sqe* sqe, const futex_waitv* waiters,
                           uint32_t count) {
  io_uring_prep_rw(kTetherIoringOpFutexWaitv, sqe, /*fd=*/0, waiters, count,
                   /*offset=*/0);
}

// The ring setup flags tether asks for, best first: a ring tries each in
// turn while the kernel answers EINVAL (it lacks that flag). The benchmarks'
// io_uring floor uses the same list, so it sleeps as the port does.
inline constexpr unsigned kRingFlagPreference[] = {
    IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
    IORING_SETUP_SINGLE_ISSUER,
    IORING_SETUP_COOP_TASKRUN,
    0,
};

// Sets up `ring` with `entries` SQEs (`params` as given: extra flags such
// as IORING_SETUP_CQSIZE and its cq_entries), trying each set of
// kRingFlagPreference in turn, skipped when it has a bit of `skip`, for as
// long as the kernel answers EINVAL. Returns 0 with `params` holding the
// flags the ring got, or the first other -errno (or the last EINVAL).
// Setup only (a syscall per attempt).
inline int QueueInitPreferred(unsigned entries, io_uring* ring,
                              const io_uring_params& params, unsigned skip,
                              io_uring_params* got) {
  int rc = -EINVAL;
  for (const unsigned flags : kRingFlagPreference) {
    if ((flags & skip) != 0) continue;
    *got = params;
    got->flags |= flags;
    rc = io_uring_queue_init_params(entries, ring, got);
    if (rc != -EINVAL) return rc;  // set up, or refused for another reason
  }
  return rc;
}

// "SINGLE_ISSUER|DEFER_TASKRUN", ... or "none": the flags of
// kRingFlagPreference in `flags`, for log lines. Allocates; not RT-safe.
inline std::string RingFlagNames(unsigned flags) {
  std::string names;
  const auto add = [&](unsigned bit, const char* name) {
    if ((flags & bit) == 0) return;
    if (!names.empty()) names += '|';
    names += name;
  };
  add(IORING_SETUP_SINGLE_ISSUER, "SINGLE_ISSUER");
  add(IORING_SETUP_DEFER_TASKRUN, "DEFER_TASKRUN");
  add(IORING_SETUP_COOP_TASKRUN, "COOP_TASKRUN");
  return names.empty() ? "none" : names;
}

}  // namespace tether::loop

#endif  // TETHER_LOOP_URING_FUTEX_H_
