#include "log/mcap_format.h"

#include <bit>
#include <concepts>
#include <cstring>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tether::log::mcap {
namespace {

// One record codec. Each record type's fields are listed once, in file
// order, by an overload Fields(record, codec) below, run with a ByteWriter
// (Append) or a ByteReader (Parse). A field is a call naming its wire kind
// and its name (the name is what a parse error reports):
//   U8 U16 U32 U64   fixed little-endian integers
//   String           u32 length + bytes
//   Map              u32 byte length + (String key, String value)*
//   MapU64           u32 byte length + (u16 or u32 key, u64 value)*
//   Bytes32 Bytes64  u32 / u64 length + bytes (owned vector or borrowed span)
//   Pairs            u32 byte length + (u64, u64)* (16-byte entries)
//   Rest             every byte left in the record (borrowed span)
// The reader takes each field by non-const reference, so a field listed with
// the wrong kind for its member's type does not compile.

// Appends little-endian fields; BeginRecord/EndRecord frame a record.
class ByteWriter {
 public:
  explicit ByteWriter(std::vector<std::byte>* out) : out_(out) {}

  size_t BeginRecord(uint8_t opcode) {
    PutU8(opcode);
    const size_t length_at = out_->size();
    PutU64(0);
    return length_at;
  }
  void EndRecord(size_t length_at) {
    StoreU64(out_->data() + length_at, out_->size() - length_at - 8);
  }

  void U8(const char*, uint8_t v) { PutU8(v); }
  void U16(const char*, uint16_t v) { Raw(&v, 2); }
  void U32(const char*, uint32_t v) { Raw(&v, 4); }
  void U64(const char*, uint64_t v) { PutU64(v); }
  void String(const char*, std::string_view s) { PutString(s); }
  void Map(const char*, const KeyValueMap& map) {
    const size_t at = BeginLength32();
    for (const auto& [k, v] : map) {
      PutString(k);
      PutString(v);
    }
    EndLength32(at);
  }
  template <typename K>
  void MapU64(const char*, const std::map<K, uint64_t>& map) {
    static_assert(sizeof(K) == 2 || sizeof(K) == 4);
    const size_t at = BeginLength32();
    for (const auto& [k, v] : map) {
      const K key = k;
      Raw(&key, sizeof(K));
      PutU64(v);
    }
    EndLength32(at);
  }
  void Bytes32(const char*, std::span<const std::byte> b) {
    const uint32_t n = static_cast<uint32_t>(b.size());
    Raw(&n, 4);
    Raw(b.data(), b.size());
  }
  void Bytes64(const char*, std::span<const std::byte> b) {
    PutU64(b.size());
    Raw(b.data(), b.size());
  }
  void Pairs(const char*,
             const std::vector<std::pair<uint64_t, uint64_t>>& pairs) {
    const uint32_t n = static_cast<uint32_t>(pairs.size() * 16);
    Raw(&n, 4);
    for (const auto& [first, second] : pairs) {
      PutU64(first);
      PutU64(second);
    }
  }
  void Rest(const char*, std::span<const std::byte> b) {
    Raw(b.data(), b.size());
  }

 private:
  // x86-64 and aarch64 are little-endian; MCAP is too.
  static_assert(std::endian::native == std::endian::little);
  void PutU8(uint8_t v) { out_->push_back(std::byte{v}); }
  void PutU64(uint64_t v) { Raw(&v, 8); }
  void PutString(std::string_view s) {
    const uint32_t n = static_cast<uint32_t>(s.size());
    Raw(&n, 4);
    Raw(s.data(), s.size());
  }
  void Raw(const void* p, size_t n) {
    const size_t at = out_->size();
    out_->resize(at + n);
    if (n > 0) std::memcpy(out_->data() + at, p, n);
  }
  size_t BeginLength32() {
    const size_t at = out_->size();
    Raw("\0\0\0\0", 4);
    return at;
  }
  void EndLength32(size_t at) {
    const uint32_t n = static_cast<uint32_t>(out_->size() - at - 4);
    std::memcpy(out_->data() + at, &n, 4);
  }
  std::vector<std::byte>* out_;
};

// Reads fields with bounds checks. The first failure is kept as the error
// and every later field is left alone, so a record reads up to its first bad
// field and no further.
class ByteReader {
 public:
  ByteReader(std::span<const std::byte> data, const char* record)
      : data_(data), record_(record) {}

