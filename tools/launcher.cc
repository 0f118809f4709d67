#include "tools/launcher.h"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "capnp/message.h"
#include "shm/channel.h"
#include "tools/instance_lock.h"
#include "tools/launch_plan.h"
#include "tools/launcher_impl.h"
#include "tools/launcher_status.capnp.h"
#include "tools/node_process.h"
#include "tools/output_forwarder.h"
#include "transport/channel_set.h"

namespace tether::tools {
namespace {

namespace fs = std::filesystem;
using launcher_internal::Clock;
using launcher_internal::kSay;
using launcher_internal::Seconds;

std::string UserName(uid_t uid) {
  const passwd* pw = ::getpwuid(uid);
  return pw != nullptr ? absl::StrCat(pw->pw_name, " (uid ", uid, ")")
                       : absl::StrCat("uid ", uid);
}

// A launcher adopts the instance folder and channel files it finds only
// when they are its own user's (or root's): another user who made them
// first (the roots are sticky and open to all) could write every channel
// of the stack, and a launcher would run it on them without a word.
absl::Status CheckNoOtherOwner(const shm::ChannelOptions& options,
                               const std::vector<std::string>& names) {
  const uid_t self = ::geteuid();
  const auto foreign = [&](const std::string& path, const char* what,
                           const std::string& remedy) -> absl::Status {
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0 || st.st_uid == self ||
        st.st_uid == 0) {
      return absl::OkStatus();
    }
    return absl::PermissionDeniedError(absl::StrCat(
        what, path, " belongs to ", UserName(st.st_uid), ", not to you (",
        UserName(self), "): that user made it before this launch and can "
        "write the stack's channels. If the stack is theirs, launch it as "
        "them; if not, ", remedy, " and launch again"));
  };
  const std::string dir = (fs::path(options.root) / options.instance).string();
  if (absl::Status s = foreign(dir, "the instance folder ",
                               absl::StrCat("remove it (rm -r ", dir, ")"));
      !s.ok()) {
    return s;
  }
  for (const std::string& name : names) {
    const std::string path = shm::Channel::PathFor(options, name);
    if (absl::Status s = foreign(
            path, "the channel file ",
            absl::StrCat("remove it (`", shm::Channel::CleanCommand(options),
                         "` once nothing uses it)"));
        !s.ok()) {
      return absl::PermissionDeniedError(
          absl::StrCat("channel ", name, ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Launcher::Impl::Prepare() {
  // Its own status type, compiled in: it keeps that schema even when an
  // earlier run's status channel carries another.
  schemas_->Register<wire::LauncherStatus>();
  std::vector<std::string> warnings;
  absl::StatusOr<LaunchPlan> plan =
      PrepareLaunch(options_, schemas_.get(), &warnings);
  for (const std::string& w : warnings) Warn(w);
  if (!plan.ok()) return plan.status();
  plan_ = std::move(*plan);
  // The instance folder is made here, first: with the modes and group the
  // whole stack's channels need, as if its channels had made it.
  absl::StatusOr<shm::ChannelOptions> folder =
      transport::ChannelSet::FolderOptions(options_.channels, *plan_.stack);
  if (!folder.ok()) return folder.status();
  // Before anything is created: a second launcher of the instance touches
  // nothing.
  absl::StatusOr<InstanceLock> lock = InstanceLock::Acquire(*folder);
  if (!lock.ok()) return lock.status();
  lock_ = std::move(*lock);
  if (plan_.stack->FindChannel(kLauncherStatusChannel).has_value()) {
    lock_->Abandon();
    return absl::InvalidArgumentError(absl::StrCat(
        plan_.stack_path, ": channel ", kLauncherStatusChannel,
        " is the launcher's own status channel; rename the stack's channel"));
  }
  for (PlannedNode& planned : plan_.nodes) {
    Node& node = nodes_.emplace_back();
    node.name = planned.spec.name;
    node.spec = std::move(planned.spec);
    node.restart = planned.restart;
    node.after = std::move(planned.start_after);
  }
  absl::Status created = CreateChannels();
  // A stack refused (e.g. too big for the filesystem) leaves no trace.
  if (!created.ok()) lock_->Abandon();
  return created;
}

// Only now, with every node checked, is anything created.
absl::Status Launcher::Impl::CreateChannels() {
  // The status channel is made with the stack's: it counts in the up-front
  // space check, and a failure of either takes both back.
  capnp::MallocMessageBuilder status_config;
  std::vector<transport::config::Channel::Reader> more;
  if (options_.status_channel) {
    more.push_back(
        StatusPublisher::ChannelConfig(schemas_.get(), &status_config));
  }
  std::vector<std::string> names;
  for (const auto& c : plan_.stack->channels()) names.push_back(c.getName());
  for (const auto& c : more) names.push_back(c.getName());
  if (absl::Status s = CheckNoOtherOwner(options_.channels, names); !s.ok()) {
    return s;
  }
  absl::StatusOr<std::unique_ptr<transport::ChannelSet>> channels =
      transport::ChannelSet::Create(options_.channels, *plan_.stack, *schemas_,
                                    more);
  if (!channels.ok()) {
    return absl::Status(channels.status().code(),
                        absl::StrCat("creating the stack's channels: ",
                                     channels.status().message()));
  }
  // A channel left corrupt by an earlier run is refused, as one that is not
  // a channel at all is ("bad magic: remove it"), and not re-created here:
  // its nodes could not publish on it (and a sweep reclaims nothing from
  // it); the launcher removes no channel file itself, whoever might still
  // have it open (its instance lock keeps out other launchers, not tools
  // or nodes started by hand); and the file is the evidence of what went
  // wrong. `tether clean` removes it once it has checked that no live
  // process uses it, and the error says so.
  for (const auto& [name, handle] : (*channels)->channels()) {
    if (!handle->corrupt()) continue;
    const absl::Status corrupt = handle->CorruptionError(
        "the launcher does not start a stack on a corrupt channel");
    return absl::Status(corrupt.code(),
                        absl::StrCat("creating the stack's channels: ",
                                     corrupt.message()));
  }
  channels_ = std::move(*channels);
  transport::ChannelHandle* status_channel = nullptr;
  if (options_.status_channel) {
    absl::StatusOr<transport::ChannelHandle*> found =
        channels_->Find(kLauncherStatusChannel);
    if (!found.ok()) return found.status();  // Create made it: never.
    status_channel = *found;
  }
  absl::StatusOr<std::unique_ptr<StatusPublisher>> publisher =
      StatusPublisher::Create({options_.channels, options_.status_channel,
                               options_.status_json_path},
                              status_channel,
                              [this](const std::string& w) { Warn(w); });
  if (!publisher.ok()) {
    channels_->Abandon();
    channels_.reset();
    return publisher.status();
  }
  status_publisher_ = std::move(*publisher);
  const size_t count = plan_.stack->channels().size();
  size_t opened = 0;
  for (const auto& c : plan_.stack->channels()) {
    absl::StatusOr<transport::ChannelHandle*> h = channels_->Find(c.getName());
    if (h.ok() && !(*h)->created()) ++opened;
  }
  Say(absl::StrCat(
      "created ", count - opened, " channel", count - opened == 1 ? "" : "s",
      opened > 0 ? absl::StrCat(" and opened ", opened, " that existed") : "",
      " in ",
      (fs::path(options_.channels.root) / options_.channels.instance).string(),
      options_.status_channel
          ? absl::StrCat(" (and ", kLauncherStatusChannel, ")")
          : ""));
  return absl::OkStatus();
}

StackStatus Launcher::Impl::status() const {
  StackStatus status;
  status.phase = phase_;
  status.launcher_pid = ::getpid();
  status.stack_path = plan_.stack_path;
  status.root = options_.channels.root;
  status.instance = options_.channels.instance;
  for (const Node& node : nodes_) {
    NodeStatus& n = status.nodes.emplace_back();
    n.name = node.name;
    n.state = node.state;
    n.pid = node.pid;
    n.restarts = node.history.restarts;
    n.starts = node.starts;
    n.last_exit = node.last_exit;
  }
  return status;
}

void Launcher::Impl::Changed() {
  const StackStatus s = status();
  if (status_publisher_ != nullptr) status_publisher_->Publish(s);
  if (on_change) on_change(s);
}

bool Launcher::Impl::AllSettled() const {
  for (const Node& node : nodes_) {
    switch (node.state) {
      case NodeState::kPending:
      case NodeState::kStarting:
      case NodeState::kRunning:
      case NodeState::kBackoff:
      case NodeState::kStopping:
        return false;
      default:
        break;
    }
  }
  return true;
}

void Launcher::Impl::StartReadyNodes() {
  bool progress = true;
  while (progress) {
    progress = false;
    const Clock::time_point now = Clock::now();
    for (Node& node : nodes_) {
      if (node.state == NodeState::kBackoff && now >= node.restart_at) {
        Start(node);
        progress = true;
        continue;
      }
      if (node.state != NodeState::kPending) continue;
      bool ready = true;
      const Node* blocker = nullptr;
      for (size_t d : node.after) {
        const Node& dep = nodes_[d];
        if (dep.starts > 0) continue;
        ready = false;
        if (dep.state == NodeState::kFailed ||
            dep.state == NodeState::kBlocked) {
          blocker = &dep;
        }
      }
      if (blocker != nullptr) {
        node.state = NodeState::kBlocked;
        Say(absl::StrCat("not starting ", node.name, ": it starts after ",
                         blocker->name, ", which never started"));
        Changed();
        progress = true;
      } else if (ready) {
        Start(node);
        progress = true;
      }
    }
  }
}

void Launcher::Impl::Start(Node& node) {
  absl::StatusOr<NodeProcess> process = SpawnNodeProcess(node.spec);
  if (!process.ok()) {
    ExitInfo exit;
    exit.kind = ExitInfo::Kind::kStartFailed;
    exit.message = std::string(process.status().message());
    err_ << kSay << "cannot start " << exit.message << "\n" << std::flush;
    Ended(node, exit, Clock::duration::zero());
    return;
  }
  if (!node.warned) {
    for (const std::string& w : process->warnings) Warn(w);
    node.warned = true;
  }
  node.pid = process->pid;
  node.pidfd = std::move(process->pidfd);
  node.start_report = std::move(process->start_report);
  node.output[0] =
      OutputForwarder(std::move(process->stdout_fd), node.name, &out_);
  node.output[1] =
      OutputForwarder(std::move(process->stderr_fd), node.name, &err_);
  node.applied = process->applied;
  node.state = NodeState::kStarting;
  node.started_at = Clock::now();
  if (!node.in_start_order) {
    node.in_start_order = true;
    start_order_.push_back(static_cast<size_t>(&node - nodes_.data()));
  }
  Changed();
  CheckStart(node);
}

void Launcher::Impl::CheckStart(Node& node) {
  // Decided already: running, or a failure report waiting for the exit.
  if (node.state != NodeState::kStarting || !node.start_report.valid()) return;
  absl::Status error;
  switch (ReadStartReport(node.spec, node.start_report, &error)) {
    case StartOutcome::kPending:
      return;
    case StartOutcome::kFailed:
      // The child exits next; Reap() reports it as a failed start.
      node.start_error = std::string(error.message());
      return;
    case StartOutcome::kExecuted:
      break;
  }
  node.state = NodeState::kRunning;
  ++node.starts;
  Say(absl::StrCat(node.starts == 1 ? "started " : "restarted ", node.name,
                   " (pid ", node.pid,
                   node.applied.empty() ? "" : ", " + node.applied, ")"));
  Changed();
}

Launcher::Result Launcher::Impl::Run() {
  const Clock::time_point begin = Clock::now();
  const Clock::time_point deadline =
      options_.duration ? begin + *options_.duration : Clock::time_point::max();
  Clock::time_point next_tick = begin + options_.status_period;
  Changed();
  WaitOnce(begin);  // A stop that came during Create() starts nothing.
  std::string reason;
  while (true) {
    if (stop_requested_) {
      reason = "stop requested";
      break;
    }
    if (Clock::now() >= deadline) {
      reason =
          absl::StrCat("--duration ", Seconds(*options_.duration), " is over");
      break;
    }
    StartReadyNodes();
    if (AllSettled()) {
      Say("every node has ended");
      break;
    }
    Clock::time_point until = std::min(deadline, next_tick);
    for (const Node& node : nodes_) {
      if (node.state == NodeState::kBackoff) {
        until = std::min(until, node.restart_at);
      }
    }
    WaitOnce(until);
    const Clock::time_point now = Clock::now();
    if (now >= next_tick) {
      if (status_publisher_ != nullptr) status_publisher_->Publish(status());
      next_tick += options_.status_period;
      if (next_tick <= now) next_tick = now + options_.status_period;
    }
  }
  Result result;
  if (!reason.empty()) {
    result.stop_requested = true;
    Shutdown(reason);
  }
  phase_ = StackStatus::Phase::kStopped;
  Changed();
  result.status = status();
  for (const NodeStatus& node : result.status.nodes) {
    if (node.state == NodeState::kFailed || node.state == NodeState::kBlocked) {
      result.exit_code = 1;
    }
  }
  out_ << kSay << "summary after " << Seconds(Clock::now() - begin) << "\n"
       << FormatSummary(result.status) << std::flush;
  return result;
}

// ---------------------------------------------------------------------------

Launcher::Launcher(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Launcher::~Launcher() = default;

absl::StatusOr<std::unique_ptr<Launcher>> Launcher::Create(
    LaunchOptions options, std::unique_ptr<transport::SchemaRegistry> schemas,
    std::ostream& out, std::ostream& err) {
  if (schemas == nullptr) {
    schemas = std::make_unique<transport::SchemaRegistry>();
  }
  auto impl =
      std::make_unique<Impl>(std::move(options), std::move(schemas), out, err);
  if (absl::Status s = impl->Prepare(); !s.ok()) return s;
  return std::unique_ptr<Launcher>(new Launcher(std::move(impl)));
}

Launcher::Result Launcher::Run() { return impl_->Run(); }

StackStatus Launcher::status() const { return impl_->status(); }

void Launcher::set_on_change(
    std::function<void(const StackStatus&)> on_change) {
  impl_->on_change = std::move(on_change);
}

}  // namespace tether::tools
