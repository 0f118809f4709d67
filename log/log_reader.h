// log: reads a tether log (log_format.h) over the MCAP reader: its channels
// with their tether descriptions and schemas, its recording metadata and
// loss records, and its messages in send-time order with their full context
// (the per-message record, or MCAP's times for logs from other writers).
//
// Order: the logger writes each drain in send-time order, but a message sent
// just before a drain may land in the next one. A cursor therefore holds a
// reorder window (0.5 s of send time by default) and releases messages in
// monotonic send-time order; a message later than the window (never seen
// from tether's logger in practice) is released at once and counted in
// late(). Determinism: the order depends only on the file's bytes.
//
// Threading: a reader and its cursors belong to one thread. Not RT-safe.
#ifndef TETHER_LOG_LOG_READER_H_
#define TETHER_LOG_LOG_READER_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "log/log_format.h"
#include "log/mcap_reader.h"
#include "transport/schema_registry.h"
#include "capnp/schema.h"

namespace tether::log {

// One channel of the log.
struct LogChannel {
  uint16_t id = 0;                 // MCAP channel id
  std::string name;                // topic
  std::string message_encoding;
  std::string schema_name;
  std::string schema_encoding;
  const mcap::Schema* schema = nullptr;  // owned by the reader; may be null
  // Set for channels tether recorded (what a replay needs).
  std::optional<ChannelDescription> description;
  // Why there is no description (a channel from another writer).
  std::string not_replayable;
  bool is_gap_channel() const { return name == kGapChannel; }
};

// One message with its context. Spans are valid until the cursor's next
// Next(); `data` is 8-byte aligned (ready for Cap'n Proto readers and
// RawPublisher::Publish).
struct LogMessage {
  const LogChannel* channel = nullptr;
  std::span<const std::byte> data;
  int64_t monotonic_send_ns = 0;
  int64_t realtime_send_ns = 0;     // MCAP publish_time
  int64_t monotonic_receive_ns = 0;
  uint64_t log_time = 0;            // MCAP log_time
  uint64_t queue_index = 0;
  uint32_t sequence = 0;            // MCAP sequence
  uint32_t publisher_pid = 0;
  uint32_t publisher_index = 0;
  uint64_t publisher_sequence = 0;
  // False for logs from other writers: monotonic times are then MCAP's
  // publish/log times.
  bool has_context = false;
};

// A channel's message type loaded from its schema record; `registry` owns
// `type`.
struct LoadedMessageType {
  std::unique_ptr<transport::SchemaRegistry> registry;
  capnp::StructSchema type;
};

// Loads the type of a Cap'n Proto channel's messages from its schema (a
// CodeGeneratorRequest): the struct `type_id` names (tether's channel
// metadata), or without it the one named like the schema. FailedPrecondition
// naming `channel_name` if the schema is not Cap'n Proto or does not hold
// the type. Not RT-safe.
absl::StatusOr<LoadedMessageType> LoadMessageType(
    const std::string& channel_name, const std::string& message_encoding,
    const mcap::Schema* schema, std::optional<uint64_t> type_id);

struct LogReadOptions {
  // Channels to read, by MCAP id (empty: all).
  std::set<uint16_t> channels;
  // Monotonic send-time range (inclusive); unset: all.
  std::optional<int64_t> start_ns;
  std::optional<int64_t> end_ns;
  int64_t reorder_window_ns = 500'000'000;
  // Ignore the index (read by scanning).
  bool force_scan = false;
};

class LogReader;

class LogCursor {
 public:
  // The next message in send-time order; false at the end.
  bool Next(LogMessage* message);
  // Problems met (damaged chunks...), each naming its file offset.
  const std::vector<McapProblem>& problems() const {
    return messages_->problems();
  }
  // Messages released later than the reorder window allowed.
  uint64_t late() const { return late_; }

 private:
  friend class LogReader;
  LogCursor(LogReader* reader, const LogReadOptions& options);
  bool Fill();

