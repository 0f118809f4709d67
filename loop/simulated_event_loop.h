// loop: many event loops (nodes) in one process on a virtual clock. They run
// on the same driver as a real loop (driver.h: due events, then arrived
// messages in send-time order, then wait), whose port here is a VirtualPort
// that advances virtual time to the next deadline instead of sleeping.
// Events run in time order, equal times in the order they were scheduled, so
// a run is deterministic: the same calls give the same callbacks in the same
// order at the same virtual times. Channels are real tether channel queues
// (same depth and loss behaviour as between processes) in a private tmpfs
// folder that the factory removes. Used for node unit tests and
// deterministic log replay.
#ifndef TETHER_LOOP_SIMULATED_EVENT_LOOP_H_
#define TETHER_LOOP_SIMULATED_EVENT_LOOP_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "loop/clock.h"
#include "loop/dispatch.h"
#include "loop/driver.h"
#include "loop/event_loop.h"
#include "loop/virtual_port.h"
#include "transport/channel_set.h"
#include "transport/config.h"
#include "transport/schema_registry.h"

namespace tether::loop {

class SimulatedEventLoop;

struct SimulatedOptions {
  // Virtual monotonic time at start, and realtime = monotonic + offset.
  MonotonicTime start = MonotonicTime() + std::chrono::seconds(1);
  int64_t realtime_offset_ns = 1'700'000'000'000'000'000;
  // Folder for the private channel files (a fresh subfolder is made and
  // removed).
  std::string shm_root = "/dev/shm";
  // Every loop's callbacks run inside a RealtimeScope
  // (EventLoop::set_check_allocations): a node test that links
  // //loop:rt_alloc_check then aborts on any allocation in a callback.
  bool check_allocations = false;
};

// Not thread-safe: one thread builds loops and runs the simulation (and
// destroys the factory).
class SimulatedEventLoopFactory {
 public:
  // Creates every channel of `stack` in a private folder under
  // options.shm_root (errors name the channel, as ChannelSet's do). Setup;
  // allocates.
  static absl::StatusOr<std::unique_ptr<SimulatedEventLoopFactory>> Create(
      const transport::StackConfig& stack,
      const transport::SchemaRegistry& schemas,
      const SimulatedOptions& options = {});
  // Destroys every loop, then removes the channels and their folder.
  ~SimulatedEventLoopFactory();
  SimulatedEventLoopFactory(const SimulatedEventLoopFactory&) = delete;
  SimulatedEventLoopFactory& operator=(const SimulatedEventLoopFactory&) =
      delete;

  // A new node named `name`. The factory owns it; it lives as long as the
  // factory. Its on-run callbacks run at the start of the next RunUntil()
  // (or at the next iteration, when made from a callback). Setup; allocates.
  EventLoop* MakeEventLoop(const std::string& name);

  // Runs events until virtual time `end` (inclusive) or Exit(); the clock
  // ends at `end` unless exited earlier. Deterministic. Setup-free: no
  // allocation beyond what the nodes' callbacks do.
  void RunUntil(MonotonicTime end);
  // RunUntil(now() + d).
  void RunFor(Duration d) { RunUntil(clock_.Now() + d); }
  // Stops the current RunUntil() after the running callback.
  void Exit() { driver_.Exit(); }

  // Virtual monotonic time now.
  MonotonicTime now() const { return clock_.Now(); }
  // The simulation's channels (real tether queues in a private folder).
  const transport::ChannelSet& channels() const { return *channels_; }

 private:
  friend class SimulatedEventLoop;
  explicit SimulatedEventLoopFactory(const SimulatedOptions& options);

  SimulatedOptions options_;
  std::string root_;
  VirtualClock clock_;
  Dispatcher dispatcher_;
  VirtualPort port_;
  Driver driver_;
  std::unique_ptr<transport::ChannelSet> channels_;
  std::vector<std::unique_ptr<SimulatedEventLoop>> loops_;
};

}  // namespace tether::loop

#endif  // TETHER_LOOP_SIMULATED_EVENT_LOOP_H_
