// ros_bridge: watching one tether channel from a thread of its own, for
// channels that appear while the bridge runs. Each watcher runs a
// UringEventLoop over a one-channel ChannelSet (loops take their channels up
// front; the bridge learns of channels as it goes), so a new channel never
// stops or restarts the others, and nothing sent on it after Start() is
// missed. ROS-independent.
#ifndef TETHER_ROS_BRIDGE_CHANNEL_WATCHER_H_
#define TETHER_ROS_BRIDGE_CHANNEL_WATCHER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "loop/uring_event_loop.h"
#include "shm/channel.h"
#include "transport/channel_set.h"
#include "transport/config.h"
#include "transport/raw_endpoints.h"
#include "transport/schema_registry.h"

namespace tether::ros_bridge {

// The shape of a channel (what a stack config entry says).
struct ChannelShape {
  std::string name;
  uint64_t type_id = 0;
  uint32_t max_size = 0;
  uint32_t queue_depth = 16;
  uint32_t max_publishers = 4;
  uint32_t max_pinned = 8;
  double frequency_hz = 0;
};

// A one-channel stack config for `shape` (so a ChannelSet can be made for
// it without a file of the user's). `schemas` must know the type. Setup.
absl::StatusOr<transport::StackConfig> OneChannelStack(
    const ChannelShape& shape, const transport::SchemaRegistry& schemas);

// The shape of the existing channel `name` (to open it as it is).
absl::StatusOr<ChannelShape> ShapeOf(const shm::ChannelOptions& options,
                                     const std::string& name);

class ChannelWatcher {
 public:
  // Called on the watcher's thread for every new message, read in place
  // (valid during the call). `latest_at_start` is called once, first, with
  // the channel's newest message from before Start() if there is one (a
  // latched message), before any new one.
  struct Callbacks {
    absl::AnyInvocable<void(const transport::RawMessage&)> on_message;
    absl::AnyInvocable<void(const transport::RawMessage&)> latest_at_start;
  };

  // Opens (or creates, with `shape`) the channel and starts the thread.
  // Returns once the watcher is subscribed: every message sent after that
  // is delivered. Errors name the channel. Setup; allocates.
  static absl::StatusOr<std::unique_ptr<ChannelWatcher>> Start(
      const shm::ChannelOptions& options, const ChannelShape& shape,
      const transport::SchemaRegistry& schemas, Callbacks callbacks);

  // Stops the loop and joins the thread. Not from the watcher's thread.
  ~ChannelWatcher();
  ChannelWatcher(const ChannelWatcher&) = delete;
  ChannelWatcher& operator=(const ChannelWatcher&) = delete;

  const std::string& channel() const { return shape_.name; }
  // Messages lost in the channel before this watcher read them (watcher
  // thread's count; read from any thread as a snapshot).
  uint64_t missed() const { return missed_.load(std::memory_order_relaxed); }

 private:
  ChannelWatcher() = default;

  ChannelShape shape_;
  std::unique_ptr<transport::StackConfig> stack_;
  std::unique_ptr<transport::ChannelSet> channels_;
  std::unique_ptr<loop::UringEventLoop> loop_;
  std::unique_ptr<transport::RawSubscriber> fetcher_;
  Callbacks callbacks_;
  bool has_latest_ = false;
  uint64_t latest_index_ = 0;
  std::atomic<uint64_t> missed_{0};
  std::thread thread_;
};

}  // namespace tether::ros_bridge

#endif  // TETHER_ROS_BRIDGE_CHANNEL_WATCHER_H_
