// tools: publishing a launched stack's status (tools/stack_status.h) where
// other programs can see it: as a LauncherStatus message on the channel
// /tether/launcher/status (tools/launcher_status.capnp; `tether echo` reads
// it), and as JSON in a file replaced atomically (--status-json).
#ifndef TETHER_TOOLS_STATUS_PUBLISHER_H_
#define TETHER_TOOLS_STATUS_PUBLISHER_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "capnp/message.h"
#include "shm/channel.h"
#include "tools/launcher_status.capnp.h"
#include "tools/stack_status.h"
#include "transport/channel_handle.h"
#include "transport/config.capnp.h"
#include "transport/schema_registry.h"
#include "transport/typed_endpoints.h"

namespace tether::tools {

// The channel the launcher publishes its status on (LauncherStatus, see
// tools/launcher_status.capnp). A stack may not declare it.
inline constexpr char kLauncherStatusChannel[] = "/tether/launcher/status";

struct StatusPublisherOptions {
  // Where the status channel is (root, instance).
  shm::ChannelOptions channels;
  // Publish on kLauncherStatusChannel.
  bool channel = true;
  // Also write the status as JSON to this file; empty: no file.
  std::string json_path;
};

// Not thread-safe: the launcher thread creates and uses it. Not copyable.
class StatusPublisher {
 public:
  // Prints a warning line (the launcher's err stream).
  using WarnFn = std::function<void(const std::string&)>;

  // The stack config entry of kLauncherStatusChannel, built in `message`:
  // a fixed shape so every launcher of an instance agrees on it, one
  // publisher so a second launcher of the same instance is refused.
  // Registers LauncherStatus in `schemas` if it is not there. The launcher
  // creates the channel with the stack's (transport::ChannelSet::Create's
  // `more`), so that it counts in the up-front space check and is taken
  // back with them. Setup; allocates.
  static transport::config::Channel::Reader ChannelConfig(
      transport::SchemaRegistry* schemas, capnp::MessageBuilder* message);

  // With options.channel, publishes on `channel`, the status channel made
  // from ChannelConfig, which must outlive the publisher (without it,
  // `channel` is unused and may be null). FailedPrecondition, saying so,
  // when another launcher publishes there. Setup; allocates.
  static absl::StatusOr<std::unique_ptr<StatusPublisher>> Create(
      const StatusPublisherOptions& options, transport::ChannelHandle* channel,
      WarnFn warn);
  StatusPublisher(const StatusPublisher&) = delete;
  StatusPublisher& operator=(const StatusPublisher&) = delete;

  // Writes the JSON file (if any) and sends the message (if the channel is
  // on). A status too large for the channel, or a channel found corrupt,
  // is warned about once and no longer sent there; a file that cannot be
  // written is warned about once.
  // Blocks on file I/O; allocates; not RT-safe.
  void Publish(const StackStatus& status);

 private:
  StatusPublisher(const StatusPublisherOptions& options,
                  transport::ChannelHandle* channel, WarnFn warn)
      : options_(options), channel_(channel), warn_(std::move(warn)) {}
  // True (and the publisher gone, the warning given) once the channel is
  // corrupt.
  bool StopIfCorrupt();

  const StatusPublisherOptions options_;
  transport::ChannelHandle* const channel_;  // null when options_.channel is off
  const WarnFn warn_;
  std::unique_ptr<transport::Publisher<wire::LauncherStatus>> publisher_;
  bool json_warned_ = false;
};

}  // namespace tether::tools

#endif  // TETHER_TOOLS_STATUS_PUBLISHER_H_
