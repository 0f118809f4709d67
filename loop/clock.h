// loop: time as the event loop sees it. Monotonic time points (the clock of
// message send times), and the Clock the dispatch core reads: the real
// CLOCK_MONOTONIC for the io_uring loop, or a VirtualClock that the simulated
// loop advances itself so that runs are deterministic.
#ifndef TETHER_LOOP_CLOCK_H_
#define TETHER_LOOP_CLOCK_H_

#include <chrono>
#include <cstdint>
#include <ratio>
#include <type_traits>

#include "util/hot_path.h"

namespace tether::loop {

// A span of time, nanoseconds.
using Duration = std::chrono::nanoseconds;
// A point on CLOCK_MONOTONIC (libstdc++'s steady_clock is CLOCK_MONOTONIC),
// nanoseconds since boot. Message send times (shm::MessageView's
// monotonic_send_ns) are on the same clock: see FromMonotonicNs().
using MonotonicTime = std::chrono::steady_clock::time_point;
static_assert(std::is_same_v<MonotonicTime::duration, Duration>);

// CLOCK_MONOTONIC now (vDSO, no syscall). Any thread; RT-safe.
MonotonicTime MonotonicNow();

// CLOCK_REALTIME now, nanoseconds since the Unix epoch (the realtime send
// time stamped on messages). Any thread; RT-safe.
int64_t RealtimeNowNs();

// Between MonotonicTime and the nanosecond counts stamped on messages.
// Any thread; RT-safe.
inline MonotonicTime FromMonotonicNs(uint64_t ns) {
  return MonotonicTime(Duration(static_cast<int64_t>(ns)));
}
inline uint64_t ToMonotonicNs(MonotonicTime t) {
  return static_cast<uint64_t>(t.time_since_epoch().count());
}

// The time source of a dispatch core. Implementations are not thread-safe
// unless they say so; the loop thread reads them.
class Clock {
 public:
  virtual ~Clock() = default;
  // The current time. RT-safe; never allocates or blocks.
  virtual MonotonicTime Now() const = 0;
};

// CLOCK_MONOTONIC. Stateless: any thread.
class RealClock final : public Clock {
 public:
  TETHER_HOT_PATH MonotonicTime Now() const override { return MonotonicNow(); }
};

// A clock that moves only when told to: the simulated loop sets it to each
// event's time before running the event. Starts at `start`. Loop thread only
// (the thread that runs the simulation).
class VirtualClock final : public Clock {
 public:
  explicit VirtualClock(MonotonicTime start = MonotonicTime()) : now_(start) {}
  VirtualClock(const VirtualClock&) = delete;
  VirtualClock& operator=(const VirtualClock&) = delete;

  MonotonicTime Now() const override { return now_; }

  // Moves the clock to `t`; aborts if `t` is earlier than Now() (virtual
  // time never runs backwards). RT-safe.
  void AdvanceTo(MonotonicTime t);
  // AdvanceTo(Now() + d); aborts on a negative `d`. RT-safe.
  void AdvanceBy(Duration d) { AdvanceTo(now_ + d); }

 private:
  MonotonicTime now_;
};

}  // namespace tether::loop

#endif  // TETHER_LOOP_CLOCK_H_
