#include "tools/stack_status.h"

#include <sys/wait.h>

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tools/node_process.h"
#include "util/json_writer.h"

namespace tether::tools {

std::string_view NodeStateName(NodeState state) {
  switch (state) {
    case NodeState::kPending:
      return "pending";
    case NodeState::kStarting:
      return "starting";
    case NodeState::kRunning:
      return "running";
    case NodeState::kBackoff:
      return "backoff";
    case NodeState::kStopping:
      return "stopping";
    case NodeState::kExited:
      return "exited";
    case NodeState::kFailed:
      return "failed";
    case NodeState::kStopped:
      return "stopped";
    case NodeState::kBlocked:
      return "blocked";
  }
  return "?";
}

std::string_view PhaseName(StackStatus::Phase phase) {
  switch (phase) {
    case StackStatus::Phase::kRunning:
      return "running";
    case StackStatus::Phase::kStopping:
      return "stopping";
    case StackStatus::Phase::kStopped:
      return "stopped";
  }
  return "?";
}

std::string DescribeExit(const ExitInfo& exit) {
  switch (exit.kind) {
    case ExitInfo::Kind::kNone:
      return "none";
    case ExitInfo::Kind::kCode:
      return absl::StrCat("exit code ", exit.value);
    case ExitInfo::Kind::kSignal:
      return absl::StrCat("signal ", exit.value, " (", SignalName(exit.value),
                          ")");
    case ExitInfo::Kind::kStartFailed:
      return absl::StrCat("start failed: ", exit.message);
  }
  return "?";
}

std::string FormatStatusJson(const StackStatus& status) {
  util::JsonWriter json;
  json.BeginObject();
  json.Key("launcher_pid").Int(status.launcher_pid);
  json.Key("stack").String(status.stack_path);
  json.Key("root").String(status.root);
  json.Key("instance").String(status.instance);
  json.Key("phase").String(PhaseName(status.phase));
  json.Key("time_unix_ms")
      .Int(std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
               .count());
  json.Key("nodes").BeginArray();
  for (const NodeStatus& node : status.nodes) {
    json.BeginObject();
    json.Key("name").String(node.name);
    json.Key("state").String(NodeStateName(node.state));
    json.Key("pid");
    if (node.pid != 0) {
      json.Int(node.pid);
    } else {
      json.Null();
    }
    json.Key("restarts").Uint(node.restarts);
    json.Key("starts").Uint(node.starts);
    json.Key("last_exit");
    switch (node.last_exit.kind) {
      case ExitInfo::Kind::kNone:
        json.Null();
        break;
      case ExitInfo::Kind::kCode:
        json.BeginObject().Key("code").Int(node.last_exit.value).EndObject();
        break;
      case ExitInfo::Kind::kSignal:
        json.BeginObject()
            .Key("signal")
            .Int(node.last_exit.value)
            .Key("signal_name")
            .String(SignalName(node.last_exit.value))
            .EndObject();
        break;
      case ExitInfo::Kind::kStartFailed:
        json.BeginObject()
            .Key("start_error")
            .String(node.last_exit.message)
            .EndObject();
        break;
    }
    json.EndObject();
  }
  json.EndArray();
  json.EndObject();
  return json.str() + "\n";
}

std::string FormatSummary(const StackStatus& status) {
  struct Row {
    std::string name, state, pid, restarts, exit;
  };
  std::vector<Row> rows = {{"NODE", "STATE", "PID", "RESTARTS", "LAST EXIT"}};
  for (const NodeStatus& n : status.nodes) {
    std::string exit = DescribeExit(n.last_exit);
    if (n.last_exit.kind == ExitInfo::Kind::kStartFailed) {
      exit = "start failed (see above)";
    }
    rows.push_back({n.name, std::string(NodeStateName(n.state)),
                    n.pid != 0 ? absl::StrCat(n.pid) : "-",
                    absl::StrCat(n.restarts),
                    n.last_exit.kind == ExitInfo::Kind::kNone ? "-" : exit});
  }
  size_t w[4] = {0, 0, 0, 0};
  for (const Row& r : rows) {
    w[0] = std::max(w[0], r.name.size());
    w[1] = std::max(w[1], r.state.size());
    w[2] = std::max(w[2], r.pid.size());
    w[3] = std::max(w[3], r.restarts.size());
  }
  std::string out;
  for (const Row& r : rows) {
    absl::StrAppend(
        &out, absl::StrFormat(
                  "%-*s  %-*s  %*s  %*s  %s\n", static_cast<int>(w[0]), r.name,
                  static_cast<int>(w[1]), r.state, static_cast<int>(w[2]),
                  r.pid, static_cast<int>(w[3]), r.restarts, r.exit));
  }
  return out;
}

ExitInfo ExitFromWaitStatus(int status) {
  ExitInfo exit;
  if (WIFEXITED(status)) {
    exit.kind = ExitInfo::Kind::kCode;
    exit.value = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    exit.kind = ExitInfo::Kind::kSignal;
    exit.value = WTERMSIG(status);
  }
  return exit;
}

}  // namespace tether::tools
