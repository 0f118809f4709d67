// tools: what `tether launch` is asked to do -- the stack, where its
// channels go, the nodes' environment and working directory, how to stop
// and how to report. Filled by main() (tools/tether.cc) or a test; read by
// the plan (tools/launch_plan.h) and the launcher (tools/launcher.h).
#ifndef TETHER_TOOLS_LAUNCH_OPTIONS_H_
#define TETHER_TOOLS_LAUNCH_OPTIONS_H_

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "shm/channel.h"

namespace tether::tools {

struct LaunchOptions {
  // The stack config (JSON, see transport/config.capnp).
  std::string stack_path;
  // Where channels are created (root, instance).
  shm::ChannelOptions channels;
  // Extra schema files (`tether launch --schemas`), besides the stack's own
  // "schemas": .capnp sources or compiled CodeGeneratorRequests (`capnp
  // compile -o- x.capnp > x.schema`), see transport/schema_file.h; every
  // struct in them becomes a type channels may carry. Relative to the
  // launcher's current directory.
  std::vector<std::string> schema_files;
  // The nodes' working directory (and base of relative commands); empty:
  // the launcher's current directory.
  std::string working_directory;
  // The environment every node starts from ("NAME=value"); main() passes
  // its own.
  std::vector<std::string> base_env;
  // Stop the stack after this long; unset: run until stop_fd or until every
  // node has ended.
  std::optional<std::chrono::milliseconds> duration;
  // At shutdown, SIGKILL a node this long after its SIGTERM.
  std::chrono::milliseconds kill_timeout{2000};
  // A run at least this long resets the backoff doubling.
  std::chrono::milliseconds stable_run{10000};
  // Readable when the stack must stop (loop::StopSignals::fd()); -1: none.
  // Never read: it may stay readable.
  int stop_fd = -1;
  // Write the stack's status as JSON to this file (replaced atomically) on
  // every change and every status_period; empty: none.
  std::string status_json_path;
  // Publish LauncherStatus on kLauncherStatusChannel.
  bool status_channel = true;
  std::chrono::milliseconds status_period{1000};
};

}  // namespace tether::tools

#endif  // TETHER_TOOLS_LAUNCH_OPTIONS_H_
