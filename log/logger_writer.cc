// The logger's writer thread: the drained batches into MCAP files (channels
// declared on first use, gap records, each message's context record), the
// chunk period, splitting into numbered files, the per-file summary.
#include "log/logger_impl.h"

#include <unistd.h>

#include <map>
#include <mutex>
#include <span>

#include "absl/strings/str_cat.h"

namespace tether::log {

using internal::MonotonicNow;
using internal::RealtimeNow;

void Logger::Impl::Fail(const absl::Status& s) {
  {
    std::lock_guard lock(status_mu);
    if (write_error.ok()) write_error = s;
  }
  if (!failed.exchange(true)) {
    Notice(absl::StrCat("recording stopped: ", s.message()));
  }
}

absl::Status Logger::Impl::EnsureChannel(uint32_t index) {
  if (mcap_id.count(index) > 0) return absl::OkStatus();
  const ChannelDescription* d;
  {
    std::lock_guard lock(channels_mu);
    d = &tracked[index]->description;
  }
  // A re-created channel of the same shape keeps its MCAP channel.
  for (const auto& [other, id] : mcap_id) {
    const ChannelDescription* o;
    {
      std::lock_guard lock(channels_mu);
      o = &tracked[other]->description;
    }
    if (*o == *d) {
      mcap_id[index] = id;
      return absl::OkStatus();
    }
  }
  absl::StatusOr<uint16_t> schema =
      file->AddSchema(d->type_name, kCapnpEncoding, d->schema);
  if (!schema.ok()) return schema.status();
  absl::StatusOr<uint16_t> id =
      file->AddChannel(*schema, d->name, kCapnpEncoding, ChannelMetadata(*d));
  if (!id.ok()) return id.status();
  mcap_id[index] = *id;
  id_names[*id] = d->name;
  return absl::OkStatus();
}

void Logger::Impl::PublishWritten() {
  std::map<std::string, McapWriterStats::ChannelCount> now = written_closed;
  uint64_t now_chunks = chunks_closed;
  if (file != nullptr) {
    now_chunks += file->stats().chunks;
    for (const auto& [id, count] : file->stats().written) {
      auto name = id_names.find(id);
      if (name == id_names.end()) continue;  // the gap channel
      now[name->second].messages += count.messages;
      now[name->second].bytes += count.bytes;
    }
  }
  std::lock_guard lock(status_mu);
  written = std::move(now);
  chunks = now_chunks;
}

absl::Status Logger::Impl::OpenFile() {
  McapWriterOptions mo = options.mcap;
  mo.overwrite = options.overwrite;
  mo.profile = kTetherProfile;
  if (mo.library == "tether") mo.library = "tether record";
  const std::string path = SplitFileName(options.path, splitting, file_index);
  absl::StatusOr<std::unique_ptr<McapWriter>> w = McapWriter::Create(path, mo);
  if (!w.ok()) return w.status();
  file = std::move(*w);
  {
    std::lock_guard lock(status_mu);
    files.push_back(path);
  }
  mcap_id.clear();
  id_names.clear();
  file_messages.clear();
  file_missed.clear();
  gap_sequence = 0;
  file_started_ns = MonotonicNow();
  chunk_started_ns = file_started_ns;
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  mcap::KeyValueMap meta = options.recording_metadata;
  meta["instance"] = options.channels.instance;
  meta["root"] = options.channels.root;
  meta["host"] = host;
  meta["pid"] = absl::StrCat(::getpid());
  meta["start_realtime_ns"] = absl::StrCat(start_realtime_ns);
  meta["start_monotonic_ns"] = absl::StrCat(start_monotonic_ns);
  meta["realtime_offset_ns"] = absl::StrCat(RealtimeNow() - MonotonicNow());
  meta["drain_period_ns"] = absl::StrCat(options.period.count());
  meta["file_index"] = absl::StrCat(file_index);
  if (absl::Status s = file->WriteMetadata({kRecordingMetadata, meta});
      !s.ok()) {
    return s;
  }
  absl::StatusOr<uint16_t> gap_schema =
      file->AddSchema(GapTypeName(), kCapnpEncoding, GapSchema());
  if (!gap_schema.ok()) return gap_schema.status();
  absl::StatusOr<uint16_t> gap =
      file->AddChannel(*gap_schema, kGapChannel, kCapnpEncoding,
                       {{"tether.role", "loss records of this log"}});
  if (!gap.ok()) return gap.status();
  gap_channel = *gap;
  return absl::OkStatus();
}

absl::Status Logger::Impl::CloseFile() {
  if (file == nullptr) return absl::OkStatus();
  mcap::KeyValueMap summary;
  {
    std::lock_guard lock(channels_mu);
    for (const auto& [index, id] : mcap_id) {
      const std::string& name = tracked[index]->description.name;
      summary[absl::StrCat("messages ", name)] =
          absl::StrCat(file_messages[index]);
      summary[absl::StrCat("missed ", name)] = absl::StrCat(file_missed[index]);
    }
  }
  summary["end_realtime_ns"] = absl::StrCat(RealtimeNow());
  absl::Status s = file->WriteMetadata({kSummaryMetadata, summary});
  absl::Status c = file->Close();
  closed_file_bytes.fetch_add(file->stats().file_bytes);
  current_file_bytes.store(0);
  PublishWritten();
  {
    std::lock_guard lock(status_mu);
    written_closed = written;
    chunks_closed = chunks;
  }
  file.reset();
  id_names.clear();
  return s.ok() ? c : s;
}

absl::Status Logger::Impl::WriteBatch(const Batch& b) {
  for (uint32_t index : b.added) {
    if (absl::Status s = EnsureChannel(index); !s.ok()) return s;
  }
  for (const Gap& g : b.gaps) {
    if (absl::Status s = EnsureChannel(g.channel); !s.ok()) return s;
    GapRecord record = g.record;
    record.mcap_channel_id = mcap_id[g.channel];
    std::vector<std::byte> data = EncodeGap(record);
    const uint64_t t = static_cast<uint64_t>(g.realtime_ns);
    // Its context: when the loss was noticed, on the monotonic clock.
    trailer.clear();
    AppendContextRecord({gap_channel, gap_sequence, g.record.detected_monotonic_ns,
                         g.record.detected_monotonic_ns,
                         static_cast<uint32_t>(::getpid()), 0, gap_sequence},
                        &trailer);
    if (absl::Status s = file->WriteMessage(
            {gap_channel, gap_sequence++, t, t, data}, trailer);
        !s.ok()) {
      return s;
    }
    file_missed[g.channel] += g.record.missed;
  }
  for (const Entry& e : b.entries) {
    if (absl::Status s = EnsureChannel(e.channel); !s.ok()) return s;
    const uint16_t id = mcap_id[e.channel];
    const transport::MessageContext& c = e.context;
    trailer.clear();
    AppendContextRecord({id, c.queue_index, c.monotonic_send_ns,
                         c.monotonic_receive_ns, c.publisher_pid,
                         c.publisher_index, c.publisher_sequence},
                        &trailer);
    mcap::Message m;
    m.channel_id = id;
    m.sequence = static_cast<uint32_t>(c.queue_index);
    m.log_time = static_cast<uint64_t>(e.realtime_receive_ns);
    m.publish_time = static_cast<uint64_t>(c.realtime_send_ns);
    m.data = std::span<const std::byte>(b.arena.data() + e.offset, e.size);
    if (absl::Status s = file->WriteMessage(m, trailer); !s.ok()) return s;
    ++file_messages[e.channel];
  }
  const int64_t now = MonotonicNow();
  if (now - chunk_started_ns >= options.chunk_period.count()) {
    if (absl::Status s = file->FlushChunk(); !s.ok()) return s;
    chunk_started_ns = now;
  }
  current_file_bytes.store(file->stats().file_bytes + file->open_chunk_bytes());
  const bool by_size = options.split_bytes > 0 &&
                       file->stats().file_bytes + file->open_chunk_bytes() >=
                           options.split_bytes;
  const bool by_time = options.split_duration.count() > 0 &&
                       now - file_started_ns >= options.split_duration.count();
  if (by_size || by_time) {
    if (absl::Status s = CloseFile(); !s.ok()) return s;
    ++file_index;
    if (absl::Status s = OpenFile(); !s.ok()) return s;
    std::vector<uint32_t> all;
    {
      std::lock_guard lock(channels_mu);
      for (const auto& t : tracked) {
        if (!t->retired.load()) all.push_back(t->index);
      }
    }
    for (uint32_t index : all) {
      if (absl::Status s = EnsureChannel(index); !s.ok()) return s;
    }
    Notice(absl::StrCat("continuing in ", file->path()));
  }
  return absl::OkStatus();
}

void Logger::Impl::WriterLoop() {
  for (;;) {
    std::unique_ptr<Batch> b;
    {
      std::unique_lock lock(queue_mu);
      queue_cv.wait(lock, [&] { return !queue.empty() || drain_done; });
      if (queue.empty()) break;
      b = std::move(queue.front());
      queue.pop_front();
    }
    if (!failed.load()) {
      const absl::Status s = WriteBatch(*b);
      // Before Fail(): whoever sees the failure sees what reached the file.
      PublishWritten();
      if (!s.ok()) Fail(s);
    }
    const size_t bytes = b->bytes();
    b->Clear();
    std::lock_guard lock(queue_mu);
    backlog_bytes -= bytes;
    if (spare.size() < 8) spare.push_back(std::move(b));
  }
  if (file != nullptr) {
    if (absl::Status s = CloseFile(); !s.ok()) Fail(s);
  }
}

}  // namespace tether::log
