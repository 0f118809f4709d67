// ros_bridge: BridgeOptions from a JSON config file (bridge_config.capnp)
// and from command-line pair/prefix specs. ROS-independent.
#ifndef TETHER_ROS_BRIDGE_BRIDGE_CONFIG_H_
#define TETHER_ROS_BRIDGE_BRIDGE_CONFIG_H_

#include <string>

#include "absl/status/status.h"
#include "ros_bridge/bridge_options.h"

namespace tether::ros_bridge {

// Reads `path` into `options` (fields the file sets replace the ones there;
// pairs and prefixes are appended). Errors name the file and the field, and
// say what would be valid. Setup.
absl::Status LoadBridgeConfig(const std::string& path, BridgeOptions* options);

// "ROS=CHANNEL[,dir=both|to-tether|to-ros][,type=pkg/Name][,latch]
//  [,max_size=BYTES][,depth=N]" (CHANNEL empty: the ROS name). Appends to
// options->pairs or says what is wrong.
absl::Status AddPairSpec(const std::string& spec, BridgeOptions* options);
// "ROS_PREFIX=TETHER_PREFIX[,dir=...]".
absl::Status AddPrefixSpec(const std::string& spec, BridgeOptions* options);

// OK if roscpp can use `uri` as the ROS master's URI: "http://HOST:PORT",
// optionally followed by "/..." (roscpp ignores the path). HOST is a host
// name or IPv4 address (roscpp cuts the host at its first ':', so an IPv6
// literal cannot work); PORT is 1..65535. Else InvalidArgument saying what
// is wrong, what form is expected, and `origin` (where the URI came from:
// "--master", "ROS_MASTER_URI (environment)", "FILE: master"). roscpp
// itself aborts the process on a URI it cannot split. Any thread.
absl::Status CheckMasterUri(const std::string& uri, const std::string& origin);

// OK if ros::init takes `name` as a node name: a letter, then letters,
// digits and '_' (no namespace: ros::init refuses '/' and aborts the
// process on a name that is not a valid ROS name). Else InvalidArgument
// saying why, with `origin` ("--node-name", "FILE: nodeName"). Any thread.
absl::Status CheckNodeName(const std::string& name, const std::string& origin);

// Where a node finds its channels: $TETHER_ROOT and $TETHER_INSTANCE (the
// launcher sets them), else the defaults. For main() only (reads the
// environment).
shm::ChannelOptions ChannelOptionsFromEnvironment();

}  // namespace tether::ros_bridge

#endif  // TETHER_ROS_BRIDGE_BRIDGE_CONFIG_H_
