// transport: every channel of a stack, created (or opened) up front from its
// config so nothing is created while running. Event loops look channels up
// here by name; the launcher creates them before any node starts.
#ifndef TETHER_TRANSPORT_CHANNEL_SET_H_
#define TETHER_TRANSPORT_CHANNEL_SET_H_

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "shm/channel.h"
#include "transport/channel_handle.h"
#include "transport/config.h"
#include "transport/schema_registry.h"

namespace tether::transport {

// Not copyable or movable. Lookups: any thread once built.
class ChannelSet {
 public:
  // Creates or opens every channel of `stack` under `options`. A stack whose
  // new channels do not fit together in the root's free space is refused
  // before any is created (ResourceExhausted: needed, free, how to make
  // room). The first error (naming the channel) stops it. Setup only.
  static absl::StatusOr<std::unique_ptr<ChannelSet>> Create(
      const shm::ChannelOptions& options, const StackConfig& stack,
      const SchemaRegistry& schemas);

  ChannelSet(const ChannelSet&) = delete;
  ChannelSet& operator=(const ChannelSet&) = delete;

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
};

}  // namespace tether::transport

#endif  // TETHER_TRANSPORT_CHANNEL_SET_H_
