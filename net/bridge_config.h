// net: the net bridge's options — which channels cross the network in which
// direction with which DDS QoS, and the DDS domain, partition and the one
// interface it may use — loaded from its own JSON config file
// (bridge_config.capnp documents every field), plus the Cyclone DDS XML
// configuration derived from them.
#ifndef TETHER_NET_BRIDGE_CONFIG_H_
#define TETHER_NET_BRIDGE_CONFIG_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace tether::net {

enum class Direction { kOut, kIn };
enum class Reliability { kDefault, kReliable, kBestEffort };
const char* ToString(Direction direction);
const char* ToString(Reliability reliability);

struct BridgedChannel {
  std::string name;
  Direction direction = Direction::kOut;
  // kDefault: reliable for out; as the sender announces for in.
  Reliability reliability = Reliability::kDefault;
  // DDS KEEP_LAST depth; 0: the channel's queue depth (capped at
  // kMaxHistoryDepth) for out, the sender's for in.
  uint32_t history_depth = 0;
  // 0: none (for in: the sender's).
  double deadline_ms = 0;
};

inline constexpr uint32_t kMaxHistoryDepth = 1024;
inline constexpr uint32_t kMaxDomainId = 230;

struct DdsOptions {
  uint32_t domain = 0;
  std::string partition = "tether";
  // The only interface DDS may use. Loopback unless one is named.
  std::string interface = "lo";
  std::vector<std::string> peers;  // unicast discovery when non-empty
  bool multicast = true;
  double lease_seconds = 3;
  double announce_seconds = 1;
};

struct BridgeOptions {
  std::string name = "net-bridge";
  DdsOptions dds;
  std::vector<BridgedChannel> channels;
};

// Reads and validates the bridge config at `path`. NotFound if it cannot be
// read; InvalidArgument listing every problem, one per line, as
// "<path>: <field path>: what is wrong; what would be valid". Setup only.
absl::StatusOr<BridgeOptions> LoadBridgeConfig(const std::string& path);
// The same for JSON text; `origin` names it in errors.
absl::StatusOr<BridgeOptions> ParseBridgeConfig(std::string_view json,
                                                const std::string& origin);
// The checks LoadBridgeConfig makes, for options built in code.
absl::Status ValidateBridgeOptions(const BridgeOptions& options,
                                   const std::string& origin);

// The Cyclone DDS configuration (an XML fragment for dds_create_domain) for
// `dds`: only dds.interface; multicast off on loopback or with peers (then
// unicast discovery to the peers, or to this host on loopback); the lease
// and SPDP interval; iceoryx shared memory off; Cyclone's own log to stderr
// at severe level (its warnings repeat every SPDP interval while a link is
// down; the bridge's status says that instead). The values were validated (no XML escaping needed).
std::string CycloneConfigXml(const DdsOptions& dds);

// True when `interface` is a loopback interface name ("lo", "lo0").
bool IsLoopback(std::string_view interface);

}  // namespace tether::net

#endif  // TETHER_NET_BRIDGE_CONFIG_H_
