// log: the bottom of MCAP reading: the open file, and the linear scan of
// its data section record by record that survives damage (the path of a
// file without a usable summary, and of `tether log check|info|recover`).
//
// The scan frames each top-level record and checks that it fits the file; a
// record that cannot be framed (not an opcode, a length past the end or
// implausibly large) is reported as a McapProblem naming its offset, and the
// scan resynchronises on the next plausible Chunk record, so every intact
// chunk after the damage is still found. mcap_reader.h builds the indexed
// and the streaming reads on this.
//
// Threading: a scanner belongs to one thread. Not RT-safe: reads the file,
// allocates.
#ifndef TETHER_LOG_MCAP_SCANNER_H_
#define TETHER_LOG_MCAP_SCANNER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
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
  // Opens a regular file for reading. Never blocks in open(): a FIFO (with
  // or without a writer), a device or a directory is InvalidArgument "...
  // is not a regular file"; NotFound, PermissionDenied, else DataLoss with
  // the errno text.
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

namespace internal {

// Records other than chunks and attachments are small; a larger length is
// a corrupt length field, not a record to read into memory.
inline constexpr uint64_t kMaxSmallRecord = 64ull << 20;

// "<Record> record declares N bytes but the file has only M more: the file
// is truncated (...) or the length is corrupt". Any thread.
std::string TruncatedRecordText(uint8_t opcode, uint64_t declared,
                                uint64_t left);

}  // namespace internal
}  // namespace tether::log

#endif  // TETHER_LOG_MCAP_SCANNER_H_
