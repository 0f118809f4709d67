#include "log/mcap_format.h"

#include <bit>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tether::log::mcap {
namespace {

// Appends little-endian fields; BeginRecord/EndRecord frame a record.
class ByteWriter {
 public:
  explicit ByteWriter(std::vector<std::byte>* out) : out_(out) {}

  size_t BeginRecord(uint8_t opcode) {
    U8(opcode);
    const size_t length_at = out_->size();
    U64(0);
    return length_at;
  }
  void EndRecord(size_t length_at) {
    StoreU64(out_->data() + length_at, out_->size() - length_at - 8);
  }

  void U8(uint8_t v) { out_->push_back(std::byte{v}); }
  void U16(uint16_t v) { Raw(&v, 2); }
  void U32(uint32_t v) { Raw(&v, 4); }
  void U64(uint64_t v) { Raw(&v, 8); }
  void String(std::string_view s) {
    U32(static_cast<uint32_t>(s.size()));
    Raw(s.data(), s.size());
  }
  void Bytes(std::span<const std::byte> b) { Raw(b.data(), b.size()); }
  void Map(const KeyValueMap& map) {
    const size_t at = out_->size();
    U32(0);
    for (const auto& [k, v] : map) {
      String(k);
      String(v);
    }
    PatchU32(at);
  }
  template <typename K>
  void MapU64(const std::map<K, uint64_t>& map) {
    const size_t at = out_->size();
    U32(0);
    for (const auto& [k, v] : map) {
      if constexpr (sizeof(K) == 2) {
        U16(k);
      } else {
        U32(k);
      }
      U64(v);
    }
    PatchU32(at);
  }

 private:
  // x86-64 and aarch64 are little-endian; MCAP is too.
  static_assert(std::endian::native == std::endian::little);
  void Raw(const void* p, size_t n) {
    const size_t at = out_->size();
    out_->resize(at + n);
    if (n > 0) std::memcpy(out_->data() + at, p, n);
  }
  void PatchU32(size_t at) {
    const uint32_t n = static_cast<uint32_t>(out_->size() - at - 4);
    std::memcpy(out_->data() + at, &n, 4);
  }
  std::vector<std::byte>* out_;
};

// Reads fields with bounds checks; the first failure is kept as the error.
class ByteReader {
 public:
  ByteReader(std::span<const std::byte> data, const char* record)
      : data_(data), record_(record) {}

  bool U8(uint8_t* v, const char* field) { return Fixed(v, 1, field); }
  bool U16(uint16_t* v, const char* field) { return Fixed(v, 2, field); }
  bool U32(uint32_t* v, const char* field) { return Fixed(v, 4, field); }
  bool U64(uint64_t* v, const char* field) { return Fixed(v, 8, field); }
  bool String(std::string* s, const char* field) {
    std::span<const std::byte> b;
    if (!Bytes32(&b, field)) return false;
    s->assign(reinterpret_cast<const char*>(b.data()), b.size());
    return true;
  }
  bool Bytes32(std::span<const std::byte>* b, const char* field) {
    uint32_t n = 0;
    if (!U32(&n, field)) return false;
    return Take(n, b, field);
  }
  bool Bytes64(std::span<const std::byte>* b, const char* field) {
    uint64_t n = 0;
    if (!U64(&n, field)) return false;
    return Take(n, b, field);
  }
  bool Map(KeyValueMap* map, const char* field) {
    std::span<const std::byte> b;
    if (!Bytes32(&b, field)) return false;
    ByteReader inner(b, record_);
    while (inner.remaining() > 0) {
      std::string k, v;
      if (!inner.String(&k, field) || !inner.String(&v, field)) {
        return Fail(inner.error_);
      }
      (*map)[std::move(k)] = std::move(v);
    }
    return true;
  }
  template <typename K>
  bool MapU64(std::map<K, uint64_t>* map, const char* field) {
    std::span<const std::byte> b;
    if (!Bytes32(&b, field)) return false;
    ByteReader inner(b, record_);
    while (inner.remaining() > 0) {
      K k{};
      uint64_t v = 0;
      bool ok;
      if constexpr (sizeof(K) == 2) {
        ok = inner.U16(&k, field);
      } else {
        ok = inner.U32(&k, field);
      }
      if (!ok || !inner.U64(&v, field)) return Fail(inner.error_);
      (*map)[k] = v;
    }
    return true;
  }
  void Rest(std::span<const std::byte>* b) {
    *b = data_.subspan(pos_);
    pos_ = data_.size();
  }
  size_t remaining() const { return data_.size() - pos_; }
  absl::Status status() const {
    return absl::InvalidArgumentError(error_);
  }

