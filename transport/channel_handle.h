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
#include "transport/wake_handle.h"

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

  // `options` with the file options of config entry `channel`: its mode,
  // readerMode, group and readerGroup (groups looked up by name; a group
  // that does not exist is InvalidArgument naming the channel). What
  // Create makes the channel's files with. Setup only (may read NSS).
  static absl::StatusOr<shm::ChannelOptions> FileOptions(
      const shm::ChannelOptions& options, config::Channel::Reader channel);

  // The bytes of shared memory creating `channel` would take from a
  // filesystem that allocates in blocks of `block_size` (its files' sizes,
  // each rounded up to whole blocks: shm::Channel::SpaceFor), or 0 if its
  // file exists already (Create would open it). Errors as Create's for a
  // bad entry. Setup only.
  static absl::StatusOr<uint64_t> BytesToCreate(
      const shm::ChannelOptions& options, config::Channel::Reader channel,
      const SchemaRegistry& schemas, uint64_t block_size);

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
  // The queue's shape (slot size, depth, publishers, pins).
  const shm::QueueParams& params() const { return shm_->params(); }
  // The channel's data file and its reader-state file.
  const std::string& path() const { return shm_->path(); }
  const std::string& reader_state_path() const {
    return shm_->reader_state_path();
  }
  // Which creation of the channel this is: differs when the channel was
  // removed and made again under the same name (shm::Channel::nonce).
  uint64_t incarnation() const { return shm_->nonce(); }
  // Create made the channel (false: it opened one that existed): a caller
  // whose setup fails may remove it. Any thread.
  bool created() const { return shm_->created(); }
  // This process may publish (it can write the data file). Any thread.
  bool writable() const { return shm_->data_writable(); }
  // This process reads as a guest: it cannot write the reader-state file,
  // so its subscribers copy messages unpinned and its waiters poll (see
  // shm/layout.h). Any thread.
  bool guest() const { return !shm_->reader_state_writable(); }
  // The reader-state file was truncated or grown: this handle goes on with
  // a private reader state (shm::Channel::reader_state_lost). RT-safe.
  bool reader_state_lost() const { return shm_->reader_state_lost(); }
  // Why (who we are, the file's mode, owner and group, what to ask for),
  // for a one-line note; empty when not a guest. Setup only (allocates).
  std::string GuestReason() const { return shm_->GuestReason(); }
  // Counters of the shared queue (messages so far, registered publishers
  // and pinning readers, sleepers, file size): a snapshot. RT-safe.
  shm::ChannelStats stats() const { return shm_->Stats(); }
  // Reclaims what dead processes left in the channel (shm::Channel::Sweep).
  // Not RT-safe (reads /proc).
  shm::SweepReport Sweep() const { return shm_->Sweep(); }
  // A waiter's wake word and sleep bracket, for event loops and waiting
  // tools: one per waiter (it holds an entry of the channel's sleeper
  // registry). Setup: not RT-safe (may sweep).
  WakeHandle MakeWakeHandle() const {
    return WakeHandle(shm_.get(), shm_->RegisterSleeper());
  }
  // This process found the channel's memory corrupt (see
  // shm::Channel::corrupt()); corruption() says what and where. RT-safe.
  bool corrupt() const { return shm_->corrupt(); }
  std::string_view corruption() const { return shm_->corruption(); }
  // A setup error for this corrupt channel saying what is wrong, where and
  // how to recover (shm::Channel::CorruptionError). Only when corrupt().
  // Setup only (allocates).
  absl::Status CorruptionError(std::string_view consequence) const {
    return shm_->CorruptionError(consequence);
  }
  // Moves whenever some channel of this process may have become corrupt
  // (shm::Channel::CorruptionEvents()): scan corrupt() only when it moved.
  // Any thread; RT-safe.
  static uint64_t CorruptionEvents() { return shm::Channel::CorruptionEvents(); }
  // The whole-structure check (shm::Channel::CheckConsistency): OK or
  // DataLoss naming what is wrong. Tools; not RT-safe.
  absl::Status CheckConsistency() const { return shm_->CheckConsistency(); }

 private:
  // The endpoints work on the shm queue itself; nothing above transport
  // sees it.
  friend class RawPublisher;
  friend class RawSubscriber;
  shm::Channel* shm() const { return shm_.get(); }

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
  // Non-empty if its memory is corrupt: what is wrong and where (stats are
  // then not to be trusted).
  std::string corruption;
  // Non-empty if only its reader-state file fails the check (pin or
  // sleeper words, its header): what and where. The messages and stats are
  // intact (a reader cannot stop publishers), so the channel is listed as
  // usual, with this beside it.
  std::string reader_state_problem;
};

// Every channel under options.root/options.instance, sorted by name. A
// channel that cannot be opened is listed with `error` set, one whose memory
// fails the consistency check with `corruption`, or `reader_state_problem`
// when only its reader-state file does (never skipped silently).
// Setup/tool use: opens and checks each file.
absl::StatusOr<std::vector<ChannelSummary>> ListChannels(
    const shm::ChannelOptions& options);

}  // namespace tether::transport

#endif  // TETHER_TRANSPORT_CHANNEL_HANDLE_H_
