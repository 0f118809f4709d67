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

  const std::string& node() const { return node_; }

 private:
  std::string node_;
};

// "http://localhost:11311/" -> "127.0.0.1:11311" (host resolved to an
// address, so two spellings of one master give one graph id).
std::string GraphId(const std::string& master_uri);

// The origin tag (shm::SendTimes::origin) of the messages a bridge takes
// from ROS graph `graph` (a GraphId) into tether: a hash of it that every
// build and host computes alike (64-bit FNV-1a of "ros1 " + graph), never 0
// (0 is "made by a tether node"). A bridge never publishes into its graph a
// message with its graph's tag, whichever bridges carried it since.
uint64_t GraphOrigin(const std::string& graph);

// Registry key for a node name ("/a/b" -> "a__b").
std::string RegistryKey(const std::string& node);

}  // namespace tether::ros_bridge

#endif  // TETHER_ROS_BRIDGE_MASTER_LINK_H_
