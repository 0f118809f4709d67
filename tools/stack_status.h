// tools: a launched stack's status as data -- each node's state, pid,
// restarts and last exit, the stack's phase -- and its two renderings, the
// status JSON (`tether launch --status-json`) and the closing summary table.
// The launcher (tools/launcher.h) keeps it; tools/status_publisher.h
// publishes it.
#ifndef TETHER_TOOLS_STACK_STATUS_H_
#define TETHER_TOOLS_STACK_STATUS_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tether::tools {

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

// The ExitInfo of a waitpid() status: kCode or kSignal (kNone for a status
// that is neither). Any thread; RT-safe.
ExitInfo ExitFromWaitStatus(int wait_status);

}  // namespace tether::tools

#endif  // TETHER_TOOLS_STACK_STATUS_H_
