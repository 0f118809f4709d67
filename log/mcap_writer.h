// log: writes MCAP files that standard readers open indexed: messages in
// chunks (zstd or uncompressed) each followed by its message indexes, then
// Data End (with the data section's CRC), a summary (schema and channel
// copies, statistics, chunk and metadata indexes), summary offsets and the
// footer (with the summary's CRC).
//
// Crash behaviour: schema, channel and metadata records are written to the
// file as soon as they are added, and each chunk when it is closed, so a
// writer killed at any point leaves every closed chunk readable (the reader
// scans a file without a summary; `tether log recover` rewrites it whole).
// What is lost is the open chunk: at most `chunk_size` bytes or
// `FlushChunk()`'s period of messages.
//
// Threading: one thread at a time; not RT-safe (allocates, compresses,
// writes to the file).
#ifndef TETHER_LOG_MCAP_WRITER_H_
#define TETHER_LOG_MCAP_WRITER_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "log/compression.h"
#include "log/mcap_format.h"

namespace tether::log {

struct McapWriterOptions {
  Compression compression = Compression::kZstd;
  // zstd level: 1 is fast (the logger's default), 19 small.
  int zstd_level = 1;
  // A chunk is closed (compressed and written) once its records reach this
  // many uncompressed bytes.
  uint64_t chunk_size = 1 << 20;
  // Header fields.
  std::string profile;
  std::string library = "tether";
  // Replace an existing file instead of failing with AlreadyExists.
  bool overwrite = false;
  // fsync the file at Close().
  bool sync_on_close = false;
};

struct McapWriterStats {
  uint64_t messages = 0;  // given to WriteMessage
  // Chunks whose record reached the file whole (counted before their
  // message indexes are written: a reader finds such a chunk by scanning
  // even when a later write failed).
  uint64_t chunks = 0;
  // Records put into those chunks, before / after compression.
  uint64_t uncompressed_bytes = 0;
  uint64_t compressed_bytes = 0;
  // In the file so far, including the part of a write that failed midway.
  uint64_t file_bytes = 0;
  // The messages of those chunks: what reached the file, per channel id
  // (payload bytes with them). After a write error, messages - written
  // messages were accepted but are in no chunk of the file.
  struct ChannelCount {
    uint64_t messages = 0;
    uint64_t bytes = 0;
  };
  uint64_t written_messages = 0;
  std::map<uint16_t, ChannelCount> written;
};

// InvalidArgument when `out` names the same file as `in` (another path to
// it: ./x, a link), which writing `out` would destroy; OK when either does
// not exist. `what` names the command in the error. Any thread.
absl::Status CheckOutputIsNotInput(const std::string& in, const std::string& out,
                                   const std::string& what);

class McapWriter {
 public:
  // Creates `path` and writes the magic and header. AlreadyExists unless
  // options.overwrite; FailedPrecondition for a FIFO nobody reads (never
  // waits for a reader); the errno text otherwise. If the header cannot be
  // written the file is removed again.
  static absl::StatusOr<std::unique_ptr<McapWriter>> Create(
      const std::string& path, const McapWriterOptions& options);
  // Close()s the file if that was not done (errors are lost then: call
  // Close() to see them).
  ~McapWriter();
  McapWriter(const McapWriter&) = delete;
  McapWriter& operator=(const McapWriter&) = delete;

  // Adds a schema (written at once) and returns its id; the same name,
  // encoding and data again return the same id.
  absl::StatusOr<uint16_t> AddSchema(const std::string& name,
                                     const std::string& encoding,
                                     std::span<const std::byte> data);
  // Adds a channel (written at once). `schema_id` 0 means no schema.
  // InvalidArgument for an unknown schema id; ResourceExhausted after 65535
  // channels.
  absl::StatusOr<uint16_t> AddChannel(uint16_t schema_id,
                                      const std::string& topic,
                                      const std::string& message_encoding,
                                      const mcap::KeyValueMap& metadata);

  // Appends a message to the open chunk (closing it first if full).
  // `trailer` (may be empty) is a whole private record (opcode >= 0x80,
  // framed) that is placed right after the message in the same chunk, for
  // data about the message that MCAP has no field for. InvalidArgument for
  // an unknown channel. After a write error every call returns that error.
  absl::Status WriteMessage(const mcap::Message& message,
                            std::span<const std::byte> trailer = {});

  // Writes a metadata record (closing the open chunk first, so the record
  // sits in time order between chunks).
  absl::Status WriteMetadata(const mcap::Metadata& metadata);

  // Compresses and writes the open chunk, if any, and its message indexes.
  absl::Status FlushChunk();

  // Writes the open chunk, Data End, summary, summary offsets, footer and
  // closing magic, and closes the file. Idempotent.
  absl::Status Close();

  // Closes the file without finishing it and removes it if it is the
  // regular file this writer created or truncated (a device or FIFO given
  // as the path is left alone): for a caller whose output is worthless
  // after an error (Create does it when even the header cannot be written).
  void Discard();

  const std::string& path() const { return path_; }
  const McapWriterStats& stats() const { return stats_; }
  // Uncompressed bytes in the open chunk.
  uint64_t open_chunk_bytes() const { return chunk_.size(); }
  bool closed() const { return fd_ < 0; }

 private:
  McapWriter(std::string path, int fd, const McapWriterOptions& options);
  // Appends to the file; `crc` is the bytes' CRC when the caller knows it.
  absl::Status WriteData(std::span<const std::byte> bytes,
                         std::optional<uint32_t> crc = std::nullopt);
  absl::Status WriteSummary(std::vector<std::byte>* out, uint64_t start);
  absl::Status Fail(absl::Status status);

  struct FileId {
    dev_t dev;
    ino_t ino;
  };
  const std::string path_;
  int fd_;
  // The regular file opened at Create (what Discard may remove).
  std::optional<FileId> made_;
  const McapWriterOptions options_;
  Compressor compressor_;
  absl::Status error_;
  uint64_t offset_ = 0;         // bytes in the file
  uint32_t data_crc_ = 0;       // of everything written before Data End

  std::vector<mcap::Schema> schemas_;
  std::vector<mcap::Channel> channels_;  // index = id - 1
  std::vector<mcap::ChunkIndex> chunk_indexes_;
  std::vector<mcap::MetadataIndex> metadata_indexes_;
  mcap::Statistics statistics_;

  // The open chunk.
  std::vector<std::byte> chunk_;
  std::map<uint16_t, std::vector<std::pair<uint64_t, uint64_t>>> chunk_index_;
  std::map<uint16_t, uint64_t> chunk_payload_;  // message bytes per channel
  uint64_t chunk_start_time_ = 0;
  uint64_t chunk_end_time_ = 0;
  uint64_t chunk_messages_ = 0;
  std::vector<std::byte> compressed_;
  std::vector<std::byte> scratch_;
  McapWriterStats stats_;
};

}  // namespace tether::log

#endif  // TETHER_LOG_MCAP_WRITER_H_
