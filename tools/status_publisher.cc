#include "tools/status_publisher.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "capnp/message.h"
#include "transport/config.capnp.h"

namespace tether::tools {
namespace {

namespace fs = std::filesystem;

// The status channel's shape: fixed, so every launcher of an instance
// agrees on it. 16 KiB holds the status of about 150 nodes.
constexpr uint32_t kStatusMaxSize = 16384;
constexpr uint32_t kStatusQueueDepth = 4;

wire::NodeState WireState(NodeState state) {
  switch (state) {
    case NodeState::kPending:
      return wire::NodeState::PENDING;
    case NodeState::kStarting:
      return wire::NodeState::STARTING;
    case NodeState::kRunning:
      return wire::NodeState::RUNNING;
    case NodeState::kBackoff:
      return wire::NodeState::BACKOFF;
    case NodeState::kStopping:
      return wire::NodeState::STOPPING;
    case NodeState::kExited:
      return wire::NodeState::EXITED;
    case NodeState::kFailed:
      return wire::NodeState::FAILED;
    case NodeState::kStopped:
      return wire::NodeState::STOPPED;
    case NodeState::kBlocked:
      return wire::NodeState::BLOCKED;
  }
  return wire::NodeState::PENDING;
}

}  // namespace

transport::config::Channel::Reader StatusPublisher::ChannelConfig(
    transport::SchemaRegistry* schemas, capnp::MessageBuilder* message) {
  if (!schemas->Find(capnp::typeId<wire::LauncherStatus>()).has_value()) {
    schemas->Register<wire::LauncherStatus>();
  }
  auto c = message->initRoot<transport::config::Channel>();
  c.setName(kLauncherStatusChannel);
  c.setType(schemas->NameOf(capnp::typeId<wire::LauncherStatus>()));
  c.setMaxSize(kStatusMaxSize);
  c.setFrequencyHz(1);
  c.setQueueDepth(kStatusQueueDepth);
  // One publisher: a second launcher of the instance is refused.
  c.setMaxPublishers(1);
  c.setMaxPinned(4);
  c.setMode("0664");
  return c.asReader();
}

absl::StatusOr<std::unique_ptr<StatusPublisher>> StatusPublisher::Create(
    const StatusPublisherOptions& options, transport::ChannelHandle* channel,
    WarnFn warn) {
  std::unique_ptr<StatusPublisher> publisher(
      new StatusPublisher(options, channel, std::move(warn)));
  if (!options.channel) return publisher;
  absl::StatusOr<std::unique_ptr<transport::Publisher<wire::LauncherStatus>>>
      pub = transport::Publisher<wire::LauncherStatus>::Create(channel);
  if (!pub.ok()) {
    if (absl::IsResourceExhausted(pub.status())) {
      return absl::FailedPreconditionError(absl::StrCat(
          "another launcher is running stack instance \"",
          options.channels.instance, "\" under ", options.channels.root,
          " (it publishes ", kLauncherStatusChannel,
          "); stop it first, or pick another --instance"));
    }
    return pub.status();
  }
  publisher->publisher_ = std::move(*pub);
  return publisher;
}

void StatusPublisher::Publish(const StackStatus& status) {
  if (!options_.json_path.empty()) {
    const std::string tmp =
        absl::StrCat(options_.json_path, ".tmp.", ::getpid());
    {
      std::ofstream file(tmp, std::ios::trunc);
      file << FormatStatusJson(status);
    }
    std::error_code ec;
    fs::rename(tmp, options_.json_path, ec);
    if (ec && !json_warned_) {
      json_warned_ = true;
      warn_(absl::StrCat("cannot write the status file ", options_.json_path,
                         ": ", ec.message()));
    }
  }
  if (publisher_ == nullptr) return;
  transport::Loan<wire::LauncherStatus> loan = publisher_->MakeLoan();
  if (!loan.valid()) {
    (void)StopIfCorrupt();  // else every slot is pinned: try next time
    return;
  }
  wire::LauncherStatus::Builder root = loan.root();
  root.setTimeNs(std::chrono::duration_cast<std::chrono::nanoseconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count());
  root.setLauncherPid(status.launcher_pid);
  root.setStackFile(status.stack_path);
  root.setPhase(status.phase == StackStatus::Phase::kRunning
                    ? wire::LauncherStatus::Phase::RUNNING
                : status.phase == StackStatus::Phase::kStopping
                    ? wire::LauncherStatus::Phase::STOPPING
                    : wire::LauncherStatus::Phase::STOPPED);
  auto list = root.initNodes(static_cast<unsigned>(status.nodes.size()));
  for (size_t i = 0; i < status.nodes.size(); ++i) {
    const NodeStatus& n = status.nodes[i];
    auto b = list[static_cast<unsigned>(i)];
    b.setName(n.name);
    b.setPid(n.pid);
    b.setState(WireState(n.state));
    b.setRestarts(n.restarts);
    b.setStarts(n.starts);
    b.setLastExitValue(n.last_exit.value);
    switch (n.last_exit.kind) {
      case ExitInfo::Kind::kNone:
        b.setLastExit(wire::NodeStatus::ExitKind::NONE);
        break;
      case ExitInfo::Kind::kCode:
        b.setLastExit(wire::NodeStatus::ExitKind::CODE);
        break;
      case ExitInfo::Kind::kSignal:
        b.setLastExit(wire::NodeStatus::ExitKind::SIGNAL);
        break;
      case ExitInfo::Kind::kStartFailed:
        b.setLastExit(wire::NodeStatus::ExitKind::START_FAILED);
        b.setLastError(n.last_exit.message);
        break;
    }
  }
  const transport::PublishResult sent = publisher_->Send(std::move(loan));
  if (sent.status == transport::PublishStatus::kTooLarge) {
    warn_(absl::StrCat("the stack's status does not fit ",
                       kLauncherStatusChannel, " (",
                       publisher_->last_finish().ErrorMessage(),
                       "); no longer publishing it there"));
    publisher_.reset();
    return;
  }
  if (sent.status != transport::PublishStatus::kOk) (void)StopIfCorrupt();
}

bool StatusPublisher::StopIfCorrupt() {
  if (channel_ == nullptr || !channel_->corrupt()) return false;
  warn_(std::string(channel_
                        ->CorruptionError(
                            "the launcher no longer publishes the stack's "
                            "status there (the nodes run on)")
                        .message()));
  publisher_.reset();
  return true;
}

}  // namespace tether::tools
