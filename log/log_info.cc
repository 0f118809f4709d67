#include "log/log_info.h"

#include <algorithm>
#include <ctime>
#include <map>
#include <set>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "log/replay_plan.h"

namespace tether::log {
namespace {

std::string Bytes(uint64_t n) {
  if (n >= (1ull << 30)) return absl::StrFormat("%.2f GiB", n / double(1ull << 30));
  if (n >= (1ull << 20)) return absl::StrFormat("%.2f MiB", n / double(1ull << 20));
  if (n >= (1ull << 10)) return absl::StrFormat("%.1f KiB", n / 1024.0);
  return absl::StrFormat("%u B", n);
}

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      out += absl::StrFormat("\\u%04x", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string WallClock(int64_t realtime_ns) {
  if (realtime_ns <= 0) return "unknown";
  const time_t t = static_cast<time_t>(realtime_ns / 1'000'000'000);
  struct tm tm;
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

}  // namespace

absl::StatusOr<LogInfo> ComputeLogInfo(const std::string& path,
                                       const LogInfoOptions& options) {
  absl::StatusOr<std::unique_ptr<LogReader>> opened = LogReader::Open(path);
  if (!opened.ok()) return opened.status();
  LogReader& reader = **opened;
  const McapReader& mcap = reader.mcap();
  LogInfo info;
  info.path = path;
  info.file_size = mcap.file().size();
  info.indexed = mcap.indexed();
  info.profile = mcap.header().profile;
  info.library = mcap.header().library;
  info.problems = mcap.problems();

  struct Acc {
    uint64_t messages = 0, bytes = 0;
    int64_t first = 0, last = 0;
  };
  std::map<uint16_t, Acc> acc;
  // By MCAP channel id (LogReader::GapOwner: each loss counts once).
  std::map<uint16_t, uint64_t> missed;
  std::map<uint16_t, int64_t> stopped_corrupt;
  int64_t first_realtime = 0;
  {
    // One pass in file order (no reordering needed for totals).
    McapReadOptions o;
    o.force_scan = options.scan;
    std::unique_ptr<McapMessageIterator> it = reader.mcap().Messages(o);
    McapMessageView v;
    const LogChannel* gap = reader.FindChannel(kGapChannel);
    while (it->Next(&v)) {
      int64_t send = static_cast<int64_t>(v.message.publish_time);
      if (v.trailer.has_value()) {
        if (auto c = ParseContextRecord(*v.trailer)) send = c->monotonic_send_ns;
      }
      if (gap != nullptr && v.message.channel_id == gap->id) {
        auto g = DecodeGap(v.message.data);
        const LogChannel* owner = g.ok() ? reader.GapOwner(*g) : nullptr;
        if (owner != nullptr) {
          missed[owner->id] += g->missed;
          if (g->reason == GapRecord::Reason::kCorruptChannel) {
            int64_t& at = stopped_corrupt[owner->id];
            if (at == 0 || g->detected_monotonic_ns < at) {
              at = std::max<int64_t>(1, g->detected_monotonic_ns);
            }
          }
        }
        continue;
      }
      Acc& a = acc[v.message.channel_id];
      if (a.messages == 0 || send < a.first) a.first = send;
      if (a.messages == 0 || send > a.last) a.last = send;
      ++a.messages;
      a.bytes += v.message.data.size();
      const int64_t rt = static_cast<int64_t>(v.message.publish_time);
      if (first_realtime == 0 || rt < first_realtime) first_realtime = rt;
    }
    info.problems.insert(info.problems.end(), it->problems().begin(),
                         it->problems().end());
  }
  bool any = false;
  for (const LogChannel& c : reader.channels()) {
    if (c.is_gap_channel()) continue;
    ChannelInfoRow row;
    row.name = c.name;
    row.type = c.description.has_value() ? c.description->type_name
                                         : (c.schema_name.empty()
                                                ? c.message_encoding
                                                : c.schema_name);
    row.not_replayable = WhyNotReplayable(reader, c.name);
    row.replayable = row.not_replayable.empty();
    const Acc& a = acc[c.id];
    row.messages = a.messages;
    row.bytes = a.bytes;
    row.missed = missed[c.id];
    row.stopped_corrupt_ns = stopped_corrupt[c.id];
    if (a.messages > 1 && a.last > a.first) {
      row.rate_hz = (a.messages - 1) / ((a.last - a.first) / 1e9);
    }
    info.messages += row.messages;
    info.missed += row.missed;
    if (a.messages > 0) {
      info.start_ns = any ? std::min(info.start_ns, a.first) : a.first;
      info.end_ns = any ? std::max(info.end_ns, a.last) : a.last;
      any = true;
    }
    info.channels.push_back(std::move(row));
  }
  info.start_realtime_ns = first_realtime;
  std::set<std::string> compressions;
  if (mcap.indexed() && !options.scan) {
    for (const mcap::ChunkIndex& c : mcap.chunk_indexes()) {
      info.uncompressed_bytes += c.uncompressed_size;
      info.compressed_bytes += c.compressed_size;
      compressions.insert(
          c.compression.empty() ? "none" : absl::CHexEscape(c.compression));
    }
    info.chunks = mcap.chunk_indexes().size();
  } else {
    McapRecordScanner scanner(&mcap.file(), mcap.data_start());
    McapRecord rec;
    while (scanner.Next(&rec)) {
      if (rec.opcode != static_cast<uint8_t>(mcap::Opcode::kChunk)) continue;
      if (auto c = mcap::ParseChunk(rec.content); c.ok()) {
        info.uncompressed_bytes += c->uncompressed_size;
        info.compressed_bytes += c->records.size();
        compressions.insert(
            c->compression.empty() ? "none" : absl::CHexEscape(c->compression));
        ++info.chunks;
      }
    }
  }
  info.compression = absl::StrJoin(compressions, ", ");
  SortProblems(&info.problems);
  return info;
}

std::string FormatLogInfo(const LogInfo& info) {
  std::string out;
  absl::StrAppendFormat(&out, "file:        %s (%s%s)\n", info.path,
                        Bytes(info.file_size),
                        info.indexed ? ", indexed" : ", NOT indexed");
  absl::StrAppendFormat(&out, "written by:  %s%s\n", info.library,
                        info.profile.empty() ? "" : " (profile " + info.profile + ")");
  absl::StrAppendFormat(&out, "start:       %s\n", WallClock(info.start_realtime_ns));
  absl::StrAppendFormat(&out, "duration:    %.3f s\n", info.duration_s());
  absl::StrAppendFormat(&out, "messages:    %u in %u chunks, %u missed\n",
                        info.messages, info.chunks, info.missed);
  absl::StrAppendFormat(
      &out, "compression: %s, %s -> %s (ratio %.2f)\n",
      info.compression.empty() ? "none" : info.compression,
      Bytes(info.uncompressed_bytes), Bytes(info.compressed_bytes),
      info.compression_ratio());
  size_t w = 7, tw = 4;
  for (const ChannelInfoRow& r : info.channels) {
    w = std::max(w, r.name.size());
    tw = std::max(tw, r.type.size());
  }
  absl::StrAppendFormat(&out, "\n%-*s  %-*s  %10s  %9s  %10s  %8s\n", w,
                        "CHANNEL", tw, "TYPE", "MESSAGES", "RATE HZ", "BYTES",
                        "MISSED");
  for (const ChannelInfoRow& r : info.channels) {
    std::string notes = r.replayable ? "" : "  (not replayable)";
    if (r.stopped_corrupt_ns != 0) {
      absl::StrAppendFormat(
          &notes, "  (recording stopped at +%.3f s: its shared memory was "
                  "corrupt)",
          (r.stopped_corrupt_ns - info.start_ns) / 1e9);
    }
    absl::StrAppendFormat(&out, "%-*s  %-*s  %10u  %9.1f  %10s  %8u%s\n", w,
                          r.name, tw, r.type, r.messages, r.rate_hz,
                          Bytes(r.bytes), r.missed, notes);
  }
  // Why not, once a name (its incarnations share the reason).
  std::set<std::string> said;
  for (const ChannelInfoRow& r : info.channels) {
    if (r.replayable || !said.insert(r.name).second) continue;
    if (said.size() == 1) absl::StrAppend(&out, "\n");
    absl::StrAppend(&out, "not replayable: ", r.name, ": ", r.not_replayable,
                    "\n");
  }
  if (!info.problems.empty()) {
    absl::StrAppendFormat(&out, "\n%u problems (`tether log check` for all; "
                                "`tether log recover` to rewrite):\n",
                          info.problems.size());
    for (size_t i = 0; i < info.problems.size() && i < 10; ++i) {
      absl::StrAppend(&out, "  ", info.problems[i].ToString(), "\n");
    }
  }
  return out;
}

std::string FormatLogInfoJson(const LogInfo& info) {
  std::string out = absl::StrFormat(
      "{\"path\":%s,\"file_bytes\":%u,\"indexed\":%s,\"library\":%s,"
      "\"profile\":%s,\"start_monotonic_ns\":%d,\"end_monotonic_ns\":%d,"
      "\"start_realtime_ns\":%d,\"duration_s\":%.9f,\"messages\":%u,"
      "\"missed\":%u,\"chunks\":%u,\"compression\":%s,"
      "\"uncompressed_bytes\":%u,\"compressed_bytes\":%u,"
      "\"compression_ratio\":%.4f,\"channels\":[",
      Quote(info.path), info.file_size, info.indexed ? "true" : "false",
      Quote(info.library), Quote(info.profile), info.start_ns, info.end_ns,
      info.start_realtime_ns, info.duration_s(), info.messages, info.missed,
      info.chunks, Quote(info.compression), info.uncompressed_bytes,
      info.compressed_bytes, info.compression_ratio());
  for (size_t i = 0; i < info.channels.size(); ++i) {
    const ChannelInfoRow& r = info.channels[i];
    absl::StrAppendFormat(
        &out,
        "%s{\"name\":%s,\"type\":%s,\"messages\":%u,\"rate_hz\":%.6g,"
        "\"bytes\":%u,\"missed\":%u,\"replayable\":%s,"
        "\"not_replayable\":%s,\"stopped_corrupt_monotonic_ns\":%d}",
        i == 0 ? "" : ",", Quote(r.name), Quote(r.type), r.messages, r.rate_hz,
        r.bytes, r.missed, r.replayable ? "true" : "false",
        Quote(r.not_replayable), r.stopped_corrupt_ns);
  }
  out += "],\"problems\":[";
  for (size_t i = 0; i < info.problems.size(); ++i) {
    absl::StrAppendFormat(&out, "%s{\"offset\":%u,\"what\":%s}",
                          i == 0 ? "" : ",", info.problems[i].offset,
                          Quote(info.problems[i].what));
  }
  return out + "]}\n";
}

}  // namespace tether::log
