// net: the bridge's side of tether channels on its own host — what a sending
// bridge says about a channel (ChannelDescription), checking that against the
// channel this host has or creating the channel from it, and the ChannelSet
// of the channels the bridge forwards out (opened as they are).
#ifndef TETHER_NET_LOCAL_CHANNELS_H_
#define TETHER_NET_LOCAL_CHANNELS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "shm/channel.h"
#include "transport/channel_handle.h"
#include "transport/channel_set.h"
#include "transport/schema_registry.h"

namespace tether::net {

// A channel as one host has it: what the sender announces and the receiver
// compares. `where` names the side in errors ("bridge base on host robot1").
struct ChannelDescription {
  std::string name;
  std::string where;
  uint64_t type_id = 0;
  std::string type_name;
  uint64_t schema_hash = 0;
  std::vector<std::byte> schema;  // CodeGeneratorRequest (stream framed)
  uint32_t max_size = 0;
  double frequency_hz = 0;
  uint32_t queue_depth = 0;
  uint32_t max_publishers = 1;
  uint32_t max_pinned = 0;
};

// FNV-1a 64 of the schema blob: equal schemas give equal hashes on every
// host and build. Any thread.
uint64_t SchemaHash(std::span<const std::byte> schema);

// The description of an open local channel. Allocates.
ChannelDescription Describe(const transport::ChannelHandle& channel,
                            std::string where);

// OK if a channel like `local` can carry `remote`'s messages: the same type
// id and schema hash, and a max size at least the sender's (queue depth and
// rate are each host's own). Else FailedPrecondition naming both sides and
// what differs. Any thread.
absl::Status CheckCompatible(const ChannelDescription& remote,
                             const ChannelDescription& local);

// This host's channel for `remote`: the existing one if compatible (else
// the CheckCompatible error), or a new one created from `remote` (its type
// and schema, max size, rate, queue depth, pins, and at least one publisher
// for the bridge). `local_where` names this side in errors. Setup only.
absl::StatusOr<std::unique_ptr<transport::ChannelHandle>> OpenOrCreateFor(
    const shm::ChannelOptions& options, const ChannelDescription& remote,
    const std::string& local_where);

// A channel the bridge makes for itself (its status channel), of a
// compiled-in type registered in `schemas`.
struct OwnChannel {
  std::string name;
  uint64_t type_id = 0;
  uint32_t max_size = 0;
  double frequency_hz = 0;
  uint32_t queue_depth = 0;
};

// A ChannelSet holding the existing channels `names` exactly as they are
// (shape, type and schema from their files; NotFound naming the channel and
// the instance when one does not exist) plus `own` channels, created or
// opened. `schemas` receives the channels' types and must outlive the set.
// Setup only.
absl::StatusOr<std::unique_ptr<transport::ChannelSet>> OpenChannelSet(
    const shm::ChannelOptions& options, const std::vector<std::string>& names,
    const std::vector<OwnChannel>& own, transport::SchemaRegistry& schemas);

}  // namespace tether::net

#endif  // TETHER_NET_LOCAL_CHANNELS_H_
