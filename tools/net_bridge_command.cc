#include "tools/net_bridge_command.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "tools/cli.h"
#include "tools/package_binary.h"

namespace tether::tools {

std::string NetBridgePath() {
  std::string path = PackageBinaryPath("net/net_bridge");
  return path.empty() ? "net/net_bridge" : path;
}

int ExecNetBridge(std::span<const std::string> args, std::ostream& err) {
  const std::string path = NetBridgePath();
  std::vector<char*> argv;
  std::string name = "tether net-bridge";
  argv.push_back(name.data());
  std::vector<std::string> copy(args.begin(), args.end());
  for (std::string& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv(path.c_str(), argv.data());
  err << "tether net-bridge: cannot run " << path << ": "
      << std::strerror(errno)
      << (errno == ENOENT ? " (not built: run ./tether net-bridge, which "
                            "builds it, or bazel build //net:net_bridge)"
                          : "")
      << "\n";
  return kExitFailure;
}

ArgParser NetBridgeParser() {
  return ArgParser(
      "tether net-bridge",
      "Forwards chosen channels to and from other hosts over Cyclone DDS,\n"
      "as configured in a bridge config file. Runs the net bridge binary\n"
      "(net/net_bridge); `tether net-bridge --help` shows its options.");
}

int RunNetBridgeCommand(const ParsedArgs&, std::ostream&, std::ostream& err) {
  return ExecNetBridge({}, err);
}

}  // namespace tether::tools
