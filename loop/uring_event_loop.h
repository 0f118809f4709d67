// loop: the real-time event loop of one node process: channels in shared
// memory, a WakePort (io_uring futex waits kept armed, or the fallback
// backend) to sleep until a watched channel gets a message, a timer is due,
// Exit() is called or SIGINT/SIGTERM arrives.
#ifndef TETHER_LOOP_URING_EVENT_LOOP_H_
#define TETHER_LOOP_URING_EVENT_LOOP_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "loop/clock.h"
#include "loop/dispatch.h"
#include "loop/event_loop.h"
#include "loop/wake_port.h"
#include "transport/channel_set.h"

namespace tether::loop {

struct UringEventLoopOptions {
  // Backend, spin before sleeping, deadline timer (see wake_port.h).
  WakePortOptions port;
  // An fd that becomes readable when the loop must stop: main() passes
  // StopSignals::fd() (loop/signals.h) so SIGINT/SIGTERM end Run() cleanly
  // in whichever thread they arrive. -1: none. Must outlive the loop.
  int stop_fd = -1;
};

// Not thread-safe except Exit(). The thread that calls Run() is the loop
// thread.
class UringEventLoop final : public EventLoop, private SleepHooks {
 public:
  // Probes the kernel and builds the port (FailedPrecondition naming the
  // missing feature and the fix when no backend works). `channels` must
  // outlive the loop. Setup; allocates.
  static absl::StatusOr<std::unique_ptr<UringEventLoop>> Create(
      const std::string& name, const transport::ChannelSet* channels,
      const UringEventLoopOptions& options = {});
  ~UringEventLoop() override;

  // Runs on-run callbacks, then timers and watchers until Exit() or the
  // stop fd becomes readable. Returns true if the stop fd ended it. Call
  // once.
  bool Run();
  // Makes Run() return after the running callback. Any thread,
  // async-signal-safe.
  void Exit();

  int64_t realtime_now_ns() const override;
  // The wake backend in use and why (for logs and `tether doctor`).
  const std::string& backend_description() const {
    return port_->description();
  }
  WakeBackend backend() const { return port_->backend(); }

 private:
  UringEventLoop(const std::string& name,
                 const transport::ChannelSet* channels);
  absl::Status WatcherAdded(Watcher& watcher) override;
  // SleepHooks.
  void BeginSleep() override;
  bool HasPendingWork() override;
  void EndSleep() override;

  RealClock clock_;
  Dispatcher dispatcher_;
  std::unique_ptr<WakePort> port_;
  int stop_fd_ = -1;
  std::atomic<bool> exit_{false};
};

}  // namespace tether::loop

#endif  // TETHER_LOOP_URING_EVENT_LOOP_H_
