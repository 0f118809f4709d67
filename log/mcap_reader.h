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
// read. A truncated file yields everything before the cut. (The scan itself,
// and the file it reads, are in mcap_scanner.h.)
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
#include "log/mcap_scanner.h"

namespace tether::log {

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
  // The next chunk to read, from the chunk indexes or from the scan.
  bool LoadNextChunk();
  bool LoadNextIndexedChunk();
  bool LoadNextScannedChunk();
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
