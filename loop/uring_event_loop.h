// loop: the real-time event loop of one node process: channels in shared
// memory, a WakePort (io_uring futex waits kept armed, or the fallback
// backend) to sleep until a watched channel gets a message, a timer is due,
// Exit() is called or SIGINT/SIGTERM arrives. It is the one driver
// (driver.h) on the real clock with a kernel port.
#ifndef TETHER_LOOP_URING_EVENT_LOOP_H_
#define TETHER_LOOP_URING_EVENT_LOOP_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "loop/clock.h"
#include "loop/dispatch.h"
#include "loop/driver.h"
#include "loop/event_loop.h"
#include "loop/kernel_probe.h"
#include "loop/signals.h"
#include "loop/wake_port.h"
#include "transport/channel_set.h"

namespace tether::loop {

struct UringEventLoopOptions {
  // Backend, spin before sleeping, deadline timer (see wake_port.h).
  WakePortOptions port;
  // Stop on SIGINT/SIGTERM: main() passes its StopSignals (signals.h); the
  // loop watches its fd and checks its flag on every iteration, so Run()
  // ends cleanly in whichever thread the signal arrives, also when the loop
  // is too busy to sleep. Null: none. Must outlive the loop.
  const StopSignals* stop_signals = nullptr;
  // Any other fd whose readability ends Run() (tests; -1: none). Must
  // outlive the loop.
  int stop_fd = -1;
  // Run every callback inside a RealtimeScope (EventLoop::
  // set_check_allocations): with //loop:rt_alloc_check linked, an
  // allocation in a callback aborts with a stack trace. On by default in
  // debug builds (NDEBUG not defined); node_main also turns it on for a
  // node whose stack config says "checkAllocations": true.
#ifdef NDEBUG
  bool check_allocations = false;
#else
  bool check_allocations = true;
#endif
};

namespace internal {
// What a UringEventLoop is made of besides its EventLoop part: a base class
// so that it is built before (and destroyed after) the EventLoop base, which
// registers with the driver.
struct UringLoopParts {
  explicit UringLoopParts(std::unique_ptr<WakePort> port)
      : loop_dispatcher(&real_clock),
        wake_port(std::move(port)),
        loop_driver(&loop_dispatcher, &real_clock, wake_port.get()) {}
  RealClock real_clock;
  Dispatcher loop_dispatcher;
  std::unique_ptr<WakePort> wake_port;
  Driver loop_driver;
};
}  // namespace internal

// Not thread-safe except Exit(). The thread that calls Run() is the loop
// thread; destroy the loop there too (or after that thread ended).
class UringEventLoop final : private internal::UringLoopParts,
                             public EventLoop {
 public:
  // Probes the kernel and builds the port (FailedPrecondition naming the
  // missing feature and the fix when no backend works). `channels` must
  // outlive the loop. Setup; allocates; any thread.
  static absl::StatusOr<std::unique_ptr<UringEventLoop>> Create(
      const std::string& name, const transport::ChannelSet* channels,
      const UringEventLoopOptions& options = {});
  ~UringEventLoop() override;

  // Runs on-run callbacks, then timers and watchers until Exit() or a stop.
  // Returns true if a stop signal or the stop fd ended it. Call once, on
  // the loop thread. RT-safe in steady state (no allocation; blocks only in
  // the port).
  bool Run();
  // Makes Run() return after the running callback. Any thread,
  // async-signal-safe.
  void Exit();

  int64_t realtime_now_ns() const override;
  // The wake backend in use and why (for logs and `tether doctor`). Any
  // thread.
  const std::string& backend_description() const {
    return wake_port->description();
  }
  WakeBackend backend() const { return wake_port->backend(); }
  // Channels whose watcher stopped because their memory is corrupt.
  int corrupt_watchers() const { return loop_driver.corrupt_watchers(); }

 private:
  UringEventLoop(const std::string& name, const transport::ChannelSet* channels,
                 std::unique_ptr<WakePort> port);
};

}  // namespace tether::loop

#endif  // TETHER_LOOP_URING_EVENT_LOOP_H_
