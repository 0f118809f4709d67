// tools: `tether launch` as a library. Starts a multi-process stack from its
// config: creates every channel up front, starts the nodes in startAfter
// order (each with its scheduling, CPUs, user and environment, see
// tools/node_process.h), prefixes their output with "[node] "
// (tools/output_forwarder.h), restarts them by policy with exponential
// backoff, publishes the stack's state (tools/stack_status.h,
// tools/status_publisher.h), and stops them in reverse start order. The
// preparation -- message types, the stack, each node's process -- is
// tools/launch_plan.h; this file is the supervisor.
//
// Channels are created by the launcher, before any node starts, so a node
// never fails for a missing channel. Creating a channel needs its type's
// schema (the channel stores it, so tools can decode it): the launcher
// learns the types from the schema files the stack names (its "schemas"),
// from LaunchOptions::schema_files, and from the channels already there
// (see tools/launch_plan.h); it links none of the stack's types. The
// trade-off: a stack whose types are in none of them fails at load with an
// error naming the type, rather than letting nodes create their channels
// (which would make channel shape and existence depend on start order).
//
// Nodes learn their name, their stack file and where their channels are
// from the environment variables of transport/node_environment.h (the root
// and instance of LaunchOptions::channels, the node's name, the stack file).
// These override the node's configured env; everything else is inherited
// from LaunchOptions::base_env, then the node's env.
//
// Start order: a node starts once every node in its startAfter has
// executed its program (there is no readiness protocol); the launcher never
// blocks on one node, so a node starved before its exec delays only the
// nodes after it.
//
// Processes: each node leads its own process group and dies with the
// launcher (PR_SET_PDEATHSIG, see tools/node_process.h). Signals go to the
// node's whole group; when a node exits, whatever it left in its group is
// SIGKILLed, so no process outlives its node unsupervised.
//
// Restart backoff: the n-th restart in a row waits min(backoffMs * 2^(n-1),
// maxBackoffMs); a run that lasted at least LaunchOptions::stable_run starts
// the doubling over. maxRestarts counts every restart of the launch.
#ifndef TETHER_TOOLS_LAUNCHER_H_
#define TETHER_TOOLS_LAUNCHER_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/launch_options.h"
#include "tools/stack_status.h"
#include "tools/status_publisher.h"
#include "transport/schema_registry.h"

namespace tether::tools {

// One launch of a stack. Not thread-safe: one thread creates it and calls
// Run(); that thread must live until Run() returns (Linux ties each node's
// parent-death signal to it). Not copyable or movable.
class Launcher {
 public:
  // Loads and validates the stack (with `schemas`, if given, and the
  // sources of tools/launch_plan.h as known types), checks every node (command
  // found and executable, user exists, startAfter), then creates every channel
  // and the status channel. Any error is returned before a single node starts,
  // naming the file and field or the node and what to fix (InvalidArgument,
  // NotFound, ...). Config warnings and the channels created are reported on
  // `err` / `out`, which must outlive the launcher. Setup; blocks on file and
  // shm I/O.
  static absl::StatusOr<std::unique_ptr<Launcher>> Create(
      LaunchOptions options, std::unique_ptr<transport::SchemaRegistry> schemas,
      std::ostream& out, std::ostream& err);

  Launcher(const Launcher&) = delete;
  Launcher& operator=(const Launcher&) = delete;
  // SIGKILLs and reaps any node still running (only if Run() did not finish).
  ~Launcher();

  // Starts the nodes and supervises them until options.stop_fd becomes
  // readable, options.duration passes, or every node has ended for good;
  // then stops the running ones in reverse start order (SIGTERM to the
  // node's process group, SIGKILL after kill_timeout). Prints each start,
  // exit, restart and stop on `out` as it happens, the nodes' output
  // prefixed with "[name] " (stdout to `out`, stderr to `err`), warnings,
  // failed starts and given-up nodes on `err`, and a summary table on `out`
  // at the end. Returns the final status. Call once. Blocks; allocates.
  struct Result {
    StackStatus status;
    bool stop_requested = false;  // stop_fd or duration ended it.
    // 0, or 1 when a node failed for good or never started (kFailed,
    // kBlocked).
    int exit_code = 0;
  };
  Result Run();

  // The current status; launcher thread only (e.g. from on_change).
  StackStatus status() const;

  // Called on the launcher thread after every state change (and before Run()
  // returns) with the new status. For tests and embedding; must not call
  // back into the launcher except status().
  void set_on_change(std::function<void(const StackStatus&)> on_change);

 private:
  class Impl;
  explicit Launcher(std::unique_ptr<Impl> impl);

  std::unique_ptr<Impl> impl_;
};

}  // namespace tether::tools

#endif  // TETHER_TOOLS_LAUNCHER_H_
