// shm: the clocks of message send times, as nanosecond counts. The one place
// below loop/ that reads the time (shm and transport use it; loop/clock.h
// builds its MonotonicNow() on it).
#ifndef TETHER_SHM_CLOCK_H_
#define TETHER_SHM_CLOCK_H_

#include <time.h>

#include <cstdint>

namespace tether::shm {

// `clock` now, nanoseconds. clock_gettime through the vDSO: no syscall for
// CLOCK_MONOTONIC and CLOCK_REALTIME. Any thread; RT-safe; never allocates.
inline uint64_t ClockNs(clockid_t clock) {
  timespec ts;
  ::clock_gettime(clock, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000u + uint64_t(ts.tv_nsec);
}

// CLOCK_MONOTONIC (message monotonic send times, loop deadlines).
inline uint64_t MonotonicNs() { return ClockNs(CLOCK_MONOTONIC); }

// CLOCK_REALTIME (message realtime send times, channel creation time).
inline uint64_t RealtimeNs() { return ClockNs(CLOCK_REALTIME); }

}  // namespace tether::shm

#endif  // TETHER_SHM_CLOCK_H_
