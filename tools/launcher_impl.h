// The launcher's implementation, shared by its two files: launcher.cc
// (preparing the stack, starting nodes, the run loop) and
// launcher_exits.cc (a node's exit, restarts, and the stop sequence).
// Private to //tools:launcher.
#ifndef TETHER_TOOLS_LAUNCHER_IMPL_H_
#define TETHER_TOOLS_LAUNCHER_IMPL_H_

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tools/instance_lock.h"
#include "tools/launch_plan.h"
#include "tools/launcher.h"
#include "tools/node_process.h"
#include "tools/output_forwarder.h"
#include "tools/restart_policy.h"
#include "tools/stack_status.h"
#include "transport/channel_set.h"

namespace tether::tools {
namespace launcher_internal {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

inline constexpr const char* kSay = "launch: ";

inline std::string Seconds(Clock::duration d) {
  return absl::StrFormat("%.2f s", std::chrono::duration<double>(d).count());
}

inline std::string Millis(milliseconds d) {
  return absl::StrCat(d.count(), " ms");
}

}  // namespace launcher_internal

class Launcher::Impl {
  using Clock = launcher_internal::Clock;
 public:
  Impl(LaunchOptions options,
       std::unique_ptr<transport::SchemaRegistry> schemas, std::ostream& out,
       std::ostream& err)
      : options_(std::move(options)),
        schemas_(std::move(schemas)),
        out_(out),
        err_(err) {}
  ~Impl();

  absl::Status Prepare();
  Result Run();
  StackStatus status() const;
  std::function<void(const StackStatus&)> on_change;

 private:
  struct Node {
    std::string name;
    NodeProcessSpec spec;
    RestartRule restart;
    std::vector<size_t> after;  // startAfter, as indices.

    NodeState state = NodeState::kPending;
    pid_t pid = 0;
    Fd pidfd;
    Fd start_report;          // While kStarting.
    std::string start_error;  // The child's report of a failed start.
    std::string applied;      // Real-time settings applied, for messages.
    bool in_start_order = false;
    OutputForwarder output[2];  // stdout, stderr
    RestartHistory history;
    uint32_t starts = 0;
    ExitInfo last_exit;
    Clock::time_point started_at;
    Clock::time_point restart_at;
    bool warned = false;
  };

  void Say(const std::string& line) {
    out_ << launcher_internal::kSay << line << "\n" << std::flush;
  }
  void Warn(const std::string& line) {
    err_ << launcher_internal::kSay << "warning: " << line << "\n" << std::flush;
  }

  absl::Status CreateChannels();
  void StartReadyNodes();
  void Start(Node& node);
  // Reads a starting node's start report; on success it is running.
  void CheckStart(Node& node);
  void Ended(Node& node, const ExitInfo& exit, Clock::duration ran_for);
  void Reap(Node& node);
  void Shutdown(const std::string& reason);
  void Signal(Node& node, int sig);
  bool AllSettled() const;
  // Waits for output, exits or the stop fd until `until`, and handles them.
  void WaitOnce(Clock::time_point until);
  void Changed();

  LaunchOptions options_;
  std::unique_ptr<transport::SchemaRegistry> schemas_;
  std::ostream& out_;
  std::ostream& err_;
  LaunchPlan plan_;
  std::optional<InstanceLock> lock_;  // Held for the launcher's life.
  std::unique_ptr<transport::ChannelSet> channels_;
  std::unique_ptr<StatusPublisher> status_publisher_;
  std::vector<Node> nodes_;
  std::vector<size_t> start_order_;  // Indices, in order of first start.
  StackStatus::Phase phase_ = StackStatus::Phase::kRunning;
  bool stop_requested_ = false;
};

}  // namespace tether::tools

#endif  // TETHER_TOOLS_LAUNCHER_IMPL_H_
