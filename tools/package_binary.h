// tools: commands whose code lives in a package the CLI may not depend on
// (ros_bridge/ has ROS headers): `tether <command>` execs that package's
// binary, found next to this one in Bazel's output tree
// (<bazel-bin>/tools/tether -> <bazel-bin>/<package>/<binary>).
#ifndef TETHER_TOOLS_PACKAGE_BINARY_H_
#define TETHER_TOOLS_PACKAGE_BINARY_H_

#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>

namespace tether::tools {

struct PackageBinary {
  std::string_view command;  // "ros-bridge"
  std::string_view path;     // under bazel-bin: "ros_bridge/ros_bridge"
  std::string_view target;   // to build it: "//ros_bridge:ros_bridge"
  // Only when one of the arguments ends with this (`tether replay IN.bag`
  // is a ROS bag's; other replays are not); empty: always.
  std::string_view argument_suffix = {};
};

// The commands run this way.
std::span<const PackageBinary> PackageBinaries();

// Where the binary at `path` (under bazel-bin, "ros_bridge/ros_json") is
// for this process: beside this binary's own package folder, from
// /proc/self/exe. Empty if /proc/self/exe cannot be read. Any thread.
std::string PackageBinaryPath(std::string_view path);

// If args[0] names a package command (and an argument has its suffix),
// execs its binary with args[1..]
// (never returns on success). If the binary is missing or exec fails,
// prints what to build on `err` and returns the exit code. nullopt: not a
// package command. Main thread only.
std::optional<int> MaybeExecPackageBinary(std::span<const std::string> args,
                                          std::ostream& err);

}  // namespace tether::tools

#endif  // TETHER_TOOLS_PACKAGE_BINARY_H_
