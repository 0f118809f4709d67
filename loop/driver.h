// loop: the one run loop. Both loop kinds run it:
//
//   start every loop not yet started (its on-run callbacks, in creation order)
//   repeat until Exit(), a stop signal, or the port has nothing left:
//     1. run what is due   every timer, phased loop and event whose time has
//                          come (Dispatcher::RunDue, until none is due now)
//     2. deliver           every message that arrived on a watched channel,
//                          across channels in send-time order (ties: the
//                          watcher made first), each channel in queue order
//     3. wait in the port  until a watched channel's wake word moves, the
//                          next deadline, Exit() or a stop signal
//
// The kinds differ only in their clock and port (KJ's EventLoop/EventPort
// split): a UringEventLoop drives its one loop on the real clock through an
// io_uring or futex_waitv WakePort; a SimulatedEventLoopFactory drives all its
// loops on a VirtualClock through a VirtualPort whose Wait() advances virtual
// time to the next deadline. So the order of a timer and a message due at the
// same instant is the same in both kinds by construction: the timer (step 1)
// runs before the message (step 2).
//
// A watched channel whose shared memory turns out corrupt (the reader reports
// kCorrupt) stops being watched: its watcher's stats say `corrupt`, the driver
// logs one line to stderr naming the channel and the loop, and everything
// else keeps running. A channel found corrupt through a sender or fetcher (or
// truncated under the process) gets the same one line, once, before the loop
// next sleeps. Stop signals and Exit() are checked on every iteration,
// so a loop flooded with messages still stops.
//
// Threading: one thread (the loop thread) calls everything but Exit(), which
// any thread or a signal handler may call. Setup calls (AddLoop, AddWatcher,
// WatchStopFd) allocate; Run()'s steady state does not (see the RT-safety
// notes on each call).
#ifndef TETHER_LOOP_DRIVER_H_
#define TETHER_LOOP_DRIVER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "loop/clock.h"
#include "loop/dispatch.h"
#include "loop/signals.h"
#include "loop/wake_port.h"
#include "loop/watcher.h"

namespace tether::loop {

class EventLoop;

class Driver final : private SleepHooks {
 public:
  // How Run() ended.
  enum class RunEnd {
    kExit,     // Exit() was called
    kStopped,  // a stop signal (WatchStop) arrived
    kIdle,     // the port has nothing left (a VirtualPort reached its limit)
  };

  // `dispatcher`, `clock` and `port` must outlive the driver; the driver
  // never owns them, and leaves unwatching to whoever destroys the port.
  // Setup; allocates.
  Driver(Dispatcher* dispatcher, const Clock* clock, WakePort* port);
  ~Driver() override;
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  // A loop whose on-run callbacks the next Run() starts with (loops added
  // while running start at the next iteration). `loop` outlives the driver
  // or is never run again. Loop thread; setup, allocates.
  void AddLoop(EventLoop* loop);
  // Forgets `loop` and its watchers; with `unwatch`, also stops watching
  // their channels in the port (not needed when the port is destroyed with
  // the loop). The loop's destructor calls it. With `unwatch`: loop thread,
  // not RT-safe (may make a syscall); without: any thread once the loop
  // stopped running.
  void RemoveLoop(EventLoop* loop, bool unwatch);

  // Delivers `watcher` from now on and watches its channel's wake word in
  // the port. `watcher` must stay valid while the driver lives. Errors come
  // from the port (ResourceExhausted beyond its max_watches). Loop thread;
  // setup, allocates.
  absl::Status AddWatcher(internal::Watcher* watcher);

  // Ends Run() (RunEnd::kStopped) when a stop signal arrives (`signals`:
  // its futex word wakes the port, and its flag is checked on every
  // iteration, also when the loop never sleeps), or else when `stop_fd`
  // becomes readable (not every port can wait on fds). `signals` (or null)
  // and `stop_fd` (or -1) must outlive the driver. Loop thread; setup.
  absl::Status WatchStop(int stop_fd, const StopSignals* signals);

