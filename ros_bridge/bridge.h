// ros_bridge: the ROS 1 <-> tether bridge. It joins a ROS master as one ROS
// node and forwards, for configured pairs (ROS topic <-> tether channel, a
// direction) and for every topic under configured prefixes (also topics that
// appear while it runs), in both directions, with no compiled ROS types:
//
//   ROS -> tether   a generic (ShapeShifter) subscriber per topic, made at
//                   once (not when a publisher appears); each message is
//                   written straight into a tether slot, either as a
//                   RosEnvelope (the ROS bytes plus type, md5sum, full
//                   definition, latching, callerid, receive time, origin) or,
//                   for common types, as its Cap'n Proto twin (typed.h).
//   tether -> ROS   a watcher thread per channel copies each message into a
//                   bounded per-topic outbox; one publisher thread publishes
//                   them into ROS (advertised with the envelope's type, md5
//                   and definition; latched if the envelope says so). A slow
//                   ROS side drops the oldest queued message (counted); the
//                   tether side never waits for ROS.
//
// No echo: a message is never forwarded back to where it came from — not by
// this bridge (its own ROS callerid / its own process as tether publisher)
// and not by another tether bridge: envelopes carry the ROS graph they came
// from, and bridges list themselves under the ROS parameter /tether/bridges
// (so a bridge ignores ROS messages that a bridge of the same tether domain
// published).
//
// The master going away is survived (existing connections keep flowing; the
// status says so) and a restarted master gets every topic of the bridge
// registered again; see master_link.h.
//
// Threads: Run()'s (discovery, master checks, status), roscpp's spinner
// threads (ROS -> tether), one per tether -> ROS channel, one ROS publisher.
#ifndef TETHER_ROS_BRIDGE_BRIDGE_H_
#define TETHER_ROS_BRIDGE_BRIDGE_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "ros_bridge/bridge_options.h"

namespace tether::ros_bridge {

class Bridge {
 public:
  // Initialises roscpp (once per process; the node is named
  // options.node_name, the master is options.master_uri), makes the
  // tether channels of the configured pairs (or opens them) and starts the
  // threads. A master that is not up yet is waited for in Run(), with
  // progress. Errors say what to fix (bad pair, channel of another type).
  static absl::StatusOr<std::unique_ptr<Bridge>> Create(BridgeOptions options);
  ~Bridge();
  Bridge(const Bridge&) = delete;
  Bridge& operator=(const Bridge&) = delete;

  // Bridges until the stop fd is readable. Returns a process exit code.
  int Run();

  class Impl;

 private:
  explicit Bridge(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tether::ros_bridge

#endif  // TETHER_ROS_BRIDGE_BRIDGE_H_
