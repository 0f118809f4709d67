// tools: starting one node process for the launcher. fork(); the parent
// applies the node's scheduling, nice value and CPUs to the child while the
// child waits; then the child switches user, arms its parent-death signal and
// execs (the child side is tools/node_child.h). Every failure comes back as a
// message that says what to do.
//
// Process model (documented here because the launcher relies on it):
// - Each node is the leader of its own process group (setpgid). A Ctrl-C on
//   the terminal reaches the launcher only, which then stops the nodes in
//   reverse start order; the launcher signals a node's whole group, so a
//   node's own children (a shell script's commands) are stopped with it.
// - Each node has PR_SET_PDEATHSIG(SIGKILL): if the launcher dies (even by
//   SIGKILL) the node dies too. The signal is armed right after fork (then
//   getppid() is checked, for a launcher that died before that) and again
//   after the user switch, which clears it. It reaches the node process
//   itself, not processes the node forks: a node that forks must arm its own
//   (or exec, as `sh -c '...; exec prog'` does).
// - Linux ties the parent-death signal to the *thread* that forked: call
//   SpawnNodeProcess from a thread that outlives the node (the launcher's
//   main thread).
#ifndef TETHER_TOOLS_NODE_PROCESS_H_
#define TETHER_TOOLS_NODE_PROCESS_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "loop/realtime.h"

namespace tether::tools {

// An owned file descriptor, closed on destruction. Move-only.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { Reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void Reset();

 private:
  int fd_ = -1;
};

// The account a node runs as, looked up once (LookUpUser) so the child only
// makes syscalls.
struct UserAccount {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // Supplementary groups, from /etc/group.
  std::string home;
};

// Everything needed to start one node, prepared before fork.
struct NodeProcessSpec {
  std::string name;  // The node's name, for messages.
  // Absolute path of the program (see ResolveCommand) and its argv
  // (argv[0] is the command as configured).
  std::string path;
  std::vector<std::string> argv;
  std::vector<std::string> env;  // "NAME=value", the complete environment.
  std::string working_directory;
  std::optional<UserAccount> user;  // Unset: the launcher's user.

  loop::SchedPolicy policy = loop::SchedPolicy::kOther;
  int priority = 0;       // 1..99 for kFifo/kRoundRobin.
  int nice = 0;           // For kOther.
  std::vector<int> cpus;  // Empty: any CPU.
  // True: a scheduling/nice/CPU setting that cannot be applied fails the
  // start. False: it becomes a warning and the node runs anyway.
  bool realtime_required = false;
};

// A started node. The fds are non-blocking and close-on-exec.
struct NodeProcess {
  pid_t pid = 0;  // Also its process group id.
  Fd pidfd;       // Readable once the process has exited (pidfd_open).
  Fd stdout_fd;   // Read ends of the node's stdout and stderr.
  Fd stderr_fd;
  // Readable once the child has executed its program or failed to (see
  // ReadStartReport); reset by ReadStartReport when decided.
  Fd start_report;
  // Settings that could not be applied (best effort), each with its fix.
  std::vector<std::string> warnings;
  // What was applied, for the progress line, e.g. "SCHED_FIFO 80, CPUs 1".
  std::string applied;
};

// Forks `spec`'s process, applies its real-time settings and lets it go on
// to switch user and exec; returns without waiting for the exec (a child of
// high real-time priority may not run for a while; the launcher must not
// hang on it). stdin is /dev/null; stdout and stderr are pipes to the
// caller. Errors, with the child already reaped: FailedPrecondition when a
// required real-time setting cannot be applied (or the CPUs are not
// available); ResourceExhausted/Internal for fork, pipes, pidfd. Call it
// from a thread that outlives the node (see above). Forks: safe in a
// multithreaded process (the child only makes async-signal-safe calls).
// Does not block; allocates; not RT-safe.
absl::StatusOr<NodeProcess> SpawnNodeProcess(const NodeProcessSpec& spec);

enum class StartOutcome {
  kPending,   // Not decided yet: poll start_report.
  kExecuted,  // The program runs.
  kFailed,    // It did not: *error says why; the child exits with 127.
};

// Reads the child's start report (NodeProcess::start_report, which must be
// valid) without blocking; resets `start_report` once decided. kFailed sets
// *error to the step that failed and the fix: PermissionDenied for a refused
// user switch, NotFound / PermissionDenied / FailedPrecondition for the exec or
// the working directory. The caller reaps the child as for any exit.
// Caller's thread; does not block; allocates only for the error.
StartOutcome ReadStartReport(const NodeProcessSpec& spec, Fd& start_report,
                             absl::Status* error);

// Looks `name` up in the user database. NotFound if there is no such user.
// Setup only; allocates; reads /etc/passwd and /etc/group (NSS).
absl::StatusOr<UserAccount> LookUpUser(const std::string& name);

// The program `command` runs: a command with a '/' is a path, relative to
// `working_directory`; a bare name is looked up in `path_variable` (a PATH
// value; empty: /usr/local/bin:/usr/bin:/bin). NotFound / PermissionDenied
// say what was tried and how to fix it. Setup only; allocates.
absl::StatusOr<std::string> ResolveCommand(const std::string& command,
                                           const std::string& working_directory,
                                           const std::string& path_variable);

// "SIGKILL" for 9, "signal 64" for an unnamed one. Any thread; allocates.
std::string SignalName(int signal);

}  // namespace tether::tools

#endif  // TETHER_TOOLS_NODE_PROCESS_H_
