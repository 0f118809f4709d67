// log: reads MCAP files, indexed or streaming, and survives damage.
//
// Open() reads the header and, if the file ends in a footer, the summary
// (checked against its CRC). Messages() then reads chunk by chunk: through
// the chunk indexes when the summary is intact (skipping chunks outside the
// time range or without the wanted channels), otherwise by scanning the data
// section record by record ("streaming"), which is what a file whose writer
// was killed (no summary) or whose summary is damaged gets.
//
// Damage never stops a read: a record that cannot be used (bad CRC, corrupt
// compressed data, a length running past the end of the file, bytes that are
// not a record) is reported as a Problem naming its file offset, and the scan
// resynchronises on the next intact chunk, so every intact chunk is still
// read. A truncated file yields everything before the cut.
//
// Threading: a reader and its iterators belong to one thread. Not RT-safe:
// reads the file, allocates.
#ifndef TETHER_LOG_MCAP_READER_H_
#define TETHER_LOG_MCAP_READER_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "log/mcap_format.h"

namespace tether::log {

// Something wrong in a file, and where.
struct McapProblem {
  uint64_t offset = 0;
  std::string what;
  // "offset 1234: what".
  std::string ToString() const;
};

// Sorts problems by offset and drops exact repeats (the same damage found
// by two passes). Any thread.
void SortProblems(std::vector<McapProblem>* problems);

// The open file: size and positioned reads. Not copyable.
class McapFile {
 public:
  static absl::StatusOr<std::unique_ptr<McapFile>> Open(
      const std::string& path);
  ~McapFile();
  McapFile(const McapFile&) = delete;
  McapFile& operator=(const McapFile&) = delete;

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }
  // Replaces `*out` with `size` bytes at `offset`; fewer at the end of the
  // file. DataLoss on a read error.
  absl::Status ReadAt(uint64_t offset, uint64_t size,
                      std::vector<std::byte>* out) const;

 private:
  McapFile(std::string path, int fd, uint64_t size)
      : path_(std::move(path)), fd_(fd), size_(size) {}
  const std::string path_;
  const int fd_;
  const uint64_t size_;
};

// One top-level record of the data section, read into its own buffer.
struct McapRecord {
  uint8_t opcode = 0;
  uint64_t offset = 0;                 // of the opcode byte in the file
  uint64_t content_size = 0;           // as the record's header declares
  // After opcode and length; empty when the scanner was told to skip this
  // kind of record's content.
  std::vector<std::byte> content;
  uint64_t size() const { return mcap::kRecordHeaderSize + content_size; }
};

// Walks the data section's top-level records in file order, from just after
// the header to Data End (or the end of the file). Records that cannot be
// framed are reported and skipped by resynchronising on the next plausible
// Chunk record. One thread.
class McapRecordScanner {
 public:
  // `start`: offset of the first record (after magic and header). With
  // `read_chunks` false, Chunk records are framed and checked to fit but
  // their content is not read (a fast pass over a large file).
  McapRecordScanner(const McapFile* file, uint64_t start,
                    bool read_chunks = true);

  // The next record; false at Data End, the footer or the end of the file.
  // Problems found on the way are appended to problems().
  bool Next(McapRecord* record);
  const std::vector<McapProblem>& problems() const { return problems_; }
  // Offset of the Data End record, once reached (0 before or if absent).
  uint64_t data_end_offset() const { return data_end_offset_; }
  // Reports a problem with a record the caller could not use (e.g. a chunk
  // whose CRC failed) and, when `resync`, continues the scan at the next
  // plausible chunk after it instead of trusting its length.
  void Reject(const McapRecord& record, const std::string& what, bool resync);

 private:
  // Searches from `from` for the next byte position that starts a Chunk
  // record whose fields are self-consistent; sets pos_ there or at the end.
  void Resync(uint64_t from);
  bool PlausibleChunkAt(uint64_t offset, std::span<const std::byte> window,
                        uint64_t window_offset);

  const McapFile* file_;
  uint64_t pos_;
  const bool read_chunks_;
  bool done_ = false;
  uint64_t data_end_offset_ = 0;
  std::vector<McapProblem> problems_;
  std::vector<std::byte> header_;
};

// A chunk's records, decompressed and CRC-checked.
absl::Status DecompressChunk(const mcap::Chunk& chunk,
                             std::vector<std::byte>* records);

struct McapReadOptions {
  // Messages with log_time in [start_time, end_time].
  uint64_t start_time = 0;
  uint64_t end_time = std::numeric_limits<uint64_t>::max();
  // Only these channel ids (empty: all).
  std::set<uint16_t> channels;
  // Scan the data section even when the summary is intact.
  bool force_scan = false;
};