  void U8(const char* field, uint8_t& v) { Fixed(&v, 1, field); }
  void U16(const char* field, uint16_t& v) { Fixed(&v, 2, field); }
  void U32(const char* field, uint32_t& v) { Fixed(&v, 4, field); }
  void U64(const char* field, uint64_t& v) { Fixed(&v, 8, field); }
  void String(const char* field, std::string& s) {
    std::span<const std::byte> b;
    if (!Length32(&b, field)) return;
    s.assign(reinterpret_cast<const char*>(b.data()), b.size());
  }
  void Map(const char* field, KeyValueMap& map) {
    ByteReader inner(record_);
    if (!Inner(field, &inner)) return;
    while (inner.ok() && inner.remaining() > 0) {
      std::string k, v;
      inner.String(field, k);
      inner.String(field, v);
      if (inner.ok()) map[std::move(k)] = std::move(v);
    }
    if (!inner.ok()) Fail(inner.error_);
  }
  template <typename K>
  void MapU64(const char* field, std::map<K, uint64_t>& map) {
    static_assert(sizeof(K) == 2 || sizeof(K) == 4);
    ByteReader inner(record_);
    if (!Inner(field, &inner)) return;
    while (inner.ok() && inner.remaining() > 0) {
      K k{};
      uint64_t v = 0;
      inner.Fixed(&k, sizeof(K), field);
      inner.U64(field, v);
      if (inner.ok()) map[k] = v;
    }
    if (!inner.ok()) Fail(inner.error_);
  }
  // Into an owned copy (Schema data).
  void Bytes32(const char* field, std::vector<std::byte>& b) {
    std::span<const std::byte> view;
    if (!Length32(&view, field)) return;
    b.assign(view.begin(), view.end());
  }
  // Borrowed from the buffer (Chunk records).
  void Bytes64(const char* field, std::span<const std::byte>& b) {
    uint64_t n = 0;
    if (!Fixed(&n, 8, field)) return;
    Take(n, &b, field);
  }
  void Pairs(const char* field,
             std::vector<std::pair<uint64_t, uint64_t>>& pairs) {
    std::span<const std::byte> b;
    if (!Length32(&b, field)) return;
    if (b.size() % 16 != 0) {
      Fail(absl::StrFormat(
          "%s record: %s: %d bytes is not a whole number of 16-byte entries",
          record_, field, b.size()));
      return;
    }
    pairs.reserve(b.size() / 16);
    for (size_t i = 0; i < b.size(); i += 16) {
      pairs.emplace_back(LoadU64(b.data() + i), LoadU64(b.data() + i + 8));
    }
  }
  void Rest(const char*, std::span<const std::byte>& b) {
    if (!ok()) return;
    b = data_.subspan(pos_);
    pos_ = data_.size();
  }

  bool ok() const { return error_.empty(); }
  absl::Status status() const { return absl::InvalidArgumentError(error_); }

 private:
  explicit ByteReader(const char* record) : record_(record) {}

