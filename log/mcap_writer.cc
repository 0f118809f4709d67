#include "log/mcap_writer.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tether::log {
namespace {

absl::Status ErrnoError(const std::string& what, int err) {
  const std::string text = absl::StrCat(what, ": ", std::strerror(err));
  if (err == ENOSPC || err == EDQUOT) {
    return absl::ResourceExhaustedError(
        absl::StrCat(text, " (the disk is full: free space or record to "
                           "another filesystem)"));
  }
  if (err == EFBIG) {
    return absl::ResourceExhaustedError(
        absl::StrCat(text,
                     " (the file reached the largest size this process "
                     "or filesystem allows, see `ulimit -f`: split the "
                     "recording or write to another filesystem)"));
  }
  if (err == EEXIST) return absl::AlreadyExistsError(text);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(text);
  if (err == ENOENT) return absl::NotFoundError(text);
  return absl::InternalError(text);
}

}  // namespace

absl::Status CheckOutputIsNotInput(const std::string& in, const std::string& out,
                                   const std::string& what) {
  struct stat a, b;
  if (in == out || (::stat(in.c_str(), &a) == 0 && ::stat(out.c_str(), &b) == 0 &&
                    a.st_dev == b.st_dev && a.st_ino == b.st_ino)) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " writes a new file: ", out, " is the input ", in,
        " itself, which writing it would destroy; give another output"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<McapWriter>> McapWriter::Create(
    const std::string& path, const McapWriterOptions& options) {
  // O_NONBLOCK: an existing FIFO would otherwise block open() until a
  // reader appears (ENXIO instead); cleared once open.
  const int flags = O_WRONLY | O_CREAT | O_CLOEXEC | O_NONBLOCK |
                    (options.overwrite ? O_TRUNC : O_EXCL);
  const int fd = ::open(path.c_str(), flags, 0644);
  if (fd < 0) {
    const int err = errno;
    if (err == EEXIST) {
      return absl::AlreadyExistsError(
          absl::StrCat(path, " exists: choose another name or remove it"));
    }
    if (err == ENXIO) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot create ", path,
                       ": it is a FIFO that nobody reads (tether "
                       "writes logs to regular files; give another --out)"));
    }
    return ErrnoError(absl::StrCat("cannot create ", path), err);
  }
  struct stat st;
  const int fl = ::fcntl(fd, F_GETFL);
  if (::fstat(fd, &st) != 0 || fl < 0 ||
      ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
    const int err = errno;
    ::close(fd);
    return ErrnoError(absl::StrCat("cannot create ", path), err);
  }
  std::unique_ptr<McapWriter> w(new McapWriter(path, fd, options));
  if (S_ISREG(st.st_mode)) w->made_ = FileId{st.st_dev, st.st_ino};
  std::vector<std::byte> start(mcap::kMagic, mcap::kMagic + mcap::kMagicSize);
  mcap::Append(mcap::Header{options.profile, options.library}, &start);
  if (absl::Status s = w->WriteData(start); !s.ok()) {
    w->Discard();  // not even a header: nothing to keep
    return s;
  }
  return w;
}

McapWriter::McapWriter(std::string path, int fd,
                       const McapWriterOptions& options)
    : path_(std::move(path)),
      fd_(fd),
      options_(options),
      compressor_(options.compression, options.zstd_level) {
  chunk_.reserve(options.chunk_size + (64 << 10));
}

McapWriter::~McapWriter() {
  if (fd_ >= 0) (void)Close();
}

absl::Status McapWriter::Fail(absl::Status status) {
  if (error_.ok()) error_ = status;
  return error_;
}

