// ros_bridge (internal): the bridge's state and the pieces it is made of,
// shared by the files that implement Bridge (bridge.h says what the bridge
// does). Only bridge*.cc include this.
//   bridge.cc          setup (Init, the routes and their channels), the main
//                      loop (Run, Tick), the status channel, shutdown;
//   bridge_master.cc   the master link: joining, losing and re-joining the
//                      master, registering everything again, subscribing,
//                      discovery under prefixes, "is this a bridge of ours";
//   bridge_forward.cc  forwarding, one direction each: ROS message -> slot
//                      (roscpp's threads), tether message -> outbox
//                      (watcher threads), outbox -> ROS (publisher thread).
#ifndef TETHER_ROS_BRIDGE_BRIDGE_IMPL_H_
#define TETHER_ROS_BRIDGE_BRIDGE_IMPL_H_

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ros/ros.h"
#include "ros_bridge/bridge.h"
#include "ros_bridge/bridge_options.h"
#include "ros_bridge/channel_watcher.h"
#include "ros_bridge/master_link.h"
#include "ros_bridge/outbox.h"
#include "ros_bridge/ros1msg/typed.h"
#include "topic_tools/shape_shifter.h"
#include "transport/channel_handle.h"
#include "transport/framing.h"
#include "transport/raw_endpoints.h"
#include "transport/schema_registry.h"

namespace tether::ros_bridge {
namespace internal {

using Clock = std::chrono::steady_clock;

// Per-route counters: written by the forwarding threads, read by the status.
struct Counters {
  std::atomic<uint64_t> forwarded{0};
  std::atomic<uint64_t> dropped_full{0};
  std::atomic<uint64_t> too_large{0};
  std::atomic<uint64_t> loop_skipped{0};
  std::atomic<uint64_t> malformed{0};
};

// Last error of a route, written by callback threads, read by status.
class ErrorText {
 public:
  void Set(std::string text) {
    std::lock_guard<std::mutex> lock(mu_);
    text_ = std::move(text);
  }
  std::string Get() const {
    std::lock_guard<std::mutex> lock(mu_);
    return text_;
  }

 private:
  mutable std::mutex mu_;
  std::string text_;
};

// ROS topic -> tether channel.
struct RosToTether {
  std::string ros_topic;
  std::string channel;
  const ros1msg::CommonType* typed = nullptr;
  std::unique_ptr<transport::ChannelHandle> handle;
  std::unique_ptr<transport::RawPublisher> publisher;
  std::unique_ptr<transport::BuildArena> arena;  // the publisher's
  ros::Subscriber subscriber;  // main thread only
  Counters counters;
  ErrorText error;
  // Callback thread only (roscpp serialises one subscription's callbacks).
  std::vector<uint8_t> scratch;
  std::map<std::string, std::vector<uint8_t>> last_latched;  // by callerid
};

// tether channel -> ROS topic.
struct TetherToRos {
  std::string channel;
  std::string ros_topic;
  const ros1msg::CommonType* typed = nullptr;
  bool latch = false;
  int outbox_topic = -1;
  std::unique_ptr<ChannelWatcher> watcher;
  Counters counters;
  ErrorText error;
  // Guarded by mu: the ROS publication (publisher thread; the main thread
  // advertises typed ones and registers them again).
  std::mutex mu;
  ros::Publisher publisher;
  std::string advertised_type;
  std::string advertised_md5;
  bool advertised_latch = false;
  topic_tools::ShapeShifter shape;  // publisher thread only
};

inline bool RosToTetherOn(Direction d) { return d != Direction::kTetherToRos; }
inline bool TetherToRosOn(Direction d) { return d != Direction::kRosToTether; }

}  // namespace internal

class Bridge::Impl {
 public:
  using RosToTether = internal::RosToTether;
  using TetherToRos = internal::TetherToRos;
  using Clock = internal::Clock;

  explicit Impl(BridgeOptions options)
      : options_(std::move(options)),
        outbox_(options_.outbox_depth == 0 ? 1 : options_.outbox_depth) {}

  ~Impl() { Shutdown(); }

  // --- bridge.cc: setup, main loop, status, shutdown ---

  // Bridge::Create's work: checks the pairs, initialises roscpp, adds the
  // configured routes, makes the status channel and starts the publisher
  // thread. Errors say what to fix. Main thread, once; allocates; does not
  // wait for the master.
  absl::Status Init();
  // Bridge::Run's loop: Tick() every discovery period, PublishStatus() every
  // status period, until the stop fd is readable; then Shutdown(). Main
  // thread; blocks.
  int Run();

