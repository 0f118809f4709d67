// log: how tether uses MCAP (on top of mcap_format.h). A tether log is a
// standard MCAP file that any MCAP reader opens:
//   - schema encoding "capnproto": name = the root struct's display name,
//     data = the CodeGeneratorRequest the channel carries;
//   - message encoding "capnproto": the slot's bytes exactly as they were
//     (stream framing, unpacked);
//   - channel metadata "tether.*": what a replay needs to recreate the
//     channel (type id and name, max size, rate, depth, max publishers and
//     pinned readers);
//   - message times: publish_time = the realtime send time stamped by the
//     publisher, log_time = when the logger read it (CLOCK_REALTIME);
//   - right after every message, inside its chunk, a private record
//     (opcode 0x80, "tether context") with what MCAP has no field for: the
//     monotonic send and receive times, the queue index, publisher pid,
//     registry index and sequence (MCAP readers skip unknown records);
//   - channel /tether/log/gaps (log_gap.capnp:LogGap) where messages were
//     lost, and metadata records "tether.recording" (at the start) and
//     "tether.summary" (at the end: per-channel counts and losses).
//
// Threading: value types and free functions; any thread. Not RT-safe.
#ifndef TETHER_LOG_LOG_FORMAT_H_
#define TETHER_LOG_LOG_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "log/mcap_format.h"
#include "transport/channel_handle.h"
#include "transport/names.h"

namespace tether::log {

inline constexpr char kTetherProfile[] = "x-tether";
inline constexpr char kCapnpEncoding[] = "capnproto";
inline constexpr char kGapChannel[] = "/tether/log/gaps";
// No shm channel can take its name (transport/names.h).
static_assert(std::string_view(kGapChannel).starts_with(
    transport::kReservedLogPrefix));
inline constexpr char kRecordingMetadata[] = "tether.recording";
inline constexpr char kSummaryMetadata[] = "tether.summary";
inline constexpr uint8_t kContextOpcode = 0x80;

// What a log knows about one tether channel: enough to recreate it.
struct ChannelDescription {
  std::string name;
  uint64_t type_id = 0;
  std::string type_name;  // "examples/demo.capnp:JointState"
  uint32_t max_size = 0;
  double frequency_hz = 0;
  uint32_t queue_depth = 0;
  uint32_t max_publishers = 1;
  uint32_t max_pinned = 0;
  // The type's CodeGeneratorRequest (stream framed, whole words).
  std::vector<std::byte> schema;

  // Whether a channel of this description can carry what `logged`
  // describes (what a replay into an existing channel needs): the same type,
  // and max size, queue depth, publishers and pinned readers each at least
  // the logged one (every message fits; no burst overruns a reader that the
  // logged queue did not).
  bool Holds(const ChannelDescription& logged) const;
  // "type T, max size N B, depth D, P publishers, Q pinned" (for errors).
  std::string ShapeText() const;
  friend bool operator==(const ChannelDescription&,
                         const ChannelDescription&) = default;
};

// The description of an open channel.
ChannelDescription DescribeChannel(const transport::ChannelHandle& channel);

// Channel metadata ("tether.type_id" ...) for `d`.
mcap::KeyValueMap ChannelMetadata(const ChannelDescription& d);
// Back from a logged channel and its schema record. InvalidArgument naming
// the key when the channel is not a tether channel or a value is bad.
absl::StatusOr<ChannelDescription> ParseChannelDescription(
    const mcap::Channel& channel, const mcap::Schema* schema);

// The per-message record after each message.
struct MessageContextRecord {
  uint16_t channel_id = 0;
  uint64_t queue_index = 0;
  int64_t monotonic_send_ns = 0;
  int64_t monotonic_receive_ns = 0;
  uint32_t publisher_pid = 0;
  uint32_t publisher_index = 0;
  uint64_t publisher_sequence = 0;
};
inline constexpr size_t kContextContentSize = 2 + 8 + 8 + 8 + 4 + 4 + 8;
// Appends the whole framed record.
void AppendContextRecord(const MessageContextRecord& r,
                         std::vector<std::byte>* out);
// Parses a record of opcode kContextOpcode; nullopt for anything else.
std::optional<MessageContextRecord> ParseContextRecord(
    const mcap::RecordView& record);

// One lost range, as the gap channel records it.
struct GapRecord {
  std::string channel;
  uint64_t missed = 0;
  uint64_t first_queue_index = 0;
  uint64_t last_queue_index = 0;
  enum class Reason {
    kOverwritten,
    kOverwrittenWhileCopying,
    kWriterBacklog,
    kCorruptChannel,
  } reason = Reason::kOverwritten;
  int64_t detected_monotonic_ns = 0;
  // The MCAP channel (of the log holding the record) whose messages these
  // are; unset in logs from before it was recorded (LogReader::GapOwner).
  std::optional<uint16_t> mcap_channel_id;
};
const char* ToString(GapRecord::Reason reason);

// The gap channel's message type: name and CodeGeneratorRequest.
const std::string& GapTypeName();
const std::vector<std::byte>& GapSchema();
uint64_t GapTypeId();
// A LogGap message, stream framed (whole words).
std::vector<std::byte> EncodeGap(const GapRecord& gap);
// Back; InvalidArgument if the bytes are not a LogGap.
absl::StatusOr<GapRecord> DecodeGap(std::span<const std::byte> framed);
// `framed` (a LogGap) with the MCAP channel it names set to `id` (unknown
// without one), every other field kept, also those of a newer writer this
// build does not know (what log recover writes when it renumbers channels).
// InvalidArgument if the bytes are not a LogGap.
absl::StatusOr<std::vector<std::byte>> WithGapChannelId(
    std::span<const std::byte> framed, std::optional<uint16_t> id);

}  // namespace tether::log

#endif  // TETHER_LOG_LOG_FORMAT_H_
