// log: the MCAP container format (mcap.dev/spec, major version 0) as plain
// C++ records, their little-endian serialization and bounds-checked parsing.
// The writer and reader (mcap_writer.h, mcap_reader.h) build on this; nothing
// here does I/O. Attachments and attachment indexes are parsed only far
// enough to be skipped (tether writes none).
//
// Threading: free functions and value types; any thread. Not RT-safe: parsing
// and appending allocate.
#ifndef TETHER_LOG_MCAP_FORMAT_H_
#define TETHER_LOG_MCAP_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace tether::log::mcap {

// 0x89 "MCAP" '0' "\r\n": starts and ends every file.
inline constexpr std::byte kMagic[8] = {
    std::byte{0x89}, std::byte{'M'}, std::byte{'C'},  std::byte{'A'},
    std::byte{'P'},  std::byte{'0'}, std::byte{'\r'}, std::byte{'\n'}};
inline constexpr size_t kMagicSize = sizeof(kMagic);
// opcode (1) + content length (8).
inline constexpr size_t kRecordHeaderSize = 9;
// A Footer record with its header, and the closing magic.
inline constexpr size_t kFooterRecordSize = kRecordHeaderSize + 8 + 8 + 4;
inline constexpr size_t kDataEndRecordSize = kRecordHeaderSize + 4;
// Fixed part of a Message record's content before its data.
inline constexpr size_t kMessageFixedSize = 2 + 4 + 8 + 8;

enum class Opcode : uint8_t {
  kHeader = 0x01,
  kFooter = 0x02,
  kSchema = 0x03,
  kChannel = 0x04,
  kMessage = 0x05,
  kChunk = 0x06,
  kMessageIndex = 0x07,
  kChunkIndex = 0x08,
  kAttachment = 0x09,
  kAttachmentIndex = 0x0A,
  kStatistics = 0x0B,
  kMetadata = 0x0C,
  kMetadataIndex = 0x0D,
  kSummaryOffset = 0x0E,
  kDataEnd = 0x0F,
};
// 0x80..0xFF are for applications; readers skip what they do not know.
inline constexpr uint8_t kFirstPrivateOpcode = 0x80;

// "Header", "Chunk", ... or "private 0x80" / "unknown 0x1f".
std::string OpcodeName(uint8_t opcode);

using KeyValueMap = std::map<std::string, std::string>;

struct Header {
  std::string profile;
  std::string library;
};

struct Footer {
  uint64_t summary_start = 0;
  uint64_t summary_offset_start = 0;
  uint32_t summary_crc = 0;
};

struct Schema {
  uint16_t id = 0;
  std::string name;
  std::string encoding;
  std::vector<std::byte> data;
  friend bool operator==(const Schema&, const Schema&) = default;
};

struct Channel {
  uint16_t id = 0;
  uint16_t schema_id = 0;
  std::string topic;
  std::string message_encoding;
  KeyValueMap metadata;
  friend bool operator==(const Channel&, const Channel&) = default;
};

// A Message record; `data` is borrowed from the buffer it was parsed from.
struct Message {
  uint16_t channel_id = 0;
  uint32_t sequence = 0;
  uint64_t log_time = 0;
  uint64_t publish_time = 0;
  std::span<const std::byte> data;
};

// A Chunk record; `records` (compressed as `compression` says) is borrowed.
struct Chunk {
  uint64_t message_start_time = 0;
  uint64_t message_end_time = 0;
  uint64_t uncompressed_size = 0;
  uint32_t uncompressed_crc = 0;
  std::string compression;
  std::span<const std::byte> records;
};

struct MessageIndex {
  uint16_t channel_id = 0;
  // (log_time, offset of the Message record in the uncompressed chunk).
  std::vector<std::pair<uint64_t, uint64_t>> records;
  friend bool operator==(const MessageIndex&, const MessageIndex&) = default;
};

struct ChunkIndex {
  uint64_t message_start_time = 0;
  uint64_t message_end_time = 0;
  uint64_t chunk_start_offset = 0;
  uint64_t chunk_length = 0;  // the whole Chunk record, header included
  std::map<uint16_t, uint64_t> message_index_offsets;
  uint64_t message_index_length = 0;
  std::string compression;
  uint64_t compressed_size = 0;
  uint64_t uncompressed_size = 0;
  friend bool operator==(const ChunkIndex&, const ChunkIndex&) = default;
};