 private:
  // Log lines ("ros-bridge: ...") on options_.log; Note also keeps the line
  // as the status's note. Any thread (serialised); allocate.
  void Log(const std::string& line) {
    if (options_.log == nullptr) return;
    std::lock_guard<std::mutex> lock(log_mu_);
    *options_.log << "ros-bridge: " << line << "\n";
    options_.log->flush();
  }
  void Note(const std::string& line) {
    {
      std::lock_guard<std::mutex> lock(note_mu_);
      note_ = line;
    }
    Log(line);
  }

  // Opens channel `name` as it is, or makes it with this shape.
  // FailedPrecondition (naming both types and the fix) if it exists with
  // another type. `asked`: the size and depth were set by the user (a
  // pair's max_size=/depth=, --max-size, --depth), so an existing channel
  // with smaller ones is logged with the fix. Main thread; allocates.
  absl::StatusOr<std::unique_ptr<transport::ChannelHandle>> OpenChannel(
      const std::string& name, uint64_t type_id, uint32_t max_size,
      uint32_t depth, bool asked = false);

  // Add a route (no-op if the topic / channel is already routed that way):
  // its channel, its publisher or watcher thread; the ROS subscription is
  // made later by SubscribePending. Errors name the channel and the fix.
  // Main thread only (routes are never removed while running); allocate.
  absl::Status AddRosToTether(const std::string& ros_topic,
                              const std::string& channel,
                              const std::string& type, uint32_t max_size,
                              uint32_t depth, bool asked = false);
  absl::Status AddTetherToRos(const std::string& channel,
                              const std::string& ros_topic,
                              const std::string& type, bool latch,
                              uint32_t max_size, uint32_t depth);

  // One period's master work: CheckMaster, then (master up)
  // SubscribePending and Discover. Main thread.
  void Tick();
  // Publishes one BridgeStatus (routes, counters, master state, note) on
  // the status channel, if there is one; a full channel skips it. Main
  // thread; allocates (in the builder's arena only).
  void PublishStatus();
  // Stops watchers, the publisher thread, roscpp; withdraws the bridge from
  // /tether/bridges. Idempotent. Main thread (or the destructor); blocks
  // until the threads have ended.
  void Shutdown();

  // --- bridge_master.cc: the master link ---

  // Asks the master who it is (never waits: MasterLink). Notes it going
  // away, coming back or being replaced (then RegisterAgain); on first
  // contact lists the bridge under /tether/bridges and advertises typed
  // routes. A bridge that has not yet read the graph's id (JoinGraph) does
  // nothing more: it stays "waiting" until it has. Main thread.
  void CheckMaster();
  // Reads the graph's id from the master (/tether/graph) and keeps it; sets
  // it when absent (this bridge's id from an earlier run of the master, or
  // a new one) or not an id. At every check while the master answers, so
  // bridges that set it at once agree by the next check; lists the bridge
  // again under /tether/bridges when the id changed. True when graph_ is
  // the master's id now; false when the master could not be read or
  // written (said at most every 5 s), and then a bridge that never joined
  // does not bridge yet (CheckMaster). Main thread.
  bool JoinGraph();
  // Lists this bridge (domain, graph id, pid) under /tether/bridges; logs
  // a failure. Main thread.
  void AnnounceSelf();
  // Lists this bridge's topics with a new master: publishers, subscribers
  // (keeping the publishers we already had). Failures go to the routes'
  // errors. Main thread.
  void RegisterAgain();
  // Subscribes routes that have no ROS subscription yet (a failure is
  // retried next tick). Main thread.
  void SubscribePending();
  // Advertises a typed tether -> ROS route at once (envelope routes wait
  // for their first message's type). Main thread; takes r->mu.
  void AdvertiseTyped(TetherToRos* r);
  // New topics and channels under the configured prefixes become routes;
  // refreshes the bridges of this domain (loop prevention) and the
  // publishers of our topics (for RegisterAgain). Main thread; calls the
  // master (never waits) and lists the instance's channels.
  void Discover();
  // Whether ROS node `callerid` is a bridge of this tether domain, cached
  // (a "no" for 2 s). roscpp callback threads; may ask the master (fails
  // fast when it is away: then "no").
  bool FromSameDomainBridge(const std::string& callerid);