  // Runs the loop (see the file comment) until Exit(), a stop or the port's
  // idle report. May be called again after it returns (the simulation runs
  // in steps); Exit() requests made before a call end that call after its
  // on-run callbacks. Loop thread; RT-safe in steady state: no allocation,
  // blocks only in the port.
  RunEnd Run();

  // Makes Run() return after the running callback (and the current call, if
  // none runs, as soon as it looks). Any thread; async-signal-safe.
  void Exit();
  // Forgets an earlier Exit() (the simulation's next RunUntil). Loop thread.
  void ClearExit() { exit_.store(false, std::memory_order_relaxed); }

  // Watchers that found their channel corrupt so far. Loop thread.
  int corrupt_watchers() const { return corrupt_watchers_; }
  // How long a loop with a guest watcher (one that cannot announce itself
  // as a sleeper, transport::WakeHandle::guest()) sleeps at most before it
  // looks again: the latency a guest pays for affecting nobody.
  static constexpr Duration kGuestPoll = std::chrono::milliseconds(2);
  // EndSleep found `w`'s wake announcement cleared (the port's lost-wake
  // check, kLostWakeCheck, woke it): one line per watcher, and the loop
  // polls from then on. Error path.
  void NoteAnnouncementCleared(internal::Watcher& w);
  // Called after a watcher's callback: counts and reports (one line per
  // watcher) a pinned message overwritten while the callback read it.
  void CheckOverwrittenWhileRead(internal::Watcher& w);

 private:
  bool StopRequested() const;
  void StartNewLoops();
  // Steps 1 and 2. RT-safe.
  void RunDueEvents();
  int DeliverArrived();
  // Takes w's next message into w.pending; false when there is none (or the
  // channel turned out corrupt, which stops the watcher).
  bool Refill(internal::Watcher& w);
  void MarkCorrupt(internal::Watcher& w);
  // Once per channel: a line for a channel of a running loop that this
  // process found corrupt some other way than through a watcher (a send or
  // a fetch reported kCorrupt, or the file was truncated under us), so a
  // publisher whose channel went bad never fails silently. Loop thread;
  // RT-safe: one atomic load (ChannelHandle::CorruptionEvents()); the scan
  // of the loops' channels and the line only after a corruption event.
  void ReportCorruptChannels();
  // Its scan of the loops' channels, once the count moved (cold).
  void ReportNewCorruption();
  // Marks `channel` reported in `list`; false if it was already.
  bool FirstReport(const transport::ChannelHandle* channel,
                   std::vector<const transport::ChannelHandle*>* list);

  // SleepHooks (the loop's half of the sleep protocol, wake_port.h).
  void BeginSleep() override;
  bool HasPendingWork() override;
  void EndSleep() override;

  Dispatcher* const dispatcher_;
  const Clock* const clock_;
  WakePort* const port_;
  std::vector<EventLoop*> loops_;
  size_t started_loops_ = 0;
  std::vector<internal::Watcher*> watchers_;  // active and corrupt
  // Most messages one step 2 delivers before timers get their turn again
  // (a publisher faster than the callbacks must not starve them).
  uint64_t delivery_budget_ = 0;
  int stop_fd_ = -1;
  const StopSignals* stop_signals_ = nullptr;
  int corrupt_watchers_ = 0;
  // Channels reported corrupt (capacity reserved in AddLoop: no allocation
  // while running).
  std::vector<const transport::ChannelHandle*> reported_;
  // Channels whose lost reader state was reported (reserved alike).
  std::vector<const transport::ChannelHandle*> lost_reported_;
  // ChannelHandle::CorruptionEvents() when the channels were last scanned.
  uint64_t corruption_events_scanned_ = ~uint64_t{0};
  int guest_watchers_ = 0;  // bound every wait by kGuestPoll while > 0
  // A watcher's wake announcement was found cleared (NoteAnnouncement-
  // Cleared): every wait is bounded by kGuestPoll from then on.
  bool announcement_cleared_ = false;
  std::atomic<bool> exit_{false};
};

}  // namespace tether::loop

#endif  // TETHER_LOOP_DRIVER_H_
