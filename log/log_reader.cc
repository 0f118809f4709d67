#include "log/log_reader.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "capnp/schema.capnp.h"
#include "capnp/serialize.h"
#include "kj/exception.h"

namespace tether::log {
namespace {

constexpr uint64_t kSpanProbeNs = 2'000'000'000;

// Fills the time and context fields of `out` from an MCAP message view.
void FillContext(const McapMessageView& v, LogMessage* out) {
  const mcap::Message& m = v.message;
  out->log_time = m.log_time;
  out->sequence = m.sequence;
  out->realtime_send_ns = static_cast<int64_t>(m.publish_time);
  std::optional<MessageContextRecord> c;
  if (v.trailer.has_value()) c = ParseContextRecord(*v.trailer);
  if (c.has_value() && c->channel_id == m.channel_id) {
    out->has_context = true;
    out->monotonic_send_ns = c->monotonic_send_ns;
    out->monotonic_receive_ns = c->monotonic_receive_ns;
    out->queue_index = c->queue_index;
    out->publisher_pid = c->publisher_pid;
    out->publisher_index = c->publisher_index;
    out->publisher_sequence = c->publisher_sequence;
  } else {
    out->has_context = false;
    out->monotonic_send_ns = static_cast<int64_t>(m.publish_time);
    out->monotonic_receive_ns = static_cast<int64_t>(m.log_time);
    out->queue_index = m.sequence;
    out->publisher_pid = 0;
    out->publisher_index = 0;
    out->publisher_sequence = 0;
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<LogReader>> LogReader::Open(
    const std::string& path) {
  absl::StatusOr<std::unique_ptr<McapReader>> mcap = McapReader::Open(path);
  if (!mcap.ok()) return mcap.status();
  std::unique_ptr<LogReader> r(new LogReader());
  r->mcap_ = std::move(*mcap);
  for (const mcap::Metadata& m : r->mcap_->metadata()) {
    if (m.name == kRecordingMetadata) r->recording_ = m.metadata;
  }
  if (auto it = r->recording_.find("realtime_offset_ns");
      it != r->recording_.end()) {
    (void)absl::SimpleAtoi(it->second, &r->realtime_offset_ns_);
  }
  r->BuildChannels();
  r->FindTimeSpan();
  return r;
}

void LogReader::BuildChannels() {
  for (const auto& [id, c] : mcap_->channels()) {
    LogChannel lc;
    lc.id = id;
    lc.name = c.topic;
    lc.message_encoding = c.message_encoding;
    const mcap::Schema* schema = nullptr;
    if (auto it = mcap_->schemas().find(c.schema_id);
        it != mcap_->schemas().end()) {
      schema = &it->second;
      lc.schema = schema;
      lc.schema_name = schema->name;
      lc.schema_encoding = schema->encoding;
    }
    absl::StatusOr<ChannelDescription> d = ParseChannelDescription(c, schema);
    if (d.ok()) {
      lc.description = std::move(*d);
    } else {
      lc.not_replayable = std::string(d.status().message());
    }
    channels_.push_back(std::move(lc));
  }
  std::stable_sort(channels_.begin(), channels_.end(),
                   [](const LogChannel& a, const LogChannel& b) {
                     return a.name < b.name;
                   });
  for (size_t i = 0; i < channels_.size(); ++i) by_id_[channels_[i].id] = i;
}

const LogChannel* LogReader::FindChannel(const std::string& name) const {
  for (const LogChannel& c : channels_) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

const LogChannel* LogReader::ChannelById(uint16_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &channels_[it->second];
}

const LogChannel* LogReader::GapOwner(const GapRecord& gap) const {
  if (gap.mcap_channel_id.has_value()) {
    const LogChannel* c = ChannelById(*gap.mcap_channel_id);
    if (c != nullptr && c->name == gap.channel) return c;
  }
  return FindChannel(gap.channel);
}

const LogChannel* LogReader::Channel(uint16_t id) { return ChannelById(id); }

void LogReader::FindTimeSpan() {
  int64_t first = std::numeric_limits<int64_t>::max();
  int64_t last = std::numeric_limits<int64_t>::min();
  // Whether every message seen was logged near its send time (log time =
  // realtime receive time, send time + offset = realtime send time).
  bool tracks = realtime_offset_ns_ != 0;
  auto scan = [&](const McapReadOptions& o) {
    auto it = mcap_->Messages(o);
    McapMessageView v;
    LogMessage m;
    const LogChannel* gap = FindChannel(kGapChannel);
    while (it->Next(&v)) {
      // The span of the data, not of the logger's own loss records.
      if (gap != nullptr && v.message.channel_id == gap->id) continue;
      FillContext(v, &m);
      first = std::min(first, m.monotonic_send_ns);
      last = std::max(last, m.monotonic_send_ns);
      const int64_t lag = static_cast<int64_t>(v.message.log_time) -
                          (m.monotonic_send_ns + realtime_offset_ns_);
      if (lag > kLogTimeSlackNs || lag < -kLogTimeSlackNs) tracks = false;
    }
    open_problems_.insert(open_problems_.end(), it->problems().begin(),
                          it->problems().end());
  };
  const auto& chunks = mcap_->chunk_indexes();
  // The index's log times find the first and last send times only where
  // log times track send times; the probes check that, and a log where
  // they do not is scanned whole.
  bool probed = false;
  if (mcap_->indexed() && !chunks.empty()) {
    uint64_t lo = std::numeric_limits<uint64_t>::max(), hi = 0;
    for (const mcap::ChunkIndex& c : chunks) {
      if (c.message_start_time == 0 && c.message_end_time == 0) continue;
      lo = std::min(lo, c.message_start_time);
      hi = std::max(hi, c.message_end_time);
    }
    if (hi == 0) return;
    McapReadOptions o;
    o.start_time = lo;
    o.end_time = lo + kSpanProbeNs;
    scan(o);
    o.start_time = hi > kSpanProbeNs ? hi - kSpanProbeNs : 0;
    o.end_time = hi;
    scan(o);
    probed = tracks;
  }
  if (!probed) {
    first = std::numeric_limits<int64_t>::max();
    last = std::numeric_limits<int64_t>::min();
    scan({});
  }
  log_time_tracks_send_ = tracks;
  SortProblems(&open_problems_);
  if (first <= last) {
    start_ns_ = first;
    end_ns_ = last;
  }
}

absl::StatusOr<LoadedMessageType> LoadMessageType(
    const std::string& channel_name, const std::string& message_encoding,
    const mcap::Schema* schema, std::optional<uint64_t> type_id) {
  if (schema == nullptr || schema->encoding != kCapnpEncoding) {
    return absl::FailedPreconditionError(absl::StrCat(
        "channel ", channel_name, " is not Cap'n Proto (schema encoding '",
        schema == nullptr ? "" : schema->encoding, "', message encoding '",
        message_encoding, "')"));
  }
  const std::vector<std::byte>& blob = schema->data;
  std::vector<uint64_t> words((blob.size() + 7) / 8);
  if (!blob.empty()) std::memcpy(words.data(), blob.data(), blob.size());
  std::span<const std::byte> aligned(
      reinterpret_cast<const std::byte*>(words.data()), words.size() * 8);
  if (!type_id.has_value()) {
    // No tether metadata: find the root by the schema's name.
    type_id = 0;
    try {
      capnp::FlatArrayMessageReader r(kj::arrayPtr(
          reinterpret_cast<const capnp::word*>(words.data()), words.size()));
      for (auto node :
           r.getRoot<capnp::schema::CodeGeneratorRequest>().getNodes()) {
        if (node.isStruct() && schema->name == node.getDisplayName().cStr()) {
          type_id = node.getId();
        }
      }
    } catch (const kj::Exception& e) {
      return absl::FailedPreconditionError(absl::StrCat(
          "channel ", channel_name, ": schema is not a CodeGeneratorRequest: ",
          e.getDescription().cStr()));
    }
  }
  LoadedMessageType loaded;
  loaded.registry = std::make_unique<transport::SchemaRegistry>();
  if (absl::Status s = loaded.registry->AddCodeGeneratorRequest(aligned,
                                                                *type_id);
      !s.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("channel ", channel_name, ": ", s.message()));
  }
  loaded.type = *loaded.registry->Find(*type_id);
  return loaded;
}

absl::StatusOr<capnp::StructSchema> LogReader::MessageType(
    const LogChannel& channel) {
  if (auto it = types_.find(channel.id); it != types_.end()) {
    return it->second.type;
  }
  std::optional<uint64_t> type_id;
  if (channel.description.has_value()) type_id = channel.description->type_id;
  absl::StatusOr<LoadedMessageType> loaded = LoadMessageType(
      channel.name, channel.message_encoding, channel.schema, type_id);
  if (!loaded.ok()) return loaded.status();
  const capnp::StructSchema type = loaded->type;
  types_[channel.id] = *std::move(loaded);
  return type;
}

absl::StatusOr<std::vector<GapRecord>> LogReader::Gaps() {
  std::vector<GapRecord> gaps;
  const LogChannel* gap = FindChannel(kGapChannel);
  if (gap == nullptr) return gaps;
  LogReadOptions o;
  o.channels = {gap->id};
  std::unique_ptr<LogCursor> cursor = Read(o);
  LogMessage m;
  while (cursor->Next(&m)) {
    absl::StatusOr<GapRecord> g = DecodeGap(m.data);
    if (!g.ok()) return g.status();
    gaps.push_back(std::move(*g));
  }
  return gaps;
}

std::unique_ptr<LogCursor> LogReader::Read(const LogReadOptions& options) {
  return std::unique_ptr<LogCursor>(new LogCursor(this, options));
}

LogCursor::LogCursor(LogReader* reader, const LogReadOptions& options)
    : reader_(reader), options_(options) {
  McapReadOptions o;
  o.channels = options.channels;
  o.force_scan = options.force_scan;
  // log_time is the realtime receive time: map the send-time range onto it
  // generously (clock steps, reorder window) and filter exactly below.
  // Only where they were seen to track each other (log_time_tracks_send).
  const int64_t offset = reader->realtime_offset_ns();
  const int64_t margin = LogReader::kLogTimeSlackNs + options.reorder_window_ns;
  const bool by_log_time = reader->log_time_tracks_send();
  if (options.start_ns.has_value() && by_log_time) {
    o.start_time = static_cast<uint64_t>(
        std::max<int64_t>(0, *options.start_ns + offset - margin));
  }
  if (options.end_ns.has_value() && by_log_time) {
    o.end_time = static_cast<uint64_t>(*options.end_ns + offset + margin);
  }
  messages_ = reader->mcap().Messages(o);
}

bool LogCursor::Fill() {
  McapMessageView v;
  while (messages_->Next(&v)) {
    const LogChannel* channel = reader_->Channel(v.message.channel_id);
    if (channel == nullptr) continue;  // no Channel record: cannot be decoded
    Pending p;
    p.message.channel = channel;
    FillContext(v, &p.message);
    if (options_.start_ns.has_value() &&
        p.message.monotonic_send_ns < *options_.start_ns) {
      continue;
    }
    if (options_.end_ns.has_value() &&
        p.message.monotonic_send_ns > *options_.end_ns) {
      continue;
    }
    p.send_ns = p.message.monotonic_send_ns;
    p.order = order_++;
    const size_t n = v.message.data.size();
    p.size = n;
    p.words.assign((n + 7) / 8, 0);
    if (n > 0) std::memcpy(p.words.data(), v.message.data.data(), n);
    newest_ns_ = std::max(newest_ns_, p.send_ns);
    heap_.push(std::move(p));
    return true;
  }
  exhausted_ = true;
  return false;
}

bool LogCursor::Next(LogMessage* message) {
  // Keep the window full: release the oldest only once something newer
  // than it by the window has been read (or the file is done).
  while (!exhausted_ &&
         (heap_.empty() ||
          heap_.top().send_ns > newest_ns_ - options_.reorder_window_ns)) {
    if (!Fill()) break;
  }
  if (heap_.empty()) return false;
  current_ = std::move(const_cast<Pending&>(heap_.top()));
  heap_.pop();
  if (current_.send_ns < released_ns_) ++late_;
  released_ns_ = std::max(released_ns_, current_.send_ns);
  *message = current_.message;
  message->data = std::span<const std::byte>(
      reinterpret_cast<const std::byte*>(current_.words.data()),
      current_.size);
  return true;
}

}  // namespace tether::log
