// loop: the dispatch core shared by the io_uring loop and the simulated loop.
// It decides *what* runs *when* on one clock: timed events (one-shot and
// periodic timers, phased loops, and plain events the loops schedule for
// themselves). It never sleeps: the driver (driver.h) asks NextDeadline(),
// waits in its port (wake_port.h; the simulation's port advances a
// VirtualClock), then calls RunDue().
//
// Order: events due at the same time run in the order they were scheduled
// (each Schedule*() call, and each automatic reschedule of a periodic timer
// or phased loop, takes the next ticket). A periodic timer or phased loop is
// rescheduled *before* its callback runs, so its next run is ordered ahead of
// anything the callback schedules for that same time. The order depends only
// on the sequence of calls and the times passed, so a simulated run on a
// VirtualClock is deterministic.
//
// Allocation: Add*() allocate (the callback and its bookkeeping); Schedule*(),
// Cancel*()/Disable*(), NextDeadline() and RunDue() never allocate, and neither
// does firing an event (the heap is reserved for every event ever added).
// Events are never deleted, only cancelled; their ids stay valid for the
// Dispatcher's life.
//
// Thread-safety: none. One thread (the loop thread) uses a Dispatcher.
#ifndef TETHER_LOOP_DISPATCH_H_
#define TETHER_LOOP_DISPATCH_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "loop/clock.h"

namespace tether::loop {

// Handles. Plain indices, valid for the life of their Dispatcher.
enum class EventId : uint32_t {};
enum class TimerId : uint32_t {};
enum class PhasedLoopId : uint32_t {};

// What a periodic timer or phased loop has done so far.
struct RunStats {
  uint64_t runs = 0;    // callbacks made
  uint64_t missed = 0;  // expirations / phase points skipped because the
                        // loop ran late (never run, reported here and, for a
                        // phased loop, through its callback's `cycles`)
};

class Dispatcher {
 public:
  // `clock` must outlive the Dispatcher. Setup; allocates.
  explicit Dispatcher(const Clock* clock);
  Dispatcher(const Dispatcher&) = delete;
  Dispatcher& operator=(const Dispatcher&) = delete;
  ~Dispatcher();

  const Clock& clock() const { return *clock_; }

  // --- plain events ----------------------------------------------------------
  // An event that runs `fn` each time it comes due; not scheduled until
  // Schedule(). Loop thread; not RT-safe (allocates). May be called from a
  // running callback.
  EventId AddEvent(absl::AnyInvocable<void()> fn);
  // (Re)schedules `event` for `when` (any time, also the past: it then runs
  // at the next RunDue()), replacing an earlier schedule. RT-safe; O(log n).
  void Schedule(EventId event, MonotonicTime when);
  // Unschedules `event` (no-op if not scheduled). RT-safe; O(log n).
  void Cancel(EventId event);
  // The time `event` is scheduled for, or nullopt. RT-safe.
  std::optional<MonotonicTime> ScheduledTime(EventId event) const;

  // --- timers ----------------------------------------------------------------
  // A timer that runs `fn` when it expires; disabled until ScheduleTimer().
  // Loop thread; not RT-safe (allocates).
  TimerId AddTimer(absl::AnyInvocable<void()> fn);
  // Expires at `base`, and with a positive `period` then at base + k*period.
  // A periodic timer that runs late (the loop reached it after one or more
  // later expirations had passed) runs once, counts the expirations it
  // skipped in its stats, and stays on its grid (the next expiration is the
  // first base + k*period after the time RunDue() was called with): there
  // is never a burst of catch-up runs. RT-safe; O(log n).
  void ScheduleTimer(TimerId timer, MonotonicTime base,
                     Duration period = Duration::zero());
  // Stops the timer (no-op if not scheduled). RT-safe; O(log n).
  void DisableTimer(TimerId timer);
  RunStats timer_stats(TimerId timer) const;

  // --- phased loops ------------------------------------------------------------
  // Runs `fn(cycles)` at every phase point offset + k*period (k an integer,
  // times on the clock's epoch), starting at the first phase point after
  // clock().Now(). `cycles` is the number of phase points that passed since
  // the previous run: 1 when on time, n > 1 when the loop ran late and n - 1
  // phase points were missed (counted in stats too). `period` must be
  // positive (aborts otherwise); `offset` is taken modulo `period`.
  // Loop thread; not RT-safe (allocates).
  PhasedLoopId AddPhasedLoop(absl::AnyInvocable<void(int cycles)> fn,
                             Duration period, Duration offset = Duration::zero());
  // Changes period and offset; the next run is the first new phase point
  // after clock().Now(). RT-safe; O(log n).
  void ResetPhasedLoop(PhasedLoopId loop, Duration period,
                       Duration offset = Duration::zero());
  // Stops or restarts (at the first phase point after now) the phased loop.
  // RT-safe; O(log n).
  void DisablePhasedLoop(PhasedLoopId loop);
  void EnablePhasedLoop(PhasedLoopId loop);
  RunStats phased_loop_stats(PhasedLoopId loop) const;

  // --- for the loop driver -----------------------------------------------------
  // The earliest scheduled time, or nullopt when nothing is scheduled.
  // RT-safe; O(1).
  std::optional<MonotonicTime> NextDeadline() const;

  // Runs the events due at `now` (scheduled for a time <= now), earliest
  // first, equal times in ticket order. It stops at the first event that one
  // of its own callbacks scheduled (e.g. a one-shot rescheduling itself for
  // <= now): that event and everything after it run in the next call, so one
  // call always ends and a loop calls again while NextDeadline() <= now.
  // Returns the number of callbacks run.
  // Loop thread; RT-safe itself (no allocation, no syscall); as RT-safe as
  // the callbacks.
  int RunDue(MonotonicTime now);

  // Number of scheduled events (all kinds). RT-safe.
  size_t scheduled_count() const { return heap_.size(); }

 private:
  enum class Kind : uint8_t { kPlain, kTimer, kPhased };
  struct Event {
    Kind kind = Kind::kPlain;
    int32_t heap_index = -1;  // position in heap_, -1 when not scheduled
    MonotonicTime when;
    uint64_t ticket = 0;
    Duration period = Duration::zero();  // timers and phased loops
    Duration offset = Duration::zero();  // phased loops
    RunStats stats;
    absl::AnyInvocable<void()> fn;               // plain events and timers
    absl::AnyInvocable<void(int)> phased_fn;     // phased loops
  };

  uint32_t NewEvent(Kind kind);
  void ScheduleIndex(uint32_t index, MonotonicTime when);
  void CancelIndex(uint32_t index);
  // The first phase point of `e` strictly after `t`.
  static MonotonicTime NextPhasePoint(const Event& e, MonotonicTime t);
  bool Before(uint32_t a, uint32_t b) const;
  void SiftUp(size_t pos);
  void SiftDown(size_t pos);
  void Place(size_t pos, uint32_t index);
  void RemoveAt(size_t pos);
  Event& At(uint32_t index);
  const Event& At(uint32_t index) const;

  const Clock* const clock_;
  // A deque so that adding an event from inside a running callback never
  // moves the callback being run.
  std::deque<Event> events_;
  std::vector<uint32_t> heap_;  // binary min-heap of event indices
  uint64_t next_ticket_ = 0;
};

}  // namespace tether::loop

#endif  // TETHER_LOOP_DISPATCH_H_