struct Statistics {
  uint64_t message_count = 0;
  uint16_t schema_count = 0;
  uint32_t channel_count = 0;
  uint32_t attachment_count = 0;
  uint32_t metadata_count = 0;
  uint32_t chunk_count = 0;
  uint64_t message_start_time = 0;
  uint64_t message_end_time = 0;
  std::map<uint16_t, uint64_t> channel_message_counts;
  friend bool operator==(const Statistics&, const Statistics&) = default;
};

struct Metadata {
  std::string name;
  KeyValueMap metadata;
};

struct MetadataIndex {
  uint64_t offset = 0;
  uint64_t length = 0;
  std::string name;
};

struct SummaryOffset {
  uint8_t group_opcode = 0;
  uint64_t group_start = 0;
  uint64_t group_length = 0;
};

struct DataEnd {
  uint32_t data_section_crc = 0;
};

// --- serialization: each appends one whole record (opcode, length, content)
void Append(const Header& r, std::vector<std::byte>* out);
void Append(const Footer& r, std::vector<std::byte>* out);
void Append(const Schema& r, std::vector<std::byte>* out);
void Append(const Channel& r, std::vector<std::byte>* out);
void Append(const Message& r, std::vector<std::byte>* out);
// The Chunk record with `r.records` as its (already compressed) payload.
void Append(const Chunk& r, std::vector<std::byte>* out);
void Append(const MessageIndex& r, std::vector<std::byte>* out);
void Append(const ChunkIndex& r, std::vector<std::byte>* out);
void Append(const Statistics& r, std::vector<std::byte>* out);
void Append(const Metadata& r, std::vector<std::byte>* out);
void Append(const MetadataIndex& r, std::vector<std::byte>* out);
void Append(const SummaryOffset& r, std::vector<std::byte>* out);
void Append(const DataEnd& r, std::vector<std::byte>* out);
// Any record, e.g. a private one (opcode >= 0x80).
void AppendRecord(uint8_t opcode, std::span<const std::byte> content,
                  std::vector<std::byte>* out);

// --- parsing: `content` is a record's content (after opcode and length).
// Errors are InvalidArgument naming the record and field ("Channel record:
// topic: length 300 exceeds the 12 bytes left"); callers add where the record
// is. Trailing bytes after the known fields are ignored (records may grow).
absl::StatusOr<Header> ParseHeader(std::span<const std::byte> content);
absl::StatusOr<Footer> ParseFooter(std::span<const std::byte> content);
absl::StatusOr<Schema> ParseSchema(std::span<const std::byte> content);
absl::StatusOr<Channel> ParseChannel(std::span<const std::byte> content);
absl::StatusOr<Message> ParseMessage(std::span<const std::byte> content);
absl::StatusOr<Chunk> ParseChunk(std::span<const std::byte> content);
absl::StatusOr<MessageIndex> ParseMessageIndex(
    std::span<const std::byte> content);
absl::StatusOr<ChunkIndex> ParseChunkIndex(std::span<const std::byte> content);
absl::StatusOr<Statistics> ParseStatistics(std::span<const std::byte> content);
absl::StatusOr<Metadata> ParseMetadata(std::span<const std::byte> content);
absl::StatusOr<MetadataIndex> ParseMetadataIndex(
    std::span<const std::byte> content);
absl::StatusOr<SummaryOffset> ParseSummaryOffset(
    std::span<const std::byte> content);
absl::StatusOr<DataEnd> ParseDataEnd(std::span<const std::byte> content);

// One record framed in a buffer.
struct RecordView {
  uint8_t opcode = 0;
  std::span<const std::byte> content;
  uint64_t offset = 0;  // of the opcode byte, in the buffer
  uint64_t size() const { return kRecordHeaderSize + content.size(); }
};

enum class [[nodiscard]] SplitStatus {
  kOk,
  kEnd,             // no bytes left
  kTruncated,       // the header, or the content it declares, runs past the end
};

// Splits the record starting at `*pos` of `buffer` and advances `*pos` past
// it. On kTruncated, `*declared` (if not null) gets the content length the
// header declares (0 if even the header is cut). Never reads past `buffer`.
SplitStatus SplitRecord(std::span<const std::byte> buffer, uint64_t* pos,
                        RecordView* record, uint64_t* declared = nullptr);

// Little-endian helpers (any alignment).
uint64_t LoadU64(const std::byte* p);
uint32_t LoadU32(const std::byte* p);
uint16_t LoadU16(const std::byte* p);
void StoreU64(std::byte* p, uint64_t v);

}  // namespace tether::log::mcap

#endif  // TETHER_LOG_MCAP_FORMAT_H_
