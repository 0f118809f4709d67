// ros_bridge: the bridge's conversations with the ROS master, all through
// XML-RPC calls that fail fast instead of waiting for an absent master (so
// no thread of the bridge hangs when the master is away): is it up and is it
// the same one, which topics exist and who publishes them, the registry of
// tether bridges (ROS parameters under /tether/bridges), and registering the
// bridge's topics again with a master that restarted. Needs ros::init().
#ifndef TETHER_ROS_BRIDGE_MASTER_LINK_H_
#define TETHER_ROS_BRIDGE_MASTER_LINK_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tether::ros_bridge {

// Which master answers: its pid and /run_id (a restarted master differs).
struct MasterIdentity {
  int pid = 0;
  std::string run_id;
  bool operator==(const MasterIdentity&) const = default;
};

struct TopicInfo {
  std::string type;
  std::vector<std::string> publishers;  // node names
  std::vector<std::string> subscribers;
};

// What one bridge says about itself in the registry.
struct BridgeRecord {
  std::string domain;  // tether side: "<host>:<root>/<instance>"
  std::string graph;
  int pid = 0;
};

// Calls go from whatever thread calls them; each is one XML-RPC round trip
// to the master (blocking, bounded by a short timeout). Not RT-safe.
class MasterLink {
 public:
  // `node` is this bridge's ROS node name.
  explicit MasterLink(std::string node) : node_(std::move(node)) {}

  // Unavailable when the master does not answer.
  absl::StatusOr<MasterIdentity> Identity() const;
  // Every topic with a publisher or a subscriber.
  absl::StatusOr<std::map<std::string, TopicInfo>> Topics() const;
  // A node's XML-RPC URI.
  absl::StatusOr<std::string> LookupNode(const std::string& name) const;

  // The registry: /tether/bridges/<node without '/'>.
  absl::Status Announce(const BridgeRecord& me) const;
  void Withdraw() const;
  // The record of bridge node `node`, nullopt if it is not a bridge.
  absl::StatusOr<std::optional<BridgeRecord>> FindBridge(
      const std::string& node) const;
  absl::StatusOr<std::map<std::string, BridgeRecord>> AllBridges() const;

  // Registers a publication / subscription of this node (after a master
  // restart). RegisterSubscriber returns the publishers' URIs.
  absl::Status RegisterPublisher(const std::string& topic,
                                 const std::string& type) const;
  absl::StatusOr<std::vector<std::string>> RegisterSubscriber(
      const std::string& topic, const std::string& type) const;

  // Tells this node's roscpp the publishers of `topic` (what the master's
  // publisherUpdate call does: roscpp connects to new ones and drops the
  // ones not listed), through this node's own XML-RPC server.
  absl::Status UpdatePublishers(const std::string& topic,
                                const std::vector<std::string>& uris) const;

  // The graph's id: the ROS parameter /tether/graph (GraphName of a random
  // number). NotFound when it is absent (a new master, or one that
  // restarted: parameters live in the master), InvalidArgument when it is
  // not a graph id, Unavailable when the master does not answer.
  absl::StatusOr<uint64_t> GraphParam() const;
  absl::Status SetGraphParam(uint64_t id) const;

  const std::string& node() const { return node_; }

 private:
  std::string node_;
};

// A ROS graph's id, which is also the origin tag (shm::SendTimes::origin)
// of every message a bridge takes from that graph into tether: a bridge
// never publishes into its graph a message with its graph's id, whichever
// bridges (and net bridges) carried it since. Never 0 (0 is "made by a
// tether node").
//
// Where it comes from: the first bridge that joins a master and finds no
// /tether/graph parameter sets it to a new random id (NewGraphId); every
// other bridge of that graph reads it. The master's URI cannot serve: each
// host spells and resolves it its own way (localhost on the robot, the
// robot's address on a laptop: one graph, two ids, and the loop goes on),
// and two robots whose masters are both 127.0.0.1:11311 are two graphs with
// one URI (one robot's bridge would drop the other's messages). After a
// master restart the parameter is gone; bridges that ran before set again
// the id they had, so the id outlives the master's run.
//
// Two bridges that find it absent at once both set it: each reads it back
// at its next check and both keep the one written last. Until then (one
// discovery period, only at a new master's first join) each tags with its
// own.
uint64_t NewGraphId();
// 16 lowercase hex digits: the parameter's value, an envelope's origin
// graph, the status's graph.
std::string GraphName(uint64_t id);
// The inverse of GraphName; nullopt for anything else (also an older
// bridge's "host:port", and 0).
std::optional<uint64_t> ParseGraphName(absl::string_view name);

// The id a bridge uses until its master first answers (no ROS traffic can
// reach it before that): a hash of the master's URI as this bridge was
// given it ("http://localhost:11311/" -> FNV-1a 64 of "ros1 127.0.0.1:11311",
// the host resolved to an address), never 0.
uint64_t ProvisionalGraphId(const std::string& master_uri);

// Registry key for a node name ("/a/b" -> "a__b").
std::string RegistryKey(const std::string& node);

}  // namespace tether::ros_bridge

#endif  // TETHER_ROS_BRIDGE_MASTER_LINK_H_
