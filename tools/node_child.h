// tools internal: the child side of SpawnNodeProcess (tools/node_process.h),
// what runs between fork and exec -- its own process group, the
// parent-death signal, default signal dispositions, waiting for the parent
// to apply scheduling and CPUs, stdio, the user switch, the working
// directory, exec -- and the report it sends back through a close-on-exec
// pipe when a step fails (nothing arrives when the exec succeeds).
#ifndef TETHER_TOOLS_NODE_CHILD_H_
#define TETHER_TOOLS_NODE_CHILD_H_

#include <sys/types.h>

#include <cstddef>

namespace tether::tools::internal {

// The step of the child that failed.
enum class ChildStage : int {
  kGo = 1,  // Waiting for the parent's go (it died, or the socket failed).
  kStdio,
  kSetgroups,
  kSetgid,
  kSetuid,
  kDeathSignal,
  kChdir,
  kExec,
};

// Written in one write(2) of a few bytes (atomic on a pipe), then the child
// exits with kChildExitFailed.
struct ChildReport {
  ChildStage stage;
  int error;  // errno of the failed step.
};

// Exit codes of a child that could not run its program.
inline constexpr int kChildExitFailed = 127;
inline constexpr int kChildExitParentGone = 126;

// The child's inputs, as plain pointers into memory prepared before fork:
// the child must not allocate.
struct ChildArgs {
  pid_t parent = 0;   // The launcher, for the parent-death race check.
  int null_fd = -1;   // /dev/null, the node's stdin.
  int stdout_w = -1;  // Write ends of the output pipes.
  int stderr_w = -1;
  int report_w = -1;   // Write end of the start report pipe.
  int go_child = -1;   // The child's end of the go socket.
  int go_parent = -1;  // The parent's end (closed in the child).
  const char* path = nullptr;
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  const char* working_directory = nullptr;  // "" keeps the launcher's.
  bool switch_user = false;
  uid_t uid = 0;
  gid_t gid = 0;
  const gid_t* groups = nullptr;
  size_t group_count = 0;
};

// Runs in the child right after fork and never returns: it execs `a.path`
// or reports the failed step on `a.report_w` and _exits. Async-signal-safe
// calls only (no allocation, no locks): other threads of the launcher may
// have held locks at the fork. Expects every signal blocked (it restores
// default dispositions, then unblocks them).
[[noreturn]] void RunChild(const ChildArgs& a);

}  // namespace tether::tools::internal

#endif  // TETHER_TOOLS_NODE_CHILD_H_
