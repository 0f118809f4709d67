#include "log/log_recover.h"

#include <algorithm>
#include <map>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "log/log_format.h"

namespace tether::log {

absl::StatusOr<RecoverReport> RecoverLog(const std::string& in,
                                         const std::string& out,
                                         const McapWriterOptions& options) {
  if (absl::Status s = CheckOutputIsNotInput(in, out, "recover"); !s.ok()) {
    return s;
  }
  absl::StatusOr<std::unique_ptr<McapReader>> opened = McapReader::Open(in);
  if (!opened.ok()) return opened.status();
  McapReader& reader = **opened;
  RecoverReport report;
  report.problems = reader.problems();
  report.input_was_complete = reader.indexed() && reader.problems().empty();

  McapWriterOptions o = options;
  o.profile = reader.header().profile;
  o.library = absl::StrCat(reader.header().library,
                           " (recovered by tether log recover)");
  absl::StatusOr<std::unique_ptr<McapWriter>> created = McapWriter::Create(out, o);
  if (!created.ok()) return created.status();
  McapWriter& writer = **created;
  // A failed recovery leaves no output: a partial OUT would look like a
  // (smaller) recovered log.
  auto fail = [&writer](absl::Status status) {
    writer.Discard();
    return status;
  };

  for (const mcap::Metadata& m : reader.metadata()) {
    if (m.name == kSummaryMetadata) continue;
    if (absl::Status s = writer.WriteMetadata(m); !s.ok()) return fail(s);
  }
  std::map<uint16_t, uint16_t> channel_ids;
  std::map<uint16_t, uint16_t> schema_ids;
  auto ensure = [&](uint16_t old) -> absl::StatusOr<uint16_t> {
    if (auto it = channel_ids.find(old); it != channel_ids.end()) {
      return it->second;
    }
    auto c = reader.channels().find(old);
    if (c == reader.channels().end()) {
      return absl::NotFoundError(absl::StrCat("channel id ", old));
    }
    uint16_t schema = 0;
    if (c->second.schema_id != 0) {
      auto known = schema_ids.find(c->second.schema_id);
      if (known != schema_ids.end()) {
        schema = known->second;
      } else if (auto s = reader.schemas().find(c->second.schema_id);
                 s != reader.schemas().end()) {
        absl::StatusOr<uint16_t> id =
            writer.AddSchema(s->second.name, s->second.encoding, s->second.data);
        if (!id.ok()) return id.status();
        schema = schema_ids[c->second.schema_id] = *id;
      }
    }
    absl::StatusOr<uint16_t> id =
        writer.AddChannel(schema, c->second.topic, c->second.message_encoding,
                          c->second.metadata);
    if (!id.ok()) return id.status();
    ++report.channels;
    return channel_ids[old] = *id;
  };
  for (const auto& [id, c] : reader.channels()) {
    if (absl::StatusOr<uint16_t> s = ensure(id); !s.ok()) {
      return fail(s.status());
    }
  }

  McapReadOptions ro;
  ro.force_scan = true;
  std::unique_ptr<McapMessageIterator> it = reader.Messages(ro);
  std::map<std::string, uint64_t> messages, missed;
  std::vector<std::byte> trailer;
  McapMessageView v;
  uint64_t orphans = 0, bad_gaps = 0, bad_gap_offset = 0;
  while (it->Next(&v)) {
    absl::StatusOr<uint16_t> id = ensure(v.message.channel_id);
    if (!id.ok()) {
      ++orphans;  // a message whose channel record was lost with its chunk
      continue;
    }
    const std::string& topic = reader.channels().at(v.message.channel_id).topic;
    std::optional<GapRecord> gap;
    if (topic == kGapChannel) {
      // A loss record that does not decode would make the new file fail
      // `tether log check`: leave it out, and say so.
      absl::StatusOr<GapRecord> g = DecodeGap(v.message.data);
      if (!g.ok()) {
        ++bad_gaps;
        bad_gap_offset = bad_gap_offset == 0 ? v.chunk_offset : bad_gap_offset;
        continue;
      }
      gap = *g;
    }
    // Channel ids may be renumbered here: a loss record names the new id of
    // the channel it is about (or none, if that channel's record was lost).
    std::vector<std::byte> recoded;
    if (gap.has_value() && gap->mcap_channel_id.has_value()) {
      absl::StatusOr<uint16_t> owner = ensure(*gap->mcap_channel_id);
      absl::StatusOr<std::vector<std::byte>> with = WithGapChannelId(
          v.message.data,
          owner.ok() ? std::optional<uint16_t>(*owner) : std::nullopt);
      if (with.ok()) recoded = std::move(*with);  // it decoded just above
    }
    trailer.clear();
    if (v.trailer.has_value()) {
      if (std::optional<MessageContextRecord> c = ParseContextRecord(*v.trailer)) {
        c->channel_id = *id;
        AppendContextRecord(*c, &trailer);
      } else {
        mcap::AppendRecord(v.trailer->opcode, v.trailer->content, &trailer);
      }
    }
    mcap::Message m = v.message;
    m.channel_id = *id;
    if (!recoded.empty()) m.data = recoded;
    if (absl::Status s = writer.WriteMessage(m, trailer); !s.ok()) {
      return fail(s);
    }
    ++report.messages;
    ++messages[topic];
    if (gap.has_value()) missed[gap->channel] += gap->missed;
  }
  report.chunks_read = it->chunks_read();
  report.problems.insert(report.problems.end(), it->problems().begin(),
                         it->problems().end());
  SortProblems(&report.problems);
  if (bad_gaps > 0) {
    report.problems.push_back(
        {bad_gap_offset,
         absl::StrCat(bad_gaps, " loss records on ", kGapChannel,
                      " do not decode as LogGap; they are left out")});
  }
  report.orphans = orphans;
  if (orphans > 0) {
    report.problems.push_back(
        {0, absl::StrCat(orphans, " messages name a channel whose record was "
                                  "lost; they are left out")});
  }
  mcap::KeyValueMap summary;
  for (const auto& [topic, n] : messages) {
    if (topic == kGapChannel) continue;
    summary[absl::StrCat("messages ", topic)] = absl::StrCat(n);
    summary[absl::StrCat("missed ", topic)] = absl::StrCat(missed[topic]);
  }
  summary["recovered_from"] = in;
  summary["recovered_problems"] = absl::StrCat(report.problems.size());
  for (size_t i = 0; i < report.problems.size() && i < 20; ++i) {
    summary[absl::StrCat("recovered_problem_", i)] = report.problems[i].ToString();
  }
  if (absl::Status s = writer.WriteMetadata({kSummaryMetadata, summary});
      !s.ok()) {
    return fail(s);
  }
  if (absl::Status s = writer.Close(); !s.ok()) return fail(s);
  return report;
}

}  // namespace tether::log