absl::Status McapWriter::WriteData(std::span<const std::byte> bytes,
                                   std::optional<uint32_t> crc) {
  if (!error_.ok()) return error_;
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      stats_.file_bytes = offset_ + done;  // the part that did land
      return Fail(ErrnoError(absl::StrCat("writing ", path_), err));
    }
    done += static_cast<size_t>(n);
  }
  data_crc_ = crc.has_value() ? Crc32Combine(data_crc_, *crc, bytes.size())
                              : Crc32(bytes, data_crc_);
  offset_ += bytes.size();
  stats_.file_bytes = offset_;
  return absl::OkStatus();
}

absl::StatusOr<uint16_t> McapWriter::AddSchema(
    const std::string& name, const std::string& encoding,
    std::span<const std::byte> data) {
  if (!error_.ok()) return error_;
  for (const mcap::Schema& s : schemas_) {
    if (s.name == name && s.encoding == encoding &&
        std::equal(s.data.begin(), s.data.end(), data.begin(), data.end())) {
      return s.id;
    }
  }
  if (schemas_.size() >= std::numeric_limits<uint16_t>::max()) {
    return absl::ResourceExhaustedError("MCAP files hold at most 65535 schemas");
  }
  mcap::Schema s;
  s.id = static_cast<uint16_t>(schemas_.size() + 1);
  s.name = name;
  s.encoding = encoding;
  s.data.assign(data.begin(), data.end());
  scratch_.clear();
  mcap::Append(s, &scratch_);
  if (absl::Status st = WriteData(scratch_); !st.ok()) return st;
  schemas_.push_back(std::move(s));
  return schemas_.back().id;
}

absl::StatusOr<uint16_t> McapWriter::AddChannel(
    uint16_t schema_id, const std::string& topic,
    const std::string& message_encoding, const mcap::KeyValueMap& metadata) {
  if (!error_.ok()) return error_;
  if (schema_id > schemas_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("channel ", topic, ": schema id ", schema_id,
                     " was not added to ", path_));
  }
  if (channels_.size() >= std::numeric_limits<uint16_t>::max()) {
    return absl::ResourceExhaustedError(
        "MCAP files hold at most 65535 channels: split the recording");
  }
  mcap::Channel c;
  c.id = static_cast<uint16_t>(channels_.size() + 1);
  c.schema_id = schema_id;
  c.topic = topic;
  c.message_encoding = message_encoding;
  c.metadata = metadata;
  scratch_.clear();
  mcap::Append(c, &scratch_);
  if (absl::Status st = WriteData(scratch_); !st.ok()) return st;
  channels_.push_back(std::move(c));
  return channels_.back().id;
}

absl::Status McapWriter::WriteMessage(const mcap::Message& message,
                                      std::span<const std::byte> trailer) {
  if (!error_.ok()) return error_;
  if (message.channel_id == 0 || message.channel_id > channels_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "message on channel id ", message.channel_id, ", which was not added"));
  }
  if (!trailer.empty() &&
      (trailer.size() < mcap::kRecordHeaderSize ||
       static_cast<uint8_t>(trailer[0]) < mcap::kFirstPrivateOpcode ||
       mcap::LoadU64(trailer.data() + 1) !=
           trailer.size() - mcap::kRecordHeaderSize)) {
    return absl::InvalidArgumentError(
        "message trailer is not one framed private record (opcode >= 0x80)");
  }
  if (chunk_.size() >= options_.chunk_size) {
    if (absl::Status s = FlushChunk(); !s.ok()) return s;
  }
  if (chunk_messages_ == 0) {
    chunk_start_time_ = message.log_time;
    chunk_end_time_ = message.log_time;
  } else {
    chunk_start_time_ = std::min(chunk_start_time_, message.log_time);
    chunk_end_time_ = std::max(chunk_end_time_, message.log_time);
  }
  chunk_index_[message.channel_id].emplace_back(message.log_time,
                                                chunk_.size());
  chunk_payload_[message.channel_id] += message.data.size();
  mcap::Append(message, &chunk_);
  if (!trailer.empty()) chunk_.insert(chunk_.end(), trailer.begin(), trailer.end());
  ++chunk_messages_;
  ++stats_.messages;
  if (statistics_.message_count == 0) {
    statistics_.message_start_time = message.log_time;
    statistics_.message_end_time = message.log_time;
  } else {
    statistics_.message_start_time =
        std::min(statistics_.message_start_time, message.log_time);
    statistics_.message_end_time =
        std::max(statistics_.message_end_time, message.log_time);
  }
  ++statistics_.message_count;
  ++statistics_.channel_message_counts[message.channel_id];
  return absl::OkStatus();
}

