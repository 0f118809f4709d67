#include "tools/package_binary.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "tools/cli.h"

namespace tether::tools {

std::span<const PackageBinary> PackageBinaries() {
  static constexpr PackageBinary kBinaries[] = {
      {"ros-bridge", "ros_bridge/ros_bridge", "//ros_bridge:ros_bridge"},
      {"replay", "ros_bridge/ros_bag", "//ros_bridge:ros_bag", ".bag"},
  };
  return kBinaries;
}

std::string PackageBinaryPath(std::string_view path) {
  std::error_code ec;
  const std::filesystem::path self =
      std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  // <bazel-bin>/tools/tether -> <bazel-bin>/<path>
  return (self.parent_path().parent_path() / std::string(path)).string();
}

std::optional<int> MaybeExecPackageBinary(std::span<const std::string> args,
                                          std::ostream& err) {
  if (args.empty()) return std::nullopt;
  for (const PackageBinary& b : PackageBinaries()) {
    if (args[0] != b.command) continue;
    if (!b.argument_suffix.empty() &&
        std::none_of(args.begin() + 1, args.end(), [&](const std::string& a) {
          return a.size() >= b.argument_suffix.size() &&
                 a.compare(a.size() - b.argument_suffix.size(),
                           b.argument_suffix.size(), b.argument_suffix) == 0;
        })) {
      continue;
    }
    const std::filesystem::path binary = PackageBinaryPath(b.path);
    if (binary.empty() || ::access(binary.c_str(), X_OK) != 0) {
      err << "tether " << b.command << ": " << binary.string()
          << " is not built; run it as ./tether " << b.command
          << " (which builds it) or: bazel build " << b.target << "\n";
      return kExitFailure;
    }
    std::vector<std::string> owned(args.begin(), args.end());
    owned[0] = binary.string();
    std::vector<char*> argv;
    for (std::string& a : owned) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(binary.c_str(), argv.data());
    err << "tether " << b.command << ": cannot run " << binary.string() << ": "
        << std::strerror(errno) << "\n";
    return kExitFailure;
  }
  return std::nullopt;
}

}  // namespace tether::tools
