// transport: a channel as the layers above see it — the shm channel plus what
// it carries (type id and name, max size, rate, schema), created from a stack
// config entry or opened by name for tools. Also lists the channels present.
#ifndef TETHER_TRANSPORT_CHANNEL_HANDLE_H_
#define TETHER_TRANSPORT_CHANNEL_HANDLE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "shm/channel.h"
#include "transport/config.capnp.h"
#include "transport/schema_registry.h"

namespace tether::transport {

// Not copyable or movable (owned by unique_ptr). Publishers and subscribers
// keep a pointer: the handle must outlive them. Const methods: any thread.
class ChannelHandle {
 public:
  // Creates the channel described by `channel` (a validated stack config
  // entry) or opens it if it exists with the same shape and type. The type
  // must be known to `schemas` (its schema is stored in the channel).
  // Errors name the channel and say what to fix. Setup only; not RT-safe.
  static absl::StatusOr<std::unique_ptr<ChannelHandle>> Create(
      const shm::ChannelOptions& options, config::Channel::Reader channel,
      const SchemaRegistry& schemas);

  // Opens an existing channel by name, reading its type and schema from the
  // file (for tools: echo, pub, stat, the logger). Setup only.
  static absl::StatusOr<std::unique_ptr<ChannelHandle>> Open(
      const shm::ChannelOptions& options, const std::string& name);

  ChannelHandle(const ChannelHandle&) = delete;
  ChannelHandle& operator=(const ChannelHandle&) = delete;

  const std::string& name() const { return name_; }
  uint64_t type_id() const { return type_id_; }
  const std::string& type_name() const { return type_name_; }
  // Largest framed message in bytes (the config's maxSize).
  uint32_t max_size() const { return max_size_; }
  double frequency_hz() const { return frequency_hz_; }
  // The type's CodeGeneratorRequest (stream framed, 8-byte aligned).
  std::span<const std::byte> schema() const;
  // The queue shape (slot size, depth, max publishers, max pinned), e.g. for
  // a logger that records what a replay needs to recreate the channel.
  shm::QueueParams params() const { return shm_->params(); }
  shm::Channel* shm() const { return shm_.get(); }

 private:
  ChannelHandle() = default;
  static absl::StatusOr<std::unique_ptr<ChannelHandle>> FromShm(
      std::unique_ptr<shm::Channel> channel);

  std::unique_ptr<shm::Channel> shm_;
  std::string name_;
  uint64_t type_id_ = 0;
  std::string type_name_;
  uint32_t max_size_ = 0;
  double frequency_hz_ = 0;
  std::vector<uint64_t> schema_words_;  // aligned copy of the schema blob
};

// One line of `tether list`.
struct ChannelSummary {
  std::string name;
  std::string type_name;
  uint64_t type_id = 0;
  uint32_t max_size = 0;
  double frequency_hz = 0;
  shm::QueueParams params;
  shm::ChannelStats stats;
  std::string error;  // non-empty if the channel could not be read
};

// Every channel under options.root/options.instance, sorted by name. A
// channel that cannot be opened is listed with `error` set (never skipped
// silently). Setup/tool use: opens each file.
absl::StatusOr<std::vector<ChannelSummary>> ListChannels(
    const shm::ChannelOptions& options);

}  // namespace tether::transport

#endif  // TETHER_TRANSPORT_CHANNEL_HANDLE_H_
