#include "log/mcap_reader.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "log/compression.h"

namespace tether::log {

using internal::kMaxSmallRecord;

absl::Status DecompressChunk(const mcap::Chunk& chunk,
                             std::vector<std::byte>* records) {
  if (absl::Status s = Decompress(chunk.compression, chunk.records,
                                  chunk.uncompressed_size, records);
      !s.ok()) {
    return s;
  }
  if (chunk.uncompressed_crc != 0) {
    const uint32_t crc = Crc32(*records);
    if (crc != chunk.uncompressed_crc) {
      return absl::DataLossError(absl::StrFormat(
          "chunk CRC mismatch (records hash to 0x%08x, the chunk says "
          "0x%08x): its contents are corrupt",
          crc, chunk.uncompressed_crc));
    }
  }
  return absl::OkStatus();
}

// --- reader -----------------------------------------------------------------

absl::StatusOr<std::unique_ptr<McapReader>> McapReader::Open(
    const std::string& path) {
  absl::StatusOr<std::unique_ptr<McapFile>> file = McapFile::Open(path);
  if (!file.ok()) return file.status();
  std::unique_ptr<McapReader> r(new McapReader());
  r->file_ = std::move(*file);
  if (absl::Status s = r->ReadHeader(); !s.ok()) return s;
  r->ReadSummary();
  if (!r->indexed_) r->ScanForDefinitions();
  return r;
}

absl::Status McapReader::ReadHeader() {
  const std::string& path = file_->path();
  std::vector<std::byte> start;
  if (absl::Status s =
          file_->ReadAt(0, mcap::kMagicSize + mcap::kRecordHeaderSize, &start);
      !s.ok()) {
    return s;
  }
  if (start.size() < mcap::kMagicSize ||
      !std::equal(start.begin(), start.begin() + mcap::kMagicSize,
                  mcap::kMagic)) {
    return absl::DataLossError(absl::StrCat(
        path, " is not an MCAP file: it does not start with the MCAP magic "
              "(89 4D 43 41 50 30 0D 0A)"));
  }
  if (start.size() < mcap::kMagicSize + mcap::kRecordHeaderSize ||
      static_cast<uint8_t>(start[mcap::kMagicSize]) !=
          static_cast<uint8_t>(mcap::Opcode::kHeader)) {
    return absl::DataLossError(absl::StrCat(
        path, ": offset 8: no Header record after the magic (the file is "
              "truncated or corrupt at its start)"));
  }
  const uint64_t length = mcap::LoadU64(start.data() + mcap::kMagicSize + 1);
  const uint64_t content_at = mcap::kMagicSize + mcap::kRecordHeaderSize;
  if (length > kMaxSmallRecord || content_at + length > file_->size()) {
    return absl::DataLossError(absl::StrCat(
        path, ": offset 8: ",
        internal::TruncatedRecordText(
            static_cast<uint8_t>(mcap::Opcode::kHeader), length,
            file_->size() - content_at)));
  }
  std::vector<std::byte> content;
  if (absl::Status s = file_->ReadAt(content_at, length, &content); !s.ok()) {
    return s;
  }
  absl::StatusOr<mcap::Header> header = mcap::ParseHeader(content);
  if (!header.ok()) {
    return absl::DataLossError(
        absl::StrCat(path, ": offset 8: ", header.status().message()));
  }
  header_ = std::move(*header);
  data_start_ = content_at + length;
  return absl::OkStatus();
}

void McapReader::ReadSummary() {
  const uint64_t size = file_->size();
  const uint64_t tail = mcap::kFooterRecordSize + mcap::kMagicSize;
  const char* kScan =
      "; reading by scanning the data section (`tether log recover` rewrites "
      "the file complete)";
  if (size < data_start_ + tail) {
    problems_.push_back(
        {size, absl::StrCat("no footer: the file ends before one (its writer "
                            "was killed or it is truncated)",
                            kScan)});
    return;
  }
  std::vector<std::byte> end;
  if (!file_->ReadAt(size - tail, tail, &end).ok()) return;
  const uint64_t footer_offset = size - tail;
  if (!std::equal(end.end() - mcap::kMagicSize, end.end(), mcap::kMagic)) {
    problems_.push_back(
        {size - mcap::kMagicSize,
         absl::StrCat("the file does not end with the MCAP magic: no footer "
                      "or summary (its writer was killed or it is truncated)",
                      kScan)});
    return;
  }
  if (static_cast<uint8_t>(end[0]) !=
          static_cast<uint8_t>(mcap::Opcode::kFooter) ||
      mcap::LoadU64(end.data() + 1) != mcap::kFooterRecordSize -
                                           mcap::kRecordHeaderSize) {
    problems_.push_back(
        {footer_offset, absl::StrCat("no valid Footer record before the "
                                     "closing magic",
                                     kScan)});
    return;
  }
  absl::StatusOr<mcap::Footer> footer = mcap::ParseFooter(
      std::span<const std::byte>(end).subspan(mcap::kRecordHeaderSize, 20));
  if (!footer.ok()) return;
  footer_ = *footer;
  if (footer_->summary_start == 0) return;  // valid, just not indexed
  if (footer_->summary_start < data_start_ + mcap::kDataEndRecordSize ||
      footer_->summary_start > footer_offset) {
    problems_.push_back(
        {footer_offset,
         absl::StrCat("footer's summary start ", footer_->summary_start,
                      " is outside the file's data", kScan)});
    return;
  }
  std::vector<std::byte> summary;
  if (!file_->ReadAt(footer_->summary_start,
                     footer_offset - footer_->summary_start, &summary)
           .ok()) {
    return;
  }
  if (footer_->summary_crc != 0) {
    uint32_t crc = Crc32(summary);
    crc = Crc32(std::span<const std::byte>(end).subspan(
                    0, mcap::kRecordHeaderSize + 16),
                crc);
    if (crc != footer_->summary_crc) {
      problems_.push_back(
          {footer_->summary_start,
           absl::StrFormat("summary CRC mismatch (computed 0x%08x, the "
                           "footer says 0x%08x): the summary is corrupt%s",
                           crc, footer_->summary_crc, kScan)});
      return;
    }
  }
  std::vector<std::byte> data_end;
  if (file_->ReadAt(footer_->summary_start - mcap::kDataEndRecordSize,
                    mcap::kDataEndRecordSize, &data_end)
          .ok() &&
      static_cast<uint8_t>(data_end[0]) !=
          static_cast<uint8_t>(mcap::Opcode::kDataEnd)) {
    problems_.push_back(
        {footer_->summary_start - mcap::kDataEndRecordSize,
         "no Data End record right before the summary"});
  }
  std::map<uint16_t, mcap::Schema> schemas;
  std::map<uint16_t, mcap::Channel> channels;
  std::vector<mcap::ChunkIndex> chunks;
  std::vector<mcap::MetadataIndex> metadata;
  std::optional<mcap::Statistics> statistics;
  uint64_t pos = 0;
  mcap::RecordView rec;
  for (;;) {
    const mcap::SplitStatus split = mcap::SplitRecord(summary, &pos, &rec);
    if (split == mcap::SplitStatus::kEnd) break;
    const uint64_t at = footer_->summary_start + rec.offset;
    if (split == mcap::SplitStatus::kTruncated) {
      problems_.push_back(
          {footer_->summary_start + pos,
           absl::StrCat("summary record runs past the footer", kScan)});
      return;
    }
    absl::Status bad;
    switch (static_cast<mcap::Opcode>(rec.opcode)) {
      case mcap::Opcode::kSchema: {
        auto s = mcap::ParseSchema(rec.content);
        if (s.ok()) {
          schemas[s->id] = std::move(*s);
        } else {
          bad = s.status();
        }
        break;
      }
      case mcap::Opcode::kChannel: {
        auto c = mcap::ParseChannel(rec.content);
        if (c.ok()) {
          channels[c->id] = std::move(*c);
        } else {
          bad = c.status();
        }
        break;
      }
      case mcap::Opcode::kChunkIndex: {
        auto c = mcap::ParseChunkIndex(rec.content);
        if (c.ok()) {
          chunks.push_back(std::move(*c));
        } else {
          bad = c.status();
        }
        break;
      }
      case mcap::Opcode::kMetadataIndex: {
        auto m = mcap::ParseMetadataIndex(rec.content);
        if (m.ok()) {
          metadata.push_back(std::move(*m));
        } else {
          bad = m.status();
        }
        break;
      }
      case mcap::Opcode::kStatistics: {
        auto s = mcap::ParseStatistics(rec.content);
        if (s.ok()) {
          statistics = std::move(*s);
        } else {
          bad = s.status();
        }
        break;
      }
      default:
        break;  // summary offsets, attachment indexes, unknown: not needed
    }
    if (!bad.ok()) {
      problems_.push_back({at, absl::StrCat(bad.message(), kScan)});
      return;
    }
  }
  const uint64_t data_end_offset =
      footer_->summary_start - mcap::kDataEndRecordSize;
  for (const mcap::ChunkIndex& c : chunks) {
    if (c.chunk_start_offset < data_start_ ||
        c.chunk_length > data_end_offset ||
        c.chunk_start_offset > data_end_offset - c.chunk_length) {
      problems_.push_back(
          {c.chunk_start_offset,
           absl::StrCat("chunk index points outside the data section",
                        kScan)});
      return;
    }
  }
  std::sort(chunks.begin(), chunks.end(), [](const auto& a, const auto& b) {
    return a.chunk_start_offset < b.chunk_start_offset;
  });
  schemas_ = std::move(schemas);
  channels_ = std::move(channels);
  chunk_indexes_ = std::move(chunks);
  metadata_indexes_ = std::move(metadata);
  statistics_ = std::move(statistics);
  indexed_ = true;
  std::vector<std::byte> record;
  for (const mcap::MetadataIndex& m : metadata_indexes_) {
    mcap::RecordView view;
    uint64_t p = 0;
    if (!file_->ReadAt(m.offset, m.length, &record).ok() ||
        mcap::SplitRecord(record, &p, &view) != mcap::SplitStatus::kOk ||
        view.opcode != static_cast<uint8_t>(mcap::Opcode::kMetadata)) {
      problems_.push_back(
          {m.offset, "metadata index does not point at a Metadata record"});
      continue;
    }
    auto parsed = mcap::ParseMetadata(view.content);
    if (parsed.ok()) {
      metadata_.push_back(std::move(*parsed));
    } else {
      problems_.push_back({m.offset, std::string(parsed.status().message())});
    }
  }
}

void McapReader::LearnChannel(mcap::Channel channel) {
  if (channel.id != 0) channels_.try_emplace(channel.id, std::move(channel));
}

void McapReader::LearnSchema(mcap::Schema schema) {
  if (schema.id != 0) schemas_.try_emplace(schema.id, std::move(schema));
}

void McapReader::ScanForDefinitions() {
  bool chunks = false;
  {
    McapRecordScanner scanner(file_.get(), data_start_, /*read_chunks=*/false);
    McapRecord rec;
    while (scanner.Next(&rec)) {
      switch (static_cast<mcap::Opcode>(rec.opcode)) {
        case mcap::Opcode::kSchema:
          if (auto s = mcap::ParseSchema(rec.content); s.ok()) {
            LearnSchema(std::move(*s));
          }
          break;
        case mcap::Opcode::kChannel:
          if (auto c = mcap::ParseChannel(rec.content); c.ok()) {
            LearnChannel(std::move(*c));
          }
          break;
        case mcap::Opcode::kMetadata:
          if (auto m = mcap::ParseMetadata(rec.content); m.ok()) {
            metadata_.push_back(std::move(*m));
          }
          break;
        case mcap::Opcode::kChunk:
          chunks = true;
          break;
        default:
          break;
      }
    }
    problems_.insert(problems_.end(), scanner.problems().begin(),
                     scanner.problems().end());
  }
  if (!channels_.empty() || !chunks) return;
  // Channels defined inside chunks only (other writers do that): read them.
  std::unique_ptr<McapMessageIterator> it = Messages();
  McapMessageView view;
  while (it->Next(&view)) {
  }
}

std::unique_ptr<McapMessageIterator> McapReader::Messages(
    const McapReadOptions& options) {
  return std::unique_ptr<McapMessageIterator>(
      new McapMessageIterator(this, options));
}

// --- iterator ---------------------------------------------------------------

McapMessageIterator::McapMessageIterator(McapReader* reader,
                                         const McapReadOptions& options)
    : reader_(reader),
      options_(options),
      indexed_(reader->indexed() && !options.force_scan) {
  if (!indexed_) {
    scanner_ = std::make_unique<McapRecordScanner>(&reader->file(),
                                                   reader->data_start());
  }
}

const std::vector<McapProblem>& McapMessageIterator::problems() const {
  return problems_;
}

bool McapMessageIterator::Wanted(const mcap::Message& m) const {
  if (m.log_time < options_.start_time || m.log_time > options_.end_time) {
    return false;
  }
  return options_.channels.empty() || options_.channels.count(m.channel_id) > 0;
}

bool McapMessageIterator::UseChunk(const mcap::Chunk& chunk, uint64_t offset,
                                   const std::string& where) {
  if (absl::Status s = DecompressChunk(chunk, &chunk_records_); !s.ok()) {
    problems_.push_back(
        {offset, absl::StrCat(where, s.message(), "; its messages are lost")});
    return false;
  }
  ++chunks_read_;
  chunk_pos_ = 0;
  chunk_offset_ = offset;
  in_chunk_ = true;
  return true;
}

bool McapMessageIterator::LoadNextChunk() {
  return indexed_ ? LoadNextIndexedChunk() : LoadNextScannedChunk();
}

bool McapMessageIterator::LoadNextIndexedChunk() {
  const std::vector<mcap::ChunkIndex>& chunks = reader_->chunk_indexes();
  while (next_index_ < chunks.size()) {
    const mcap::ChunkIndex& c = chunks[next_index_++];
    if (c.message_end_time < options_.start_time ||
        c.message_start_time > options_.end_time) {
      continue;
    }
    if (!options_.channels.empty() && !c.message_index_offsets.empty() &&
        std::none_of(options_.channels.begin(), options_.channels.end(),
                     [&](uint16_t id) {
                       return c.message_index_offsets.count(id) > 0;
                     })) {
      continue;
    }
    std::vector<std::byte>& raw = compressed_;
    if (absl::Status s =
            reader_->file().ReadAt(c.chunk_start_offset, c.chunk_length, &raw);
        !s.ok()) {
      problems_.push_back({c.chunk_start_offset, std::string(s.message())});
      continue;
    }
    uint64_t pos = 0;
    mcap::RecordView rec;
    if (mcap::SplitRecord(raw, &pos, &rec) != mcap::SplitStatus::kOk ||
        rec.opcode != static_cast<uint8_t>(mcap::Opcode::kChunk) ||
        pos != raw.size()) {
      problems_.push_back(
          {c.chunk_start_offset,
           "the chunk index points at something that is not a chunk of "
           "the indexed length; its messages are lost to this indexed read "
           "(`tether log info --scan` and `tether log cat --scan` read the "
           "file by scanning, `tether log recover` rewrites its index)"});
      continue;
    }
    absl::StatusOr<mcap::Chunk> chunk = mcap::ParseChunk(rec.content);
    if (!chunk.ok()) {
      problems_.push_back(
          {c.chunk_start_offset, std::string(chunk.status().message())});
      continue;
    }
    // The chunk's records are copied out of `raw` before it is reused.
    if (UseChunk(*chunk, c.chunk_start_offset, "")) return true;
  }
  return false;
}

bool McapMessageIterator::LoadNextScannedChunk() {
  while (scanner_->Next(&record_)) {
    switch (static_cast<mcap::Opcode>(record_.opcode)) {
      case mcap::Opcode::kChunk: {
        absl::StatusOr<mcap::Chunk> chunk = mcap::ParseChunk(record_.content);
        if (!chunk.ok()) {
          scanner_->Reject(record_,
                           absl::StrCat(chunk.status().message(),
                                        "; skipping to the next intact chunk"),
                           /*resync=*/true);
          continue;
        }
        if (chunk->message_end_time < options_.start_time ||
            chunk->message_start_time > options_.end_time) {
          if (chunk->message_start_time != 0 || chunk->message_end_time != 0) {
            continue;
          }
        }
        if (UseChunk(*chunk, record_.offset, "")) return true;
        continue;
      }
      case mcap::Opcode::kSchema:
        if (auto s = mcap::ParseSchema(record_.content); s.ok()) {
          reader_->LearnSchema(std::move(*s));
        } else {
          scanner_->Reject(record_, std::string(s.status().message()), false);
        }
        continue;
      case mcap::Opcode::kChannel:
        if (auto c = mcap::ParseChannel(record_.content); c.ok()) {
          reader_->LearnChannel(std::move(*c));
        } else {
          scanner_->Reject(record_, std::string(c.status().message()), false);
        }
        continue;
      case mcap::Opcode::kMessage:
        pending_top_level_ = true;
        return true;
      default:
        continue;
    }
  }
  return false;
}

bool McapMessageIterator::Next(McapMessageView* view) {
  for (;;) {
    if (pending_top_level_) {
      pending_top_level_ = false;
      absl::StatusOr<mcap::Message> m = mcap::ParseMessage(record_.content);
      if (!m.ok()) {
        problems_.push_back({record_.offset, std::string(m.status().message())});
        continue;
      }
      if (!Wanted(*m)) continue;
      view->message = *m;
      view->trailer.reset();
      view->chunk_offset = record_.offset;
      return true;
    }
    if (in_chunk_) {
      mcap::RecordView rec;
      const uint64_t at = chunk_pos_;
      const mcap::SplitStatus split =
          mcap::SplitRecord(chunk_records_, &chunk_pos_, &rec);
      if (split == mcap::SplitStatus::kEnd) {
        in_chunk_ = false;
        continue;
      }
      if (split == mcap::SplitStatus::kTruncated) {
        problems_.push_back(
            {chunk_offset_,
             absl::StrFormat("chunk: the record at chunk offset %u runs past "
                             "the chunk's end; the rest of the chunk is lost",
                             at)});
        in_chunk_ = false;
        continue;
      }
      switch (static_cast<mcap::Opcode>(rec.opcode)) {
        case mcap::Opcode::kMessage: {
          absl::StatusOr<mcap::Message> m = mcap::ParseMessage(rec.content);
          if (!m.ok()) {
            problems_.push_back(
                {chunk_offset_, absl::StrCat("chunk offset ", at, ": ",
                                             m.status().message())});
            continue;
          }
          // A private record right after the message belongs to it.
          view->trailer.reset();
          uint64_t peek = chunk_pos_;
          mcap::RecordView next;
          if (mcap::SplitRecord(chunk_records_, &peek, &next) ==
                  mcap::SplitStatus::kOk &&
              next.opcode >= mcap::kFirstPrivateOpcode) {
            view->trailer = next;
            chunk_pos_ = peek;
          }
          if (!Wanted(*m)) continue;
          view->message = *m;
          view->chunk_offset = chunk_offset_;
          return true;
        }
        case mcap::Opcode::kSchema:
          if (auto s = mcap::ParseSchema(rec.content); s.ok()) {
            reader_->LearnSchema(std::move(*s));
          }
          continue;
        case mcap::Opcode::kChannel:
          if (auto c = mcap::ParseChannel(rec.content); c.ok()) {
            reader_->LearnChannel(std::move(*c));
          }
          continue;
        default:
          continue;
      }
    }
    const size_t scanner_problems =
        scanner_ != nullptr ? scanner_->problems().size() : 0;
    const bool more = LoadNextChunk();
    if (scanner_ != nullptr) {
      // Framing problems of the scan, unless Open already reported them.
      for (size_t i = scanner_problems; i < scanner_->problems().size(); ++i) {
        const McapProblem& p = scanner_->problems()[i];
        const auto& known = reader_->problems();
        if (std::none_of(known.begin(), known.end(), [&](const McapProblem& k) {
              return k.offset == p.offset && k.what == p.what;
            })) {
          problems_.push_back(p);
        }
      }
    }
    if (!more) return false;
  }
}

}  // namespace tether::log