  // --- bridge_forward.cc: forwarding, one direction each ---

  // A ROS message into its route's channel: skipped if it came from a
  // bridge of ours or repeats a latched message; built as a twin or an
  // envelope in a loaned slot (the ROS bytes written once, in place) and
  // sent. Drops (full, too large, malformed) are counted and the route's
  // error set; never waits. roscpp callback thread (one per subscription).
  void OnRosMessage(
      RosToTether* r,
      const ros::MessageEvent<topic_tools::ShapeShifter const>& event);
  // A tether message into the route's outbox topic (converted to ROS bytes
  // for twins): skipped if it came from this ROS graph (the message's
  // origin tag, also after a net bridge carried it; the envelope's origin
  // graph; our pid; a bridge of this graph); malformed ones counted. Never waits for ROS (a full topic
  // drops its oldest). The route's watcher thread; allocates.
  void OnTetherMessage(TetherToRos* r, const transport::RawMessage& m);
  // A message's origin tag or its envelope's origin graph (0: none) is this
  // ROS graph's id as it is now: ROS has the message already. Any thread.
  bool FromThisGraph(uint64_t origin, uint64_t origin_graph) const {
    const uint64_t graph = graph_.load(std::memory_order_relaxed);
    return origin == graph || origin_graph == graph;
  }
  // Publishes outbox items into ROS, advertising (again) when the type,
  // md5 or latching changes; starts only once the graph's id is known
  // (joined_graph_) and skips an item whose origin is this graph's by the
  // id as it is then. The publisher thread; ends once shut_down_.
  void PublisherThread();

  BridgeOptions options_;
  transport::SchemaRegistry schemas_;
  // The ROS graph's id (master_link.h): the origin tag of what this bridge
  // takes from ROS into tether and of what it never sends back into ROS.
  // Written by the main thread (Init, JoinGraph), read by every thread.
  std::atomic<uint64_t> graph_{0};
  // graph_ is the master's /tether/graph, not the provisional id.
  // Written by the main thread (JoinGraph, after graph_, release); read by
  // the publisher thread (acquire), which sends nothing into ROS before.
  std::atomic<bool> joined_graph_{false};
  std::string domain_;
  std::unique_ptr<MasterLink> link_;
  std::unique_ptr<ros::NodeHandle> nh_;
  std::unique_ptr<ros::AsyncSpinner> spinner_;

  // Routes: added by the main thread only; never removed while running.
  std::mutex routes_mu_;
  std::vector<std::unique_ptr<RosToTether>> to_tether_;
  std::vector<std::unique_ptr<TetherToRos>> to_ros_;
  std::vector<TetherToRos*> by_outbox_topic_;
  std::set<std::string> to_tether_channels_;  // made by this bridge
  std::map<std::string, RosToTether*> to_tether_by_topic_;
  std::map<std::string, TetherToRos*> to_ros_by_channel_;

  Outbox outbox_;
  std::thread publisher_thread_;
  std::atomic<bool> shut_down_{false};

  // Master state (main thread).
  bool master_up_ = false;
  bool ever_up_ = false;
  MasterIdentity identity_;
  uint32_t master_changes_ = 0;
  uint32_t reregistrations_ = 0;
  Clock::time_point waiting_since_ = Clock::now();
  Clock::time_point last_wait_log_{};
  // When JoinGraph last said each kind of trouble with /tether/graph.
  enum class GraphTrouble { kRead, kNotAnId, kSet };
  std::array<Clock::time_point, 3> last_graph_log_{};
  // Publisher URIs of the topics we subscribe (for registering again).
  std::map<std::string, std::set<std::string>> publisher_uris_;
  std::map<std::string, std::string> node_uris_;

  // Bridges of this tether domain, by node name (callback threads).
  std::mutex bridges_mu_;
  std::map<std::string, std::pair<bool, Clock::time_point>> bridge_cache_;

  std::unique_ptr<transport::ChannelHandle> status_handle_;
  std::unique_ptr<transport::RawPublisher> status_publisher_;
  std::unique_ptr<transport::BuildArena> status_arena_;

  std::mutex log_mu_;
  std::mutex note_mu_;
  std::string note_;
};

}  // namespace tether::ros_bridge

#endif  // TETHER_ROS_BRIDGE_BRIDGE_IMPL_H_
