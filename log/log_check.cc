#include "log/log_check.h"

#include <algorithm>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "log/compression.h"
#include "log/log_check_summary.h"
#include "log/log_format.h"
#include "log/log_reader.h"
#include "transport/dynamic.h"

namespace tether::log {
namespace {

struct FoundChunk {
  uint64_t offset = 0;
  uint64_t length = 0;
  mcap::Chunk header;  // records span not kept
  bool intact = false;
  uint64_t messages = 0;
  uint64_t min_time = 0, max_time = 0;
  std::map<uint16_t, std::vector<std::pair<uint64_t, uint64_t>>> computed;
  std::map<uint16_t, mcap::MessageIndex> found;
  std::map<uint16_t, uint64_t> found_offsets;
  uint64_t found_length = 0;
};

// Counts problems added by one group of checks, for the "passed" lines.
class Section {
 public:
  Section(CheckReport* report, std::string passed)
      : report_(report), before_(report->problems.size()),
        passed_(std::move(passed)) {}
  ~Section() {
    if (report_->problems.size() == before_ && !passed_.empty()) {
      report_->passed.push_back(passed_);
    }
  }
  void set_passed(std::string text) { passed_ = std::move(text); }

 private:
  CheckReport* report_;
  size_t before_;
  std::string passed_;
};

}  // namespace

absl::StatusOr<CheckReport> CheckLog(const std::string& path) {
  absl::StatusOr<std::unique_ptr<McapReader>> opened = McapReader::Open(path);
  if (!opened.ok()) return opened.status();
  McapReader& reader = **opened;
  CheckReport report;
  for (const McapProblem& p : reader.problems()) report.problems.push_back(p);

  std::map<uint16_t, mcap::Schema> schemas;
  std::map<uint16_t, mcap::Channel> channels;
  std::vector<FoundChunk> chunks;
  std::map<uint16_t, uint64_t> per_channel;
  uint64_t messages = 0, no_context = 0, metadata = 0, top_level = 0;
  uint64_t min_time = 0, max_time = 0, no_crc = 0, gap_messages = 0;
  uint64_t unreadable_chunks = 0;  // chunks whose records could not be read
  std::optional<uint16_t> gap_channel;
  std::vector<std::byte> records;

  auto define_schema = [&](const mcap::Schema& s, uint64_t at) {
    auto [it, added] = schemas.try_emplace(s.id, s);
    if (!added && !(it->second == s)) {
      report.problems.push_back(
          {at, absl::StrCat("schema id ", s.id, " is defined twice, differently")});
    }
  };
  auto define_channel = [&](const mcap::Channel& c, uint64_t at) {
    if (c.schema_id != 0 && schemas.count(c.schema_id) == 0) {
      report.problems.push_back(
          {at, absl::StrCat("channel ", c.topic, " refers to schema ",
                            c.schema_id, " before any Schema record defines it")});
    }
    auto [it, added] = channels.try_emplace(c.id, c);
    if (!added && !(it->second == c)) {
      report.problems.push_back(
          {at, absl::StrCat("channel id ", c.id, " is defined twice, differently")});
    }
    if (c.topic == kGapChannel) gap_channel = c.id;
  };
  // Every message of a Cap'n Proto channel, decoded as its schema says
  // (what a typed reader, `tether log cat` and replay need of it).
  struct Undecodable {
    uint64_t count = 0;
    uint64_t first_at = 0;
    std::string why;
  };
  std::map<uint16_t, std::optional<LoadedMessageType>> types;  // none: noted
  std::map<uint16_t, Undecodable> undecodable;
  uint64_t decode_checked = 0;
  auto check_decodes = [&](const mcap::Message& m, uint64_t at) {
    auto channel = channels.find(m.channel_id);
    if (channel == channels.end() ||
        channel->second.message_encoding != kCapnpEncoding ||
        channel->second.topic == kGapChannel) {
      return;
    }
    auto [type, added] = types.try_emplace(m.channel_id);
    if (added) {
      const mcap::Channel& c = channel->second;
      const mcap::Schema* schema = nullptr;
      if (auto it = schemas.find(c.schema_id); it != schemas.end()) {
        schema = &it->second;
      }
      std::optional<uint64_t> type_id;
      if (auto d = ParseChannelDescription(c, schema); d.ok()) {
        type_id = d->type_id;
      }
      absl::StatusOr<LoadedMessageType> loaded =
          LoadMessageType(c.topic, c.message_encoding, schema, type_id);
      if (loaded.ok()) {
        type->second = *std::move(loaded);
      } else {
        report.notes.push_back(absl::StrCat(
            loaded.status().message(), "; its messages are not decoded"));
      }
    }
    if (!type->second.has_value()) return;
    ++decode_checked;
    const absl::Status decodes =
        transport::CheckMessageDecodes(type->second->type, m.data);
    if (decodes.ok()) return;
    Undecodable& u = undecodable[m.channel_id];
    if (u.count++ == 0) {
      u.first_at = at;
      u.why = std::string(decodes.message());
    }
  };
  auto count_message = [&](const mcap::Message& m, uint64_t at) {
    check_decodes(m, at);
    if (channels.count(m.channel_id) == 0) {
      report.problems.push_back(
          {at, absl::StrCat("message on channel id ", m.channel_id,
                            " before its Channel record")});
    }
    if (messages == 0) {
      min_time = max_time = m.log_time;
    } else {
      min_time = std::min(min_time, m.log_time);
      max_time = std::max(max_time, m.log_time);
    }
    ++messages;
    ++per_channel[m.channel_id];
    if (gap_channel.has_value() && m.channel_id == *gap_channel) {
      ++gap_messages;
      absl::StatusOr<GapRecord> g = DecodeGap(m.data);
      if (!g.ok()) {
        report.problems.push_back({at, "a loss record on /tether/log/gaps "
                                       "does not decode as LogGap"});
      } else if (g->mcap_channel_id.has_value()) {
        // It names the MCAP channel (incarnation) that lost the messages.
        auto owner = channels.find(*g->mcap_channel_id);
        if (owner == channels.end() || owner->second.topic != g->channel) {
          report.problems.push_back(
              {at, absl::StrCat("a loss record of ", g->channel,
                                " names channel id ", *g->mcap_channel_id,
                                ", which is ",
                                owner == channels.end()
                                    ? std::string("not defined before it")
                                    : owner->second.topic)});
        }
      }
    }
  };

  {
    Section records_section(&report, "");
    McapRecordScanner scanner(&reader.file(), reader.data_start());
    McapRecord rec;
    FoundChunk* last_chunk = nullptr;
    while (scanner.Next(&rec)) {
      const auto opcode = static_cast<mcap::Opcode>(rec.opcode);
      if (opcode != mcap::Opcode::kMessageIndex) last_chunk = nullptr;
      switch (opcode) {
        case mcap::Opcode::kSchema: {
          auto s = mcap::ParseSchema(rec.content);
          if (!s.ok()) {
            scanner.Reject(rec, std::string(s.status().message()), false);
          } else {
            define_schema(*s, rec.offset);
          }
          break;
        }
        case mcap::Opcode::kChannel: {
          auto c = mcap::ParseChannel(rec.content);
          if (!c.ok()) {
            scanner.Reject(rec, std::string(c.status().message()), false);
          } else {
            define_channel(*c, rec.offset);
          }
          break;
        }
        case mcap::Opcode::kMessage: {
          auto m = mcap::ParseMessage(rec.content);
          if (!m.ok()) {
            scanner.Reject(rec, std::string(m.status().message()), false);
          } else {
            ++top_level;
            count_message(*m, rec.offset);
          }
          break;
        }
        case mcap::Opcode::kMetadata: {
          ++metadata;
          if (auto m = mcap::ParseMetadata(rec.content); !m.ok()) {
            scanner.Reject(rec, std::string(m.status().message()), false);
          }
          break;
        }
        case mcap::Opcode::kMessageIndex: {
          auto mi = mcap::ParseMessageIndex(rec.content);
          if (!mi.ok()) {
            scanner.Reject(rec, std::string(mi.status().message()), false);
            break;
          }
          if (last_chunk == nullptr) {
            report.problems.push_back(
                {rec.offset, "message index that does not follow a chunk"});
            break;
          }
          last_chunk->found_offsets[mi->channel_id] = rec.offset;
          last_chunk->found_length += rec.size();
          last_chunk->found[mi->channel_id] = std::move(*mi);
          break;
        }
        case mcap::Opcode::kChunk: {
          absl::StatusOr<mcap::Chunk> chunk = mcap::ParseChunk(rec.content);
          if (!chunk.ok()) {
            ++unreadable_chunks;
            scanner.Reject(rec,
                           absl::StrCat(chunk.status().message(),
                                        "; skipping to the next intact chunk"),
                           true);
            break;
          }
          chunks.emplace_back();
          FoundChunk& fc = chunks.back();
          last_chunk = &fc;
          fc.offset = rec.offset;
          fc.length = rec.size();
          fc.header = *chunk;
          fc.header.records = {};
          if (chunk->uncompressed_crc == 0) ++no_crc;
          if (absl::Status s = DecompressChunk(*chunk, &records); !s.ok()) {
            ++unreadable_chunks;
            report.problems.push_back(
                {rec.offset, absl::StrCat(s.message(), "; its messages are lost")});
            break;
          }
          fc.intact = true;
          uint64_t pos = 0;
          mcap::RecordView inner;
          for (;;) {
            const uint64_t at = pos;
            const mcap::SplitStatus split = mcap::SplitRecord(records, &pos, &inner);
            if (split == mcap::SplitStatus::kEnd) break;
            if (split == mcap::SplitStatus::kTruncated) {
              report.problems.push_back(
                  {rec.offset, absl::StrFormat("chunk: record at chunk offset "
                                               "%u runs past the chunk's end",
                                               at)});
              break;
            }
            switch (static_cast<mcap::Opcode>(inner.opcode)) {
              case mcap::Opcode::kMessage: {
                auto m = mcap::ParseMessage(inner.content);
                if (!m.ok()) {
                  report.problems.push_back(
                      {rec.offset, absl::StrCat("chunk offset ", at, ": ",
                                                m.status().message())});
                  break;
                }
                count_message(*m, rec.offset);
                fc.computed[m->channel_id].emplace_back(m->log_time, at);
                if (fc.messages == 0) {
                  fc.min_time = fc.max_time = m->log_time;
                } else {
                  fc.min_time = std::min(fc.min_time, m->log_time);
                  fc.max_time = std::max(fc.max_time, m->log_time);
                }
                ++fc.messages;
                uint64_t peek = pos;
                mcap::RecordView next;
                std::optional<MessageContextRecord> ctx;
                if (mcap::SplitRecord(records, &peek, &next) ==
                    mcap::SplitStatus::kOk) {
                  ctx = ParseContextRecord(next);
                }
                if (!ctx.has_value() || ctx->channel_id != m->channel_id) {
                  ++no_context;
                }
                break;
              }
              case mcap::Opcode::kSchema: {
                auto s = mcap::ParseSchema(inner.content);
                if (s.ok()) define_schema(*s, rec.offset);
                break;
              }
              case mcap::Opcode::kChannel: {
                auto c = mcap::ParseChannel(inner.content);
                if (c.ok()) define_channel(*c, rec.offset);
                break;
              }
              default:
                if (inner.opcode < mcap::kFirstPrivateOpcode) {
                  report.problems.push_back(
                      {rec.offset,
                       absl::StrCat(mcap::OpcodeName(inner.opcode),
                                    " record is not allowed inside a chunk")});
                }
                break;
            }
          }
          if (fc.messages > 0 && (fc.min_time != chunk->message_start_time ||
                                  fc.max_time != chunk->message_end_time)) {
            report.problems.push_back(
                {rec.offset,
                 absl::StrFormat("chunk says its messages span %u..%u but "
                                 "they span %u..%u",
                                 chunk->message_start_time,
                                 chunk->message_end_time, fc.min_time,
                                 fc.max_time)});
          }
          break;
        }
        default:
          break;
      }
    }
    report.problems.insert(report.problems.end(), scanner.problems().begin(),
                           scanner.problems().end());
    const uint64_t intact = static_cast<uint64_t>(std::count_if(
        chunks.begin(), chunks.end(), [](const FoundChunk& c) { return c.intact; }));
    records_section.set_passed(absl::StrFormat(
        "records: every record frames and parses; %u chunks (%u with CRCs, "
        "all matching), %u messages",
        intact, intact - no_crc, messages));

    // Data End and the data section CRC.
    Section crc(&report, "");
    if (scanner.data_end_offset() == 0) {
      report.problems.push_back(
          {reader.file().size(), "no Data End record: the data section does "
                                 "not end properly (writer killed?)"});
    } else {
      std::vector<std::byte> buf;
      const uint64_t end = scanner.data_end_offset();
      if (reader.file().ReadAt(end, mcap::kDataEndRecordSize, &buf).ok() &&
          buf.size() == mcap::kDataEndRecordSize) {
        auto de = mcap::ParseDataEnd(
            std::span<const std::byte>(buf).subspan(mcap::kRecordHeaderSize));
        if (de.ok() && de->data_section_crc != 0) {
          uint32_t c = 0;
          for (uint64_t at = 0; at < end; at += 8 << 20) {
            if (!reader.file().ReadAt(at, std::min<uint64_t>(8 << 20, end - at), &buf)
                     .ok()) {
              break;
            }
            c = Crc32(buf, c);
          }
          if (c != de->data_section_crc) {
            report.problems.push_back(
                {end, absl::StrFormat("data section CRC mismatch (bytes hash "
                                      "to 0x%08x, Data End says 0x%08x)",
                                      c, de->data_section_crc)});
          } else {
            crc.set_passed("data section CRC matches");
          }
        } else {
          report.notes.push_back("the data section has no CRC");
        }
      }
    }
  }

  // What the message checks below could look at: with a chunk lost, "all
  // messages" would claim what nobody read.
  const uint64_t readable_chunks = static_cast<uint64_t>(std::count_if(
      chunks.begin(), chunks.end(), [](const FoundChunk& c) { return c.intact; }));
  const std::string of_readable =
      unreadable_chunks == 0
          ? std::string()
          : absl::StrFormat(" (only the %u readable chunks of %u: the "
                            "messages of the others are lost, see FAIL)",
                            readable_chunks, readable_chunks + unreadable_chunks);
  {
    Section decoding(&report,
                     absl::StrFormat("messages: all %u of Cap'n Proto "
                                     "channels decode with their schemas%s",
                                     decode_checked, of_readable));
    for (const auto& [id, u] : undecodable) {
      const mcap::Channel& c = channels.at(id);
      report.problems.push_back(
          {u.first_at,
           absl::StrFormat("%u of %u messages on %s do not decode (the first "
                           "in this record: %s): typed readers skip them, "
                           "`tether replay` does not publish them, `tether "
                           "log cat` shows them as undecodable",
                           u.count, per_channel[id], c.topic, u.why)});
      report.undecodable_messages += u.count;
      ++report.undecodable_problems;
    }
  }

  {
    Section indexes(&report, absl::StrFormat(
                                 "message indexes: every message of every "
                                 "chunk indexed, nothing else (%u chunks)%s",
                                 readable_chunks, of_readable));
    for (FoundChunk& fc : chunks) {
      if (!fc.intact) continue;
      for (auto& [channel, entries] : fc.computed) {
        auto it = fc.found.find(channel);
        if (it == fc.found.end()) {
          report.problems.push_back(
              {fc.offset, absl::StrCat("chunk has messages on channel ", channel,
                                       " but no message index for it")});
          continue;
        }
        auto want = entries;
        auto got = it->second.records;
        auto order = [](const auto& a, const auto& b) { return a < b; };
        std::sort(want.begin(), want.end(), order);
        std::sort(got.begin(), got.end(), order);
        if (want != got) {
          report.problems.push_back(
              {fc.found_offsets[channel],
               absl::StrCat("message index of channel ", channel,
                            " does not match the chunk's messages (",
                            got.size(), " entries for ", want.size(),
                            " messages)")});
        }
      }
      for (const auto& [channel, mi] : fc.found) {
        if (fc.computed.count(channel) == 0 && !mi.records.empty()) {
          report.problems.push_back(
              {fc.found_offsets[channel],
               absl::StrCat("message index for channel ", channel,
                            " which has no messages in the chunk")});
        }
      }
    }
  }

  if (reader.indexed()) {
    Section summary(&report, "summary: CRC, schema and channel copies, chunk "
                             "indexes, statistics and summary offsets agree "
                             "with the data section");
    const uint64_t at = reader.footer()->summary_start;
    for (const auto& [id, s] : schemas) {
      auto it = reader.schemas().find(id);
      if (it == reader.schemas().end() || !(it->second == s)) {
        report.problems.push_back(
            {at, absl::StrCat("summary lacks (or differs in) schema ", id)});
      }
    }
    for (const auto& [id, c] : channels) {
      auto it = reader.channels().find(id);
      if (it == reader.channels().end() || !(it->second == c)) {
        report.problems.push_back(
            {at, absl::StrCat("summary lacks (or differs in) channel ", c.topic)});
      }
    }
    std::map<uint64_t, const FoundChunk*> by_offset;
    for (const FoundChunk& fc : chunks) by_offset[fc.offset] = &fc;
    for (const mcap::ChunkIndex& ci : reader.chunk_indexes()) {
      auto it = by_offset.find(ci.chunk_start_offset);
      if (it == by_offset.end()) {
        report.problems.push_back(
            {ci.chunk_start_offset, "chunk index points where there is no chunk"});
        continue;
      }
      const FoundChunk& fc = *it->second;
      by_offset.erase(it);
      if (ci.chunk_length != fc.length ||
          ci.compression != fc.header.compression ||
          ci.uncompressed_size != fc.header.uncompressed_size ||
          ci.message_start_time != fc.header.message_start_time ||
          ci.message_end_time != fc.header.message_end_time ||
          ci.message_index_offsets != fc.found_offsets ||
          ci.message_index_length != fc.found_length) {
        report.problems.push_back(
            {ci.chunk_start_offset,
             "chunk index disagrees with its chunk (length, compression, "
             "sizes, times or message index offsets)"});
      }
    }
    for (const auto& [offset, fc] : by_offset) {
      report.problems.push_back({offset, "chunk missing from the chunk indexes"});
    }
    if (reader.statistics().has_value()) {
      const mcap::Statistics& st = *reader.statistics();
      std::map<uint16_t, uint64_t> counted = per_channel;
      std::map<uint16_t, uint64_t> stated;
      for (const auto& [id, n] : st.channel_message_counts) {
        if (n != 0) stated[id] = n;
      }
      if (st.message_count != messages || st.chunk_count != chunks.size() ||
          st.channel_count != channels.size() ||
          st.schema_count != schemas.size() || st.metadata_count != metadata ||
          (messages > 0 && (st.message_start_time != min_time ||
                            st.message_end_time != max_time)) ||
          (!st.channel_message_counts.empty() && stated != counted)) {
        report.problems.push_back(
            {at, absl::StrFormat("statistics disagree with the file (say %u "
                                 "messages in %u chunks, found %u in %u)",
                                 st.message_count, st.chunk_count, messages,
                                 chunks.size())});
      }
    } else {
      report.notes.push_back("the summary has no statistics record");
    }
    CheckSummaryOffsets(reader.file(), at, &report);
  } else {
    report.notes.push_back(
        "no usable summary: standard readers cannot open this file indexed "
        "(`tether log recover` rewrites it complete)");
  }

  {
    Section tether(&report, "");
    uint64_t described = 0;
    for (const auto& [id, c] : channels) {
      const mcap::Schema* schema = nullptr;
      if (auto it = schemas.find(c.schema_id); it != schemas.end()) {
        schema = &it->second;
      }
      if (c.topic == kGapChannel) continue;
      if (ParseChannelDescription(c, schema).ok()) {
        ++described;
      } else {
        report.notes.push_back(absl::StrCat(
            "channel ", c.topic, " has no tether metadata (replay cannot "
                                 "recreate it)"));
      }
    }
    if (no_context > 0) {
      report.notes.push_back(absl::StrCat(
          no_context, " messages have no tether context record (send times "
                      "then come from MCAP's publish_time)"));
    }
    tether.set_passed(absl::StrFormat(
        "tether: %u channels described, context on %u of %u messages, %u "
        "loss records decode%s",
        described, messages - no_context, messages, gap_messages,
        of_readable));
  }
  if (top_level > 0) {
    report.notes.push_back(absl::StrCat(
        top_level, " messages outside chunks (not reachable by an indexed "
                   "reader)"));
  }
  report.messages = messages;
  report.chunks = chunks.size();
  SortProblems(&report.problems);
  return report;
}

}  // namespace tether::log