absl::Status McapWriter::FlushChunk() {
  if (!error_.ok()) return error_;
  if (chunk_.empty()) return absl::OkStatus();
  // The records are hashed once: that CRC is the chunk's, and (uncompressed)
  // also feeds the data section's CRC. Uncompressed records are written
  // straight from the chunk buffer, compressed ones from the compressor's:
  // no copy into a record buffer.
  const uint32_t records_crc = Crc32(chunk_);
  std::span<const std::byte> records = chunk_;
  std::optional<uint32_t> payload_crc = records_crc;
  if (options_.compression != Compression::kNone) {
    if (absl::Status s = compressor_.Compress(chunk_, &compressed_); !s.ok()) {
      return Fail(s);
    }
    records = compressed_;
    payload_crc.reset();
  }
  mcap::Chunk chunk;
  chunk.message_start_time = chunk_messages_ > 0 ? chunk_start_time_ : 0;
  chunk.message_end_time = chunk_messages_ > 0 ? chunk_end_time_ : 0;
  chunk.uncompressed_size = chunk_.size();
  chunk.uncompressed_crc = records_crc;
  chunk.compression = std::string(McapCompressionName(options_.compression));

  mcap::ChunkIndex index;
  index.message_start_time = chunk.message_start_time;
  index.message_end_time = chunk.message_end_time;
  index.chunk_start_offset = offset_;
  index.compression = chunk.compression;
  index.compressed_size = records.size();
  index.uncompressed_size = chunk_.size();

  // The record without its records, then the records.
  scratch_.clear();
  mcap::Append(chunk, &scratch_);
  mcap::StoreU64(scratch_.data() + 1,
                 scratch_.size() - mcap::kRecordHeaderSize + records.size());
  mcap::StoreU64(scratch_.data() + scratch_.size() - 8, records.size());
  index.chunk_length = scratch_.size() + records.size();
  if (absl::Status s = WriteData(scratch_); !s.ok()) return s;
  if (absl::Status s = WriteData(records, payload_crc); !s.ok()) return s;
  // The chunk is in the file: its messages are readable from here on.
  stats_.uncompressed_bytes += chunk_.size();
  stats_.compressed_bytes += records.size();
  ++stats_.chunks;
  for (const auto& [channel, entries] : chunk_index_) {
    McapWriterStats::ChannelCount& c = stats_.written[channel];
    c.messages += entries.size();
    c.bytes += chunk_payload_[channel];
    stats_.written_messages += entries.size();
  }

  scratch_.clear();
  uint64_t at = offset_;
  for (auto& [channel, entries] : chunk_index_) {
    const size_t before = scratch_.size();
    // Readers expect each channel's entries in log-time order.
    std::stable_sort(entries.begin(), entries.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    mcap::Append(mcap::MessageIndex{channel, std::move(entries)}, &scratch_);
    index.message_index_offsets[channel] = at;
    at += scratch_.size() - before;
  }
  index.message_index_length = scratch_.size();
  if (absl::Status s = WriteData(scratch_); !s.ok()) return s;

  chunk_indexes_.push_back(std::move(index));
  chunk_.clear();
  chunk_index_.clear();
  chunk_payload_.clear();
  chunk_messages_ = 0;
  return absl::OkStatus();
}

absl::Status McapWriter::WriteMetadata(const mcap::Metadata& metadata) {
  if (absl::Status s = FlushChunk(); !s.ok()) return s;
  scratch_.clear();
  mcap::Append(metadata, &scratch_);
  mcap::MetadataIndex index{offset_, scratch_.size(), metadata.name};
  if (absl::Status s = WriteData(scratch_); !s.ok()) return s;
  metadata_indexes_.push_back(std::move(index));
  return absl::OkStatus();
}

absl::Status McapWriter::WriteSummary(std::vector<std::byte>* out,
                                      uint64_t start) {
  // Groups by opcode (the spec requires it), each one summary offset.
  std::vector<mcap::SummaryOffset> groups;
  auto group = [&](mcap::Opcode opcode, size_t before) {
    if (out->size() > before) {
      groups.push_back({static_cast<uint8_t>(opcode), start + before,
                        out->size() - before});
    }
  };
  size_t before = out->size();
  for (const mcap::Schema& s : schemas_) mcap::Append(s, out);
  group(mcap::Opcode::kSchema, before);
  before = out->size();
  for (const mcap::Channel& c : channels_) mcap::Append(c, out);
  group(mcap::Opcode::kChannel, before);
  before = out->size();
  mcap::Statistics stats = statistics_;
  stats.schema_count = static_cast<uint16_t>(schemas_.size());
  stats.channel_count = static_cast<uint32_t>(channels_.size());
  stats.metadata_count = static_cast<uint32_t>(metadata_indexes_.size());
  stats.chunk_count = static_cast<uint32_t>(chunk_indexes_.size());
  for (const mcap::Channel& c : channels_) stats.channel_message_counts[c.id];
  mcap::Append(stats, out);
  group(mcap::Opcode::kStatistics, before);
  before = out->size();
  for (const mcap::ChunkIndex& c : chunk_indexes_) mcap::Append(c, out);
  group(mcap::Opcode::kChunkIndex, before);
  before = out->size();
  for (const mcap::MetadataIndex& m : metadata_indexes_) mcap::Append(m, out);
  group(mcap::Opcode::kMetadataIndex, before);

  const uint64_t summary_offset_start = start + out->size();
  for (const mcap::SummaryOffset& g : groups) mcap::Append(g, out);
  mcap::Footer footer{start, summary_offset_start, 0};
  const size_t footer_at = out->size();
  mcap::Append(footer, out);
  // The CRC covers the summary, the summary offsets and the footer up to
  // (not including) its crc field.
  const uint32_t crc = Crc32(std::span<const std::byte>(out->data(),
                                                        out->size() - 4));
  std::memcpy(out->data() + footer_at + mcap::kFooterRecordSize - 4, &crc, 4);
  out->insert(out->end(), mcap::kMagic, mcap::kMagic + mcap::kMagicSize);
  return absl::OkStatus();
}

void McapWriter::Discard() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  if (!made_.has_value()) return;
  struct stat st;
  // Only the file this writer opened, if nobody replaced it meanwhile.
  if (::stat(path_.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
      st.st_dev == made_->dev && st.st_ino == made_->ino) {
    ::unlink(path_.c_str());
  }
  made_.reset();
}

absl::Status McapWriter::Close() {
  if (fd_ < 0) return error_;
  absl::Status status = FlushChunk();
  if (status.ok()) {
    scratch_.clear();
    mcap::Append(mcap::DataEnd{data_crc_}, &scratch_);
    status = WriteData(scratch_);
  }
  if (status.ok()) {
    std::vector<std::byte> summary;
    status = WriteSummary(&summary, offset_);
    if (status.ok()) status = WriteData(summary);
  }
  if (status.ok() && options_.sync_on_close && ::fsync(fd_) != 0) {
    status = Fail(ErrnoError(absl::StrCat("fsync ", path_), errno));
  }
  if (::close(fd_) != 0 && status.ok()) {
    status = Fail(ErrnoError(absl::StrCat("closing ", path_), errno));
  }
  fd_ = -1;
  return status;
}

}  // namespace tether::log
