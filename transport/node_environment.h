// transport: the contract between the launcher and the node processes it
// starts. Four environment variables tell a node which stack it belongs to
// and where its channels are; the launcher writes them
// (NodeEnvironmentVariables) and a node's main() reads them
// (ReadNodeEnvironment, through an injected getenv: libraries never read the
// environment themselves). The names are spelled here and nowhere else.
#ifndef TETHER_TRANSPORT_NODE_ENVIRONMENT_H_
#define TETHER_TRANSPORT_NODE_ENVIRONMENT_H_

#include <functional>
#include <string>
#include <vector>

#include "shm/channel.h"

namespace tether::transport {

// The channel root directory (absolute), e.g. /dev/shm/tether.
inline constexpr char kEnvRoot[] = "TETHER_ROOT";
// The stack instance: the folder under the root that holds its channels.
inline constexpr char kEnvInstance[] = "TETHER_INSTANCE";
// The node's name in the stack (its entry in the config's "nodes").
inline constexpr char kEnvNode[] = "TETHER_NODE";
// The stack config file (absolute), for loading the stack and its channels.
inline constexpr char kEnvStack[] = "TETHER_STACK";

// Where a node process finds its stack and channels.
struct NodeEnvironment {
  std::string node_name;
  std::string config_path;  // The stack file.
  // root and instance; the other fields keep their defaults.
  shm::ChannelOptions channels;
};

// An environment lookup: the value of `name`, or nullptr when it is unset.
// main() passes ::getenv; tests pass a lookup in a map.
using GetEnvFunction = std::function<const char*(const char* name)>;

// Reads the four variables through `getenv`. An unset or empty variable
// takes its default: `default_node_name`, `default_config_path`, and
// shm::ChannelOptions' root and instance. Thread: as `getenv` (::getenv is
// not safe against a concurrent setenv); allocates; not RT-safe.
NodeEnvironment ReadNodeEnvironment(const GetEnvFunction& getenv,
                                    const std::string& default_node_name,
                                    const std::string& default_config_path);

struct EnvVariable {
  std::string name;
  std::string value;
};

// The variables that hand `environment` to a node: TETHER_ROOT,
// TETHER_INSTANCE, TETHER_NODE, TETHER_STACK, in that order. A relative
// root or config path is made absolute against the current directory (a
// node may run in another one). Any thread; allocates; not RT-safe.
std::vector<EnvVariable> NodeEnvironmentVariables(
    const NodeEnvironment& environment);

}  // namespace tether::transport

#endif  // TETHER_TRANSPORT_NODE_ENVIRONMENT_H_
