// loop: many event loops (nodes) in one process on a virtual clock. Events
// run in time order, equal times in the order they were scheduled, so a run
// is deterministic: the same calls give the same callbacks in the same order
// at the same virtual times. Channels are real tether channel queues (same
// depth and loss behaviour as between processes) in a private tmpfs folder
// that the factory removes. Used for node unit tests and deterministic log
// replay.
#ifndef TETHER_LOOP_SIMULATED_EVENT_LOOP_H_
#define TETHER_LOOP_SIMULATED_EVENT_LOOP_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "loop/clock.h"
#include "loop/dispatch.h"
#include "loop/event_loop.h"
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
};

// Not thread-safe: one thread builds loops and runs the simulation.
class SimulatedEventLoopFactory {
 public:
  // Creates every channel of `stack` in a private folder. Setup.
  static absl::StatusOr<std::unique_ptr<SimulatedEventLoopFactory>> Create(
      const transport::StackConfig& stack,
      const transport::SchemaRegistry& schemas,
      const SimulatedOptions& options = {});
  ~SimulatedEventLoopFactory();
  SimulatedEventLoopFactory(const SimulatedEventLoopFactory&) = delete;
  SimulatedEventLoopFactory& operator=(const SimulatedEventLoopFactory&) =
      delete;

  // A new node. The factory owns it; it lives as long as the factory.
  EventLoop* MakeEventLoop(const std::string& name);

  // Runs events until virtual time `end` (inclusive) or Exit(); the clock
  // ends at `end` unless exited earlier. On-run callbacks of loops made
  // since the last run go first.
  void RunUntil(MonotonicTime end);
  void RunFor(Duration d) { RunUntil(clock_.Now() + d); }
  // Stops the current RunUntil() after the running event.
  void Exit() { exit_ = true; }

  MonotonicTime now() const { return clock_.Now(); }
  const transport::ChannelSet& channels() const { return *channels_; }

 private:
  friend class SimulatedEventLoop;
  explicit SimulatedEventLoopFactory(const SimulatedOptions& options);
  // A send on `channel`: schedule every watcher of it for now.
  void MessageSent(transport::ChannelHandle* channel);

  SimulatedOptions options_;
  std::string root_;
  VirtualClock clock_;
  Dispatcher dispatcher_;
  std::unique_ptr<transport::ChannelSet> channels_;
  std::vector<std::unique_ptr<SimulatedEventLoop>> loops_;
  bool exit_ = false;
};

}  // namespace tether::loop

#endif  // TETHER_LOOP_SIMULATED_EVENT_LOOP_H_