 private:
  bool Fixed(void* v, size_t n, const char* field) {
    if (remaining() < n) {
      return Fail(absl::StrFormat("%s record: %s: needs %d bytes, %d left",
                                  record_, field, n, remaining()));
    }
    std::memcpy(v, data_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  bool Take(uint64_t n, std::span<const std::byte>* b, const char* field) {
    if (n > remaining()) {
      return Fail(absl::StrFormat("%s record: %s: length %u exceeds the %d "
                                  "bytes left in the record",
                                  record_, field, n, remaining()));
    }
    *b = data_.subspan(pos_, n);
    pos_ += n;
    return true;
  }
  bool Fail(std::string error) {
    if (error_.empty()) error_ = std::move(error);
    return false;
  }

  std::span<const std::byte> data_;
  size_t pos_ = 0;
  const char* record_;
  std::string error_;
};

}  // namespace

uint64_t LoadU64(const std::byte* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
uint32_t LoadU32(const std::byte* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint16_t LoadU16(const std::byte* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
void StoreU64(std::byte* p, uint64_t v) { std::memcpy(p, &v, 8); }

std::string OpcodeName(uint8_t opcode) {
  static constexpr const char* kNames[] = {
      nullptr,      "Header",        "Footer",         "Schema",
      "Channel",    "Message",       "Chunk",          "MessageIndex",
      "ChunkIndex", "Attachment",    "AttachmentIndex", "Statistics",
      "Metadata",   "MetadataIndex", "SummaryOffset",  "DataEnd"};
  if (opcode >= 1 && opcode <= 0x0F) return kNames[opcode];
  if (opcode >= kFirstPrivateOpcode) {
    return absl::StrFormat("private 0x%02x", opcode);
  }
  return absl::StrFormat("unknown 0x%02x", opcode);
}

void Append(const Header& r, std::vector<std::byte>* out) {
  ByteWriter w(out);
  const size_t at = w.BeginRecord(static_cast<uint8_t>(Opcode::kHeader));
  w.String(r.profile);
  w.String(r.library);
  w.EndRecord(at);
}

void Append(const Footer& r, std::vector<std::byte>* out) {
  ByteWriter w(out);
  const size_t at = w.BeginRecord(static_cast<uint8_t>(Opcode::kFooter));
  w.U64(r.summary_start);
  w.U64(r.summary_offset_start);
  w.U32(r.summary_crc);
  w.EndRecord(at);
}

void Append(const Schema& r, std::vector<std::byte>* out) {
  ByteWriter w(out);
  const size_t at = w.BeginRecord(static_cast<uint8_t>(Opcode::kSchema));
  w.U16(r.id);
  w.String(r.name);
  w.String(r.encoding);
  w.U32(static_cast<uint32_t>(r.data.size()));
  w.Bytes(r.data);
  w.EndRecord(at);
}

void Append(const Channel& r, std::vector<std::byte>* out) {
  ByteWriter w(out);
  const size_t at = w.BeginRecord(static_cast<uint8_t>(Opcode::kChannel));
  w.U16(r.id);
  w.U16(r.schema_id);
  w.String(r.topic);
  w.String(r.message_encoding);
  w.Map(r.metadata);
  w.EndRecord(at);
}

void Append(const Message& r, std::vector<std::byte>* out) {
  // The hot path of the logger: one resize, fixed stores.
  const size_t at = out->size();
  const size_t content = kMessageFixedSize + r.data.size();
  out->resize(at + kRecordHeaderSize + content);
  std::byte* p = out->data() + at;
  p[0] = std::byte{static_cast<uint8_t>(Opcode::kMessage)};
  StoreU64(p + 1, content);
  std::memcpy(p + 9, &r.channel_id, 2);
  std::memcpy(p + 11, &r.sequence, 4);
  std::memcpy(p + 15, &r.log_time, 8);
  std::memcpy(p + 23, &r.publish_time, 8);
  if (!r.data.empty()) std::memcpy(p + 31, r.data.data(), r.data.size());
}

void Append(const Chunk& r, std::vector<std::byte>* out) {
  ByteWriter w(out);
  const size_t at = w.BeginRecord(static_cast<uint8_t>(Opcode::kChunk));
  w.U64(r.message_start_time);
  w.U64(r.message_end_time);
  w.U64(r.uncompressed_size);
  w.U32(r.uncompressed_crc);
  w.String(r.compression);
  w.U64(r.records.size());
  w.Bytes(r.records);
  w.EndRecord(at);
}

void Append(const MessageIndex& r, std::vector<std::byte>* out) {
  ByteWriter w(out);
  const size_t at = w.BeginRecord(static_cast<uint8_t>(Opcode::kMessageIndex));
  w.U16(r.channel_id);
  w.U32(static_cast<uint32_t>(r.records.size() * 16));
  for (const auto& [time, offset] : r.records) {
    w.U64(time);
    w.U64(offset);
  }
  w.EndRecord(at);
}

void Append(const ChunkIndex& r, std::vector<std::byte>* out) {
  ByteWriter w(out);
  const size_t at = w.BeginRecord(static_cast<uint8_t>(Opcode::kChunkIndex));
  w.U64(r.message_start_time);
  w.U64(r.message_end_time);
  w.U64(r.chunk_start_offset);
  w.U64(r.chunk_length);
  w.MapU64(r.message_index_offsets);
  w.U64(r.message_index_length);
  w.String(r.compression);
  w.U64(r.compressed_size);
  w.U64(r.uncompressed_size);
  w.EndRecord(at);
}

void Append(const Statistics& r, std::vector<std::byte>* out) {
  ByteWriter w(out);
  const size_t at = w.BeginRecord(static_cast<uint8_t>(Opcode::kStatistics));
  w.U64(r.message_count);
  w.U16(r.schema_count);
  w.U32(r.channel_count);
  w.U32(r.attachment_count);
  w.U32(r.metadata_count);
  w.U32(r.chunk_count);
  w.U64(r.message_start_time);
  w.U64(r.message_end_time);
  w.MapU64(r.channel_message_counts);
  w.EndRecord(at);
}

void Append(const Metadata& r, std::vector<std::byte>* out) {
  ByteWriter w(out);
  const size_t at = w.BeginRecord(static_cast<uint8_t>(Opcode::kMetadata));
  w.String(r.name);
  w.Map(r.metadata);
  w.EndRecord(at);
}

void Append(const MetadataIndex& r, std::vector<std::byte>* out) {
  ByteWriter w(out);
  const size_t at =
      w.BeginRecord(static_cast<uint8_t>(Opcode::kMetadataIndex));
  w.U64(r.offset);
  w.U64(r.length);
  w.String(r.name);
  w.EndRecord(at);
}

void Append(const SummaryOffset& r, std::vector<std::byte>* out) {
  ByteWriter w(out);
  const size_t at =
      w.BeginRecord(static_cast<uint8_t>(Opcode::kSummaryOffset));
  w.U8(r.group_opcode);
  w.U64(r.group_start);
  w.U64(r.group_length);
  w.EndRecord(at);
}

void Append(const DataEnd& r, std::vector<std::byte>* out) {
  ByteWriter w(out);
  const size_t at = w.BeginRecord(static_cast<uint8_t>(Opcode::kDataEnd));
  w.U32(r.data_section_crc);
  w.EndRecord(at);
}

void AppendRecord(uint8_t opcode, std::span<const std::byte> content,
                  std::vector<std::byte>* out) {
  ByteWriter w(out);
  const size_t at = w.BeginRecord(opcode);
  w.Bytes(content);
  w.EndRecord(at);
}

absl::StatusOr<Header> ParseHeader(std::span<const std::byte> content) {
  ByteReader r(content, "Header");
  Header h;
  if (!r.String(&h.profile, "profile") || !r.String(&h.library, "library")) {
    return r.status();
  }
  return h;
}

absl::StatusOr<Footer> ParseFooter(std::span<const std::byte> content) {
  ByteReader r(content, "Footer");
  Footer f;
  if (!r.U64(&f.summary_start, "summary_start") ||
      !r.U64(&f.summary_offset_start, "summary_offset_start") ||
      !r.U32(&f.summary_crc, "summary_crc")) {
    return r.status();
  }
  return f;
}

absl::StatusOr<Schema> ParseSchema(std::span<const std::byte> content) {
  ByteReader r(content, "Schema");
  Schema s;
  std::span<const std::byte> data;
  if (!r.U16(&s.id, "id") || !r.String(&s.name, "name") ||
      !r.String(&s.encoding, "encoding") || !r.Bytes32(&data, "data")) {
    return r.status();
  }
  s.data.assign(data.begin(), data.end());
  return s;
}

absl::StatusOr<Channel> ParseChannel(std::span<const std::byte> content) {
  ByteReader r(content, "Channel");
  Channel c;
  if (!r.U16(&c.id, "id") || !r.U16(&c.schema_id, "schema_id") ||
      !r.String(&c.topic, "topic") ||
      !r.String(&c.message_encoding, "message_encoding") ||
      !r.Map(&c.metadata, "metadata")) {
    return r.status();
  }
  return c;
}

absl::StatusOr<Message> ParseMessage(std::span<const std::byte> content) {
  ByteReader r(content, "Message");
  Message m;
  if (!r.U16(&m.channel_id, "channel_id") || !r.U32(&m.sequence, "sequence") ||
      !r.U64(&m.log_time, "log_time") ||
      !r.U64(&m.publish_time, "publish_time")) {
    return r.status();
  }
  r.Rest(&m.data);
  return m;
}

absl::StatusOr<Chunk> ParseChunk(std::span<const std::byte> content) {
  ByteReader r(content, "Chunk");
  Chunk c;
  if (!r.U64(&c.message_start_time, "message_start_time") ||
      !r.U64(&c.message_end_time, "message_end_time") ||
      !r.U64(&c.uncompressed_size, "uncompressed_size") ||
      !r.U32(&c.uncompressed_crc, "uncompressed_crc") ||
      !r.String(&c.compression, "compression") ||
      !r.Bytes64(&c.records, "records")) {
    return r.status();
  }
  return c;
}

absl::StatusOr<MessageIndex> ParseMessageIndex(
    std::span<const std::byte> content) {
  ByteReader r(content, "MessageIndex");
  MessageIndex m;
  std::span<const std::byte> entries;
  if (!r.U16(&m.channel_id, "channel_id") ||
      !r.Bytes32(&entries, "records")) {
    return r.status();
  }
  if (entries.size() % 16 != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "MessageIndex record: records: %d bytes is not a whole number of "
        "16-byte entries",
        entries.size()));
  }
  m.records.reserve(entries.size() / 16);
  for (size_t i = 0; i < entries.size(); i += 16) {
    m.records.emplace_back(LoadU64(entries.data() + i),
                           LoadU64(entries.data() + i + 8));
  }
  return m;
}

absl::StatusOr<ChunkIndex> ParseChunkIndex(
    std::span<const std::byte> content) {
  ByteReader r(content, "ChunkIndex");
  ChunkIndex c;
  if (!r.U64(&c.message_start_time, "message_start_time") ||
      !r.U64(&c.message_end_time, "message_end_time") ||
      !r.U64(&c.chunk_start_offset, "chunk_start_offset") ||
      !r.U64(&c.chunk_length, "chunk_length") ||
      !r.MapU64(&c.message_index_offsets, "message_index_offsets") ||
      !r.U64(&c.message_index_length, "message_index_length") ||
      !r.String(&c.compression, "compression") ||
      !r.U64(&c.compressed_size, "compressed_size") ||
      !r.U64(&c.uncompressed_size, "uncompressed_size")) {
    return r.status();
  }
  return c;
}

absl::StatusOr<Statistics> ParseStatistics(
    std::span<const std::byte> content) {
  ByteReader r(content, "Statistics");
  Statistics s;
  if (!r.U64(&s.message_count, "message_count") ||
      !r.U16(&s.schema_count, "schema_count") ||
      !r.U32(&s.channel_count, "channel_count") ||
      !r.U32(&s.attachment_count, "attachment_count") ||
      !r.U32(&s.metadata_count, "metadata_count") ||
      !r.U32(&s.chunk_count, "chunk_count") ||
      !r.U64(&s.message_start_time, "message_start_time") ||
      !r.U64(&s.message_end_time, "message_end_time") ||
      !r.MapU64(&s.channel_message_counts, "channel_message_counts")) {
    return r.status();
  }
  return s;
}

absl::StatusOr<Metadata> ParseMetadata(std::span<const std::byte> content) {
  ByteReader r(content, "Metadata");
  Metadata m;
  if (!r.String(&m.name, "name") || !r.Map(&m.metadata, "metadata")) {
    return r.status();
  }
  return m;
}

absl::StatusOr<MetadataIndex> ParseMetadataIndex(
    std::span<const std::byte> content) {
  ByteReader r(content, "MetadataIndex");
  MetadataIndex m;
  if (!r.U64(&m.offset, "offset") || !r.U64(&m.length, "length") ||
      !r.String(&m.name, "name")) {
    return r.status();
  }
  return m;
}

absl::StatusOr<SummaryOffset> ParseSummaryOffset(
    std::span<const std::byte> content) {
  ByteReader r(content, "SummaryOffset");
  SummaryOffset s;
  if (!r.U8(&s.group_opcode, "group_opcode") ||
      !r.U64(&s.group_start, "group_start") ||
      !r.U64(&s.group_length, "group_length")) {
    return r.status();
  }
  return s;
}

absl::StatusOr<DataEnd> ParseDataEnd(std::span<const std::byte> content) {
  ByteReader r(content, "DataEnd");
  DataEnd d;
  if (!r.U32(&d.data_section_crc, "data_section_crc")) return r.status();
  return d;
}

SplitStatus SplitRecord(std::span<const std::byte> buffer, uint64_t* pos,
                        RecordView* record, uint64_t* declared) {
  if (declared != nullptr) *declared = 0;
  if (*pos >= buffer.size()) return SplitStatus::kEnd;
  const uint64_t left = buffer.size() - *pos;
  if (left < kRecordHeaderSize) return SplitStatus::kTruncated;
  const std::byte* p = buffer.data() + *pos;
  const uint64_t length = LoadU64(p + 1);
  if (declared != nullptr) *declared = length;
  if (length > left - kRecordHeaderSize) return SplitStatus::kTruncated;
  record->opcode = static_cast<uint8_t>(p[0]);
  record->content = buffer.subspan(*pos + kRecordHeaderSize, length);
  record->offset = *pos;
  *pos += kRecordHeaderSize + length;
  return SplitStatus::kOk;
}

}  // namespace tether::log::mcap