  size_t remaining() const { return data_.size() - pos_; }
  bool Fixed(void* v, size_t n, const char* field) {
    if (!ok()) return false;
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
      return Fail(
          absl::StrFormat("%s record: %s: length %u exceeds the %d "
                          "bytes left in the record",
                          record_, field, n, remaining()));
    }
    *b = data_.subspan(pos_, n);
    pos_ += n;
    return true;
  }
  // A u32 length and that many bytes.
  bool Length32(std::span<const std::byte>* b, const char* field) {
    uint32_t n = 0;
    return Fixed(&n, 4, field) && Take(n, b, field);
  }
  // Points `inner` at the bytes of a u32-length-prefixed field.
  bool Inner(const char* field, ByteReader* inner) {
    return Length32(&inner->data_, field);
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

// A `const T` (appending) or a `T` (parsing).
template <typename R, typename T>
concept RecordOf = std::same_as<std::remove_const_t<R>, T>;

// --- the records' fields, in file order (mcap.dev/spec) ---

void Fields(RecordOf<Header> auto& r, auto& c) {
  c.String("profile", r.profile);
  c.String("library", r.library);
}

void Fields(RecordOf<Footer> auto& r, auto& c) {
  c.U64("summary_start", r.summary_start);
  c.U64("summary_offset_start", r.summary_offset_start);
  c.U32("summary_crc", r.summary_crc);
}

void Fields(RecordOf<Schema> auto& r, auto& c) {
  c.U16("id", r.id);
  c.String("name", r.name);
  c.String("encoding", r.encoding);
  c.Bytes32("data", r.data);
}

void Fields(RecordOf<Channel> auto& r, auto& c) {
  c.U16("id", r.id);
  c.U16("schema_id", r.schema_id);
  c.String("topic", r.topic);
  c.String("message_encoding", r.message_encoding);
  c.Map("metadata", r.metadata);
}

// Parsed with the codec; appended by the hand-unrolled Append below (the
// logger's hot path), which must write these fields in this order.
void Fields(RecordOf<Message> auto& r, auto& c) {
  c.U16("channel_id", r.channel_id);
  c.U32("sequence", r.sequence);
  c.U64("log_time", r.log_time);
  c.U64("publish_time", r.publish_time);
  c.Rest("data", r.data);
}

void Fields(RecordOf<Chunk> auto& r, auto& c) {
  c.U64("message_start_time", r.message_start_time);
  c.U64("message_end_time", r.message_end_time);
  c.U64("uncompressed_size", r.uncompressed_size);
  c.U32("uncompressed_crc", r.uncompressed_crc);
  c.String("compression", r.compression);
  c.Bytes64("records", r.records);
}

void Fields(RecordOf<MessageIndex> auto& r, auto& c) {
  c.U16("channel_id", r.channel_id);
  c.Pairs("records", r.records);
}

void Fields(RecordOf<ChunkIndex> auto& r, auto& c) {
  c.U64("message_start_time", r.message_start_time);
  c.U64("message_end_time", r.message_end_time);
  c.U64("chunk_start_offset", r.chunk_start_offset);
  c.U64("chunk_length", r.chunk_length);
  c.MapU64("message_index_offsets", r.message_index_offsets);
  c.U64("message_index_length", r.message_index_length);
  c.String("compression", r.compression);
  c.U64("compressed_size", r.compressed_size);
  c.U64("uncompressed_size", r.uncompressed_size);
}

void Fields(RecordOf<Statistics> auto& r, auto& c) {
  c.U64("message_count", r.message_count);
  c.U16("schema_count", r.schema_count);
  c.U32("channel_count", r.channel_count);
  c.U32("attachment_count", r.attachment_count);
  c.U32("metadata_count", r.metadata_count);
  c.U32("chunk_count", r.chunk_count);
  c.U64("message_start_time", r.message_start_time);
  c.U64("message_end_time", r.message_end_time);
  c.MapU64("channel_message_counts", r.channel_message_counts);
}

void Fields(RecordOf<Metadata> auto& r, auto& c) {
  c.String("name", r.name);
  c.Map("metadata", r.metadata);
}

void Fields(RecordOf<MetadataIndex> auto& r, auto& c) {
  c.U64("offset", r.offset);
  c.U64("length", r.length);
  c.String("name", r.name);
}

void Fields(RecordOf<SummaryOffset> auto& r, auto& c) {
  c.U8("group_opcode", r.group_opcode);
  c.U64("group_start", r.group_start);
  c.U64("group_length", r.group_length);
}

void Fields(RecordOf<DataEnd> auto& r, auto& c) {
  c.U32("data_section_crc", r.data_section_crc);
}

constexpr const char* kOpcodeNames[] = {
    nullptr,      "Header",        "Footer",          "Schema",
    "Channel",    "Message",       "Chunk",           "MessageIndex",
    "ChunkIndex", "Attachment",    "AttachmentIndex", "Statistics",
    "Metadata",   "MetadataIndex", "SummaryOffset",   "DataEnd"};

template <typename T>
void AppendWithCodec(Opcode opcode, const T& record,
                     std::vector<std::byte>* out) {
  ByteWriter w(out);
  const size_t at = w.BeginRecord(static_cast<uint8_t>(opcode));
  Fields(record, w);
  w.EndRecord(at);
}

template <typename T>
absl::StatusOr<T> ParseWithCodec(Opcode opcode,
                                 std::span<const std::byte> content) {
  ByteReader r(content, kOpcodeNames[static_cast<uint8_t>(opcode)]);
  T record;
  Fields(record, r);
  if (!r.ok()) return r.status();
  return record;
}

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
  if (opcode >= 1 && opcode <= 0x0F) return kOpcodeNames[opcode];
  if (opcode >= kFirstPrivateOpcode) {
    return absl::StrFormat("private 0x%02x", opcode);
  }
  return absl::StrFormat("unknown 0x%02x", opcode);
}

void Append(const Message& r, std::vector<std::byte>* out) {
  // The hot path of the logger: one resize, fixed stores, in the order
  // Fields(Message) lists them.
  static_assert(kMessageFixedSize == 2 + 4 + 8 + 8);
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

void AppendRecord(uint8_t opcode, std::span<const std::byte> content,
                  std::vector<std::byte>* out) {
  ByteWriter w(out);
  const size_t at = w.BeginRecord(opcode);
  w.Rest("content", content);
  w.EndRecord(at);
}

absl::StatusOr<Message> ParseMessage(std::span<const std::byte> content) {
  return ParseWithCodec<Message>(Opcode::kMessage, content);
}

// Every other record: Append(Type) and Parse<Type>() through its codec; the
// opcode of each is Opcode::k<Type>.
#define TETHER_MCAP_RECORD(Type)                                         \
  void Append(const Type& r, std::vector<std::byte>* out) {              \
    AppendWithCodec(Opcode::k##Type, r, out);                            \
  }                                                                      \
  absl::StatusOr<Type> Parse##Type(std::span<const std::byte> content) { \
    return ParseWithCodec<Type>(Opcode::k##Type, content);               \
  }
TETHER_MCAP_RECORD(Header)
TETHER_MCAP_RECORD(Footer)
TETHER_MCAP_RECORD(Schema)
TETHER_MCAP_RECORD(Channel)
TETHER_MCAP_RECORD(Chunk)
TETHER_MCAP_RECORD(MessageIndex)
TETHER_MCAP_RECORD(ChunkIndex)
TETHER_MCAP_RECORD(Statistics)
TETHER_MCAP_RECORD(Metadata)
TETHER_MCAP_RECORD(MetadataIndex)
TETHER_MCAP_RECORD(SummaryOffset)
TETHER_MCAP_RECORD(DataEnd)
#undef TETHER_MCAP_RECORD

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