// One message as read. Spans point into the iterator's buffers and are
// valid until its next Next().
struct McapMessageView {
  mcap::Message message;
  // The record right after the message inside its chunk, when it is a
  // private record (opcode >= 0x80): per-message data a writer added.
  std::optional<mcap::RecordView> trailer;
  // File offset of the chunk holding the message (or of the message record
  // itself when it is outside any chunk).
  uint64_t chunk_offset = 0;
};

class McapReader;

// Messages in file order (chunk by chunk, records in chunk order). Not
// copyable; the reader must outlive it.
class McapMessageIterator {
 public:
  bool Next(McapMessageView* view);
  // Problems met so far (skipped chunks, bad records), in file order.
  const std::vector<McapProblem>& problems() const;
  // Chunks read so far / intact ones skipped by the filters.
  uint64_t chunks_read() const { return chunks_read_; }

 private:
  friend class McapReader;
  McapMessageIterator(McapReader* reader, const McapReadOptions& options);
  bool LoadNextChunk();
  bool UseChunk(const mcap::Chunk& chunk, uint64_t offset,
                const std::string& where);
  bool Wanted(const mcap::Message& m) const;

  McapReader* const reader_;
  const McapReadOptions options_;
  bool indexed_;
  size_t next_index_ = 0;                        // indexed: chunk index position
  std::unique_ptr<McapRecordScanner> scanner_;   // streaming
  McapRecord record_;
  std::vector<std::byte> chunk_records_;
  std::vector<std::byte> compressed_;
  uint64_t chunk_pos_ = 0;
  uint64_t chunk_offset_ = 0;
  bool in_chunk_ = false;
  bool pending_top_level_ = false;  // record_ holds a top-level message
  std::vector<McapProblem> problems_;
  uint64_t chunks_read_ = 0;
};

class McapReader {
 public:
  // Fails (NotFound, PermissionDenied, DataLoss) only when the file cannot
  // be read or does not start as MCAP (magic and a Header record). A
  // missing, truncated or corrupt summary is a problem, not an error: the
  // file is then read by scanning. Without a summary, Open scans the record
  // headers once to find schemas, channels and metadata (and, if channels
  // live inside chunks, the chunks too).
  static absl::StatusOr<std::unique_ptr<McapReader>> Open(
      const std::string& path);
  McapReader(const McapReader&) = delete;
  McapReader& operator=(const McapReader&) = delete;

  const McapFile& file() const { return *file_; }
  const mcap::Header& header() const { return header_; }
  // The summary was found and its CRC (if any) matched.
  bool indexed() const { return indexed_; }
  const std::optional<mcap::Footer>& footer() const { return footer_; }
  const std::optional<mcap::Statistics>& statistics() const {
    return statistics_;
  }
  const std::map<uint16_t, mcap::Schema>& schemas() const { return schemas_; }
  const std::map<uint16_t, mcap::Channel>& channels() const {
    return channels_;
  }
  const std::vector<mcap::ChunkIndex>& chunk_indexes() const {
    return chunk_indexes_;
  }
  // Metadata records (read at Open).
  const std::vector<mcap::Metadata>& metadata() const { return metadata_; }
  // Offset where the first data-section record starts.
  uint64_t data_start() const { return data_start_; }
  // Problems found opening the file (summary missing or damaged, ...).
  const std::vector<McapProblem>& problems() const { return problems_; }

  // Messages in file order, filtered.
  std::unique_ptr<McapMessageIterator> Messages(
      const McapReadOptions& options = {});

  // A channel met while iterating that the summary/scan did not list
  // (registered by iterators). Internal.
  void LearnChannel(mcap::Channel channel);
  void LearnSchema(mcap::Schema schema);

 private:
  McapReader() = default;
  absl::Status ReadHeader();
  void ReadSummary();
  void ScanForDefinitions();

  std::unique_ptr<McapFile> file_;
  mcap::Header header_;
  uint64_t data_start_ = 0;
  bool indexed_ = false;
  std::optional<mcap::Footer> footer_;
  std::optional<mcap::Statistics> statistics_;
  std::map<uint16_t, mcap::Schema> schemas_;
  std::map<uint16_t, mcap::Channel> channels_;
  std::vector<mcap::ChunkIndex> chunk_indexes_;
  std::vector<mcap::MetadataIndex> metadata_indexes_;
  std::vector<mcap::Metadata> metadata_;
  std::vector<McapProblem> problems_;
};

}  // namespace tether::log

#endif  // TETHER_LOG_MCAP_READER_H_