  struct Pending {
    int64_t send_ns;
    uint64_t order;  // file order, for ties
    LogMessage message;
    std::vector<uint64_t> words;
    size_t size = 0;  // bytes of `words` that are the message
    bool operator>(const Pending& o) const {
      return send_ns != o.send_ns ? send_ns > o.send_ns : order > o.order;
    }
  };
  LogReader* const reader_;
  const LogReadOptions options_;
  std::unique_ptr<McapMessageIterator> messages_;
  std::priority_queue<Pending, std::vector<Pending>, std::greater<Pending>>
      heap_;
  Pending current_;
  uint64_t order_ = 0;
  int64_t newest_ns_ = INT64_MIN;
  int64_t released_ns_ = INT64_MIN;
  bool exhausted_ = false;
  uint64_t late_ = 0;
};

class LogReader {
 public:
  // Opens the file (see McapReader::Open for what fails) and works out its
  // channels and time span. Setup; reads the file (the first and last
  // chunks; all of it when there is no summary).
  static absl::StatusOr<std::unique_ptr<LogReader>> Open(
      const std::string& path);
  LogReader(const LogReader&) = delete;
  LogReader& operator=(const LogReader&) = delete;

  const std::string& path() const { return mcap_->file().path(); }
  const McapReader& mcap() const { return *mcap_; }
  McapReader& mcap() { return *mcap_; }
  // Channels sorted by name (the gap channel included).
  const std::vector<LogChannel>& channels() const { return channels_; }
  const LogChannel* FindChannel(const std::string& name) const;
  const LogChannel* ChannelById(uint16_t id) const;
  // The logged channel a loss record is about: the MCAP channel it names,
  // if that channel has the record's name; else (a log from before records
  // named one) the first channel of that name; null if there is none. So
  // each loss counts once, against one incarnation.
  const LogChannel* GapOwner(const GapRecord& gap) const;

  // First and last monotonic send time of any message that could be read
  // (0 if none).
  int64_t start_ns() const { return start_ns_; }
  int64_t end_ns() const { return end_ns_; }
  // The recording's metadata (tether.recording), empty for other writers.
  const mcap::KeyValueMap& recording() const { return recording_; }
  // realtime - monotonic at the start of the recording, or 0.
  int64_t realtime_offset_ns() const { return realtime_offset_ns_; }
  // Whether a message's log time (its realtime receive time) is within
  // kLogTimeSlackNs of its send time plus realtime_offset_ns() in the
  // messages looked at on open, so a send-time range can be looked up
  // through the index's log times. False (reads then scan every chunk) for
  // logs of old messages (record --from-oldest), of a replay that kept the
  // original send times, or across a realtime clock step.
  bool log_time_tracks_send() const { return log_time_tracks_send_; }
  static constexpr int64_t kLogTimeSlackNs = 10'000'000'000;
  // Damage met reading messages on open (finding the time span): chunks
  // whose messages cannot be read. Those messages are outside start_ns()..
  // end_ns() when no readable message brackets them, so a read of that
  // range never meets the damage itself.
  const std::vector<McapProblem>& open_problems() const {
    return open_problems_;
  }

  // The channel's message type, loaded from the schema the log carries (no
  // compiled types needed). FailedPrecondition for a channel that is not
  // Cap'n Proto or whose schema is missing or broken.
  absl::StatusOr<capnp::StructSchema> MessageType(const LogChannel& channel);

  // Every loss record in the file, in order.
  absl::StatusOr<std::vector<GapRecord>> Gaps();

  std::unique_ptr<LogCursor> Read(const LogReadOptions& options = {});

 private:
  friend class LogCursor;
  LogReader() = default;
  void BuildChannels();
  const LogChannel* Channel(uint16_t id);
  void FindTimeSpan();

  std::unique_ptr<McapReader> mcap_;
  std::vector<LogChannel> channels_;
  std::map<uint16_t, size_t> by_id_;
  int64_t start_ns_ = 0;
  int64_t end_ns_ = 0;
  std::vector<McapProblem> open_problems_;
  mcap::KeyValueMap recording_;
  int64_t realtime_offset_ns_ = 0;
  bool log_time_tracks_send_ = false;
  std::map<uint16_t, LoadedMessageType> types_;
};

}  // namespace tether::log

#endif  // TETHER_LOG_LOG_READER_H_
