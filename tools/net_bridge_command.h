// tools: `tether net-bridge` — the net bridge lives in net/ (the only place
// DDS headers appear), so the CLI runs its binary, built next to this one
// (<bazel-bin>/net/net_bridge), by exec with the same arguments.
#ifndef TETHER_TOOLS_NET_BRIDGE_COMMAND_H_
#define TETHER_TOOLS_NET_BRIDGE_COMMAND_H_

#include <ostream>
#include <span>
#include <string>

#include "tools/arg_parser.h"

namespace tether::tools {

// The bridge binary's path, derived from /proc/self/exe.
std::string NetBridgePath();

// Replaces this process with the bridge binary and `args`; returns only on
// failure (after saying on `err` how to build it), with an exit code.
int ExecNetBridge(std::span<const std::string> args, std::ostream& err);

// For the command table (`tether --help`, `tether help net-bridge`).
ArgParser NetBridgeParser();
int RunNetBridgeCommand(const ParsedArgs& args, std::ostream& out,
                        std::ostream& err);

}  // namespace tether::tools

#endif  // TETHER_TOOLS_NET_BRIDGE_COMMAND_H_
