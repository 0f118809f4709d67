// transport: every channel of a stack, created (or opened) up front from its
// config so nothing is created while running. Event loops look channels up
// here by name; the launcher creates them before any node starts.
#ifndef TETHER_TRANSPORT_CHANNEL_SET_H_
#define TETHER_TRANSPORT_CHANNEL_SET_H_

#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "shm/channel.h"
#include "transport/channel_handle.h"
#include "transport/config.h"
#include "transport/schema_registry.h"

namespace tether::transport {

// Not copyable or movable. Lookups: any thread once built.
class ChannelSet {
 public:
  // Creates or opens every channel of `stack` under `options`, then those
  // of `more` (channels the caller adds to the stack's, such as the
  // launcher's status channel: validated entries whose messages outlive
  // the call; Find() finds them too), in an instance folder made for the
  // whole stack (FolderOptions). Channels that do not fit together in the
  // root's free space, each file counted as the whole blocks it takes
  // there, are refused before any is created (ResourceExhausted: needed,
  // free, how to make room). The first error (naming the channel) stops
  // it, and what this call made (channels and folders) is removed again:
  // a failed Create leaves things as they were. Setup only.
  static absl::StatusOr<std::unique_ptr<ChannelSet>> Create(
      const shm::ChannelOptions& options, const StackConfig& stack,
      const SchemaRegistry& schemas,
      std::span<const config::Channel::Reader> more = {});

  // The options the instance folder of `stack` is made with
  // (shm::Channel::MakeInstanceFolder decides its mode): `options` with the
  // modes of all the stack's channels' files together and the group of the
  // first channel that names one, so that the folder lets in the readers of
  // every channel and, when the group may publish on one, lets the group
  // create files. A stack without channels: `options`. Errors as
  // ChannelHandle::FileOptions's. Setup only.
  static absl::StatusOr<shm::ChannelOptions> FolderOptions(
      const shm::ChannelOptions& options, const StackConfig& stack);

  ChannelSet(const ChannelSet&) = delete;
  ChannelSet& operator=(const ChannelSet&) = delete;

  // For a caller whose setup failed after Create: closes every channel,
  // removes those Create made (unless another process has one open: then
  // it is theirs too) and the folders it made if they are empty. The set
  // is empty afterwards. Setup only.
  void Abandon();

  // The channel `name`, or NotFound listing the channels there are.
  absl::StatusOr<ChannelHandle*> Find(const std::string& name) const;
  const shm::ChannelOptions& options() const { return options_; }
  const std::map<std::string, std::unique_ptr<ChannelHandle>>& channels()
      const {
    return channels_;
  }

 private:
  ChannelSet() = default;
  shm::ChannelOptions options_;
  std::map<std::string, std::unique_ptr<ChannelHandle>> channels_;
  // What Create made, for Abandon: channel names, and folders outermost
  // first.
  std::vector<std::string> created_;
  std::vector<std::string> made_folders_;
};

}  // namespace tether::transport

#endif  // TETHER_TRANSPORT_CHANNEL_SET_H_
