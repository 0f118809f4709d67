// tools: `tether launch` as a library. Starts a multi-process stack from its
// config: creates every channel up front, starts the nodes in startAfter
// order (each with its scheduling, CPUs, user and environment, see
// tools/node_process.h), prefixes their output with "[node] ", restarts them
// by policy with exponential backoff, publishes the stack's state, and stops
// them in reverse start order.
//
// Channels are created by the launcher, before any node starts, so a node
// never fails for a missing channel. Creating a channel needs its type's
// schema (the channel stores it, so tools can decode it): the launcher knows
// the types its binary links (tools/builtin_schemas.h: the demo messages and
// its own status) plus any CodeGeneratorRequest files given as
// LaunchOptions::schema_files (`capnp compile -o- my.capnp > my.schema`).
// The trade-off: a stack whose types are in neither fails at load with an
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
#include "shm/channel.h"
#include "transport/schema_registry.h"

namespace tether::tools {

// The channel the launcher publishes its status on (LauncherStatus, see
// tools/launcher_status.capnp). A stack may not declare it.
inline constexpr char kLauncherStatusChannel[] = "/tether/launcher/status";

struct LaunchOptions {
  // The stack config (JSON, see transport/config.capnp).
  std::string stack_path;
  // Where channels are created (root, instance).
  shm::ChannelOptions channels;
  // Extra schemas: files holding a stream-framed CodeGeneratorRequest
  // (`capnp compile -o- x.capnp > x.schema`); every struct in them becomes a
  // type channels may carry.
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

enum class NodeState {
  kPending,   // Not started yet: waits for the nodes in its startAfter.
  kStarting,  // Forked; its program not executed yet (see node_process.h).
  kRunning,   // Its program runs.
  kBackoff,   // Ended; restarts when its backoff delay is over.
  kStopping,  // Sent SIGTERM (then SIGKILL) by the shutdown.
  kExited,    // Ended with code 0; its restart policy does not restart it.
  kFailed,    // Ended abnormally, not restarted (policy, or gave up).
  kStopped,   // Stopped by the shutdown (or never started before it).
  kBlocked,   // Never started: a node in its startAfter failed to start.
};

// "pending", "running", ... Any thread; RT-safe.
std::string_view NodeStateName(NodeState state);

// How a node's last run ended.
struct ExitInfo {
  enum class Kind { kNone, kCode, kSignal, kStartFailed };
  Kind kind = Kind::kNone;
  int value = 0;        // Exit code or signal number.
  std::string message;  // Why the start failed (kStartFailed).

  bool success() const { return kind == Kind::kCode && value == 0; }
};

// "exit code 1", "signal 9 (SIGKILL)", "start failed: ...", "none".
// Any thread; allocates.
std::string DescribeExit(const ExitInfo& exit);

struct NodeStatus {
  std::string name;
  NodeState state = NodeState::kPending;
  pid_t pid = 0;          // While starting, running or stopping, else 0.
  uint32_t restarts = 0;  // Restarts so far (the first start not counted).
  uint32_t starts = 0;    // Starts that executed the program.
  ExitInfo last_exit;
};

struct StackStatus {
  enum class Phase { kRunning, kStopping, kStopped };
  Phase phase = Phase::kRunning;
  pid_t launcher_pid = 0;
  std::string stack_path;  // Absolute.
  std::string root;
  std::string instance;
  std::vector<NodeStatus> nodes;  // In config order.
};

// "running", "stopping", "stopped". Any thread; RT-safe.
std::string_view PhaseName(StackStatus::Phase phase);

// The status as one JSON object: {"launcher_pid", "stack", "root",
// "instance", "phase", "time_unix_ms", "nodes": [{"name", "state", "pid"
// (null when not running), "restarts", "starts", "last_exit": null |
// {"code"} | {"signal", "signal_name"} | {"start_error"}}]}.
// Any thread; allocates.
std::string FormatStatusJson(const StackStatus& status);

// The closing table: one line per node with state, pid, restarts and last
// exit. Any thread; allocates.
std::string FormatSummary(const StackStatus& status);

// One launch of a stack. Not thread-safe: one thread creates it and calls
// Run(); that thread must live until Run() returns (Linux ties each node's
// parent-death signal to it). Not copyable or movable.
class Launcher {
 public:
  // Loads and validates the stack (with `schemas` plus options.schema_files
  // as known types), checks every node (command found and executable, user
  // exists, startAfter), then creates every channel and the status channel.
  // Any error is returned before a single node starts, naming the file and
  // field or the node and what to fix (InvalidArgument, NotFound, ...).
  // Config warnings and the channels created are reported on `err` / `out`,
  // which must outlive the launcher. Setup; blocks on file and shm I/O.
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
