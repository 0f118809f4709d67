// The launcher's exits and stops: what a node's exit leads to (its restart
// policy), reaping, waiting on the nodes' fds, and the stop sequence
// (reverse start order, SIGTERM, then SIGKILL).
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <utility>

#include "tools/launcher_impl.h"
#include "tools/node_process.h"
#include "tools/restart_policy.h"

namespace tether::tools {

using launcher_internal::kSay;
using launcher_internal::Millis;
using launcher_internal::Seconds;
using std::chrono::milliseconds;

Launcher::Impl::~Impl() {
  for (Node& node : nodes_) {
    if (node.pid == 0) continue;
    Signal(node, SIGKILL);
    int status = 0;
    while (::waitpid(node.pid, &status, 0) < 0 && errno == EINTR) {
    }
    node.pid = 0;
  }
}

void Launcher::Impl::Ended(Node& node, const ExitInfo& exit,
                           Clock::duration ran_for) {
  node.last_exit = exit;
  const bool failed = !exit.success();
  const RestartDecision decision = DecideRestart(
      node.restart, failed, exit.kind == ExitInfo::Kind::kStartFailed, ran_for,
      options_.stable_run, &node.history);
  const std::string what =
      exit.kind == ExitInfo::Kind::kStartFailed
          ? absl::StrCat(node.name, " could not start")
          : absl::StrCat(node.name, " exited with ", DescribeExit(exit),
                         " after ", Seconds(ran_for));
  const uint32_t restarts = node.history.restarts;
  const uint32_t max_restarts = node.restart.max_restarts;
  switch (decision.action) {
    case RestartDecision::Action::kDone:
      node.state = failed ? NodeState::kFailed : NodeState::kExited;
      Say(absl::StrCat(what, "; not restarted (restart policy ",
                       RestartPolicyName(node.restart.policy), ")"));
      break;
    case RestartDecision::Action::kGiveUp:
      node.state = NodeState::kFailed;
      Say(what);
      err_ << kSay << "giving up on node " << node.name << " after " << restarts
           << " restart" << (restarts == 1 ? "" : "s") << ": last "
           << DescribeExit(exit) << " (restart.maxRestarts is " << max_restarts
           << ")\n"
           << std::flush;
      break;
    case RestartDecision::Action::kRestart:
      node.restart_at = Clock::now() + decision.delay;
      node.state = NodeState::kBackoff;
      Say(absl::StrCat(
          what, "; restarting in ", Millis(decision.delay), " (restart ",
          restarts, max_restarts == 0 ? "" : absl::StrCat(" of ", max_restarts),
          ")"));
      break;
  }
  Changed();
}

void Launcher::Impl::Signal(Node& node, int sig) {
  // The node's whole process group; the node alone if it left its group.
  if (::kill(-node.pid, sig) != 0) ::kill(node.pid, sig);
}

void Launcher::Impl::Reap(Node& node) {
  // The node has exited but is not reaped yet, so its pid (= its process
  // group id) cannot be reused: clear out what it left in its group.
  ::kill(-node.pid, SIGKILL);
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(node.pid, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == 0) return;  // Not exited after all.
  ExitInfo exit = r > 0 ? ExitFromWaitStatus(status) : ExitInfo{};
  // It exited while starting: its report (complete now) says whether it
  // ran its program (and exited at once) or failed before.
  CheckStart(node);
  node.start_report.Reset();
  if (!node.start_error.empty()) {
    err_ << kSay << "cannot start " << node.start_error << "\n" << std::flush;
    exit = ExitInfo{ExitInfo::Kind::kStartFailed, 0,
                    std::exchange(node.start_error, "")};
  }
  const pid_t pid = node.pid;
  node.pid = 0;
  node.pidfd.Reset();
  for (OutputForwarder& output : node.output) output.Forward(/*final=*/true);
  const Clock::duration ran_for = Clock::now() - node.started_at;
  if (phase_ != StackStatus::Phase::kRunning) {
    node.last_exit = exit;
    node.state = NodeState::kStopped;
    Say(absl::StrCat("stopped ", node.name, " (pid ", pid, ") after ",
                     Seconds(ran_for), ": ", DescribeExit(exit)));
    Changed();
    return;
  }
  Ended(node, exit, ran_for);
}

void Launcher::Impl::WaitOnce(Clock::time_point until) {
  struct Source {
    Node* node;
    int what;  // 0/1: output, 2: pidfd, 3: start report, -1: stop fd.
  };
  std::vector<pollfd> fds;
  std::vector<Source> sources;
  if (options_.stop_fd >= 0 && !stop_requested_) {
    fds.push_back({options_.stop_fd, POLLIN, 0});
    sources.push_back({nullptr, -1});
  }
  for (Node& node : nodes_) {
    for (int k = 0; k < 2; ++k) {
      if (node.output[k].open()) {
        fds.push_back({node.output[k].fd(), POLLIN, 0});
        sources.push_back({&node, k});
      }
    }
    if (node.pidfd.valid()) {
      fds.push_back({node.pidfd.get(), POLLIN, 0});
      sources.push_back({&node, 2});
    }
    if (node.start_report.valid()) {
      fds.push_back({node.start_report.get(), POLLIN, 0});
      sources.push_back({&node, 3});
    }
  }
  const auto left = std::chrono::ceil<milliseconds>(until - Clock::now());
  const int timeout =
      static_cast<int>(std::clamp<int64_t>(left.count(), 0, INT_MAX));
  const int n = ::poll(fds.data(), fds.size(), timeout);
  if (n <= 0) return;
  // Starts and output first, so a node's last lines come before its exit.
  for (size_t i = 0; i < fds.size(); ++i) {
    if (fds[i].revents == 0) continue;
    const Source& s = sources[i];
    if (s.what == 0 || s.what == 1) {
      s.node->output[s.what].Forward(/*final=*/false);
    } else if (s.what == 3) {
      CheckStart(*s.node);
    } else if (s.what == -1) {
      stop_requested_ = true;
    }
  }
  for (size_t i = 0; i < fds.size(); ++i) {
    if (fds[i].revents != 0 && sources[i].what == 2 &&
        sources[i].node->pid != 0) {
      Reap(*sources[i].node);
    }
  }
}

void Launcher::Impl::Shutdown(const std::string& reason) {
  phase_ = StackStatus::Phase::kStopping;
  for (Node& node : nodes_) {
    if (node.state == NodeState::kPending ||
        node.state == NodeState::kBackoff) {
      node.state = NodeState::kStopped;
    }
  }
  size_t running = 0;
  for (const Node& node : nodes_) running += node.pid != 0 ? 1 : 0;
  Say(absl::StrCat(reason, ": stopping ", running, " node",
                   running == 1 ? "" : "s",
                   " in reverse start order (SIGTERM, then SIGKILL after ",
                   Seconds(options_.kill_timeout), ")"));
  Changed();
  for (auto it = start_order_.rbegin(); it != start_order_.rend(); ++it) {
    Node& node = nodes_[*it];
    if (node.pid == 0) continue;
    const pid_t pid = node.pid;
    Signal(node, SIGTERM);
    node.state = NodeState::kStopping;
    Changed();
    const Clock::time_point term_deadline =
        Clock::now() + options_.kill_timeout;
    while (node.pid == pid && Clock::now() < term_deadline) {
      WaitOnce(term_deadline);
    }
    if (node.pid != pid) continue;
    Say(absl::StrCat(node.name, " (pid ", pid, ") did not stop within ",
                     Seconds(options_.kill_timeout), ": sending SIGKILL"));
    Signal(node, SIGKILL);
    const Clock::time_point kill_deadline =
        Clock::now() + std::max<Clock::duration>(options_.kill_timeout,
                                                 std::chrono::seconds(5));
    while (node.pid == pid && Clock::now() < kill_deadline) {
      WaitOnce(kill_deadline);
    }
    if (node.pid == pid) {
      Warn(absl::StrCat(node.name, " (pid ", pid,
                        ") is still there after SIGKILL (stuck in the "
                        "kernel?); leaving it"));
    }
  }
}

}  // namespace tether::tools
