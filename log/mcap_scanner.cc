#include "log/mcap_scanner.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tether::log {
namespace {

using internal::kMaxSmallRecord;
constexpr uint64_t kMaxChunkRecord = 4ull << 30;
constexpr uint64_t kResyncWindow = 4ull << 20;
// Opcode, length and the chunk's fixed fields up to the compression string.
constexpr uint64_t kChunkProbe = mcap::kRecordHeaderSize + 8 + 8 + 8 + 4 + 4;

bool IsKnownOrPrivate(uint8_t opcode) {
  return (opcode >= 0x01 && opcode <= 0x0F) ||
         opcode >= mcap::kFirstPrivateOpcode;
}

}  // namespace

std::string internal::TruncatedRecordText(uint8_t opcode, uint64_t declared,
                                          uint64_t left) {
  return absl::StrFormat(
      "%s record declares %u bytes but the file has only %u more: the file "
      "is truncated (its writer was killed or the copy is incomplete) or "
      "the length is corrupt",
      mcap::OpcodeName(opcode), declared, left);
}

std::string McapProblem::ToString() const {
  return absl::StrCat("offset ", offset, ": ", what);
}

void SortProblems(std::vector<McapProblem>* problems) {
  std::stable_sort(problems->begin(), problems->end(),
                   [](const McapProblem& a, const McapProblem& b) {
                     return a.offset < b.offset;
                   });
  problems->erase(std::unique(problems->begin(), problems->end(),
                              [](const McapProblem& a, const McapProblem& b) {
                                return a.offset == b.offset && a.what == b.what;
                              }),
                  problems->end());
}

// --- McapFile ---------------------------------------------------------------

absl::StatusOr<std::unique_ptr<McapFile>> McapFile::Open(
    const std::string& path) {
  // O_NONBLOCK: opening a FIFO without a writer (or some devices) would
  // otherwise block in open() until one appears, before the check below
  // could refuse it. Regular files ignore the flag; it is cleared anyway.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    const std::string text =
        absl::StrCat("cannot open ", path, ": ", std::strerror(err));
    if (err == ENOENT) return absl::NotFoundError(text);
    if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(text);
    return absl::DataLossError(text);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return absl::DataLossError(
        absl::StrCat("cannot stat ", path, ": ", std::strerror(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    const char* what = S_ISDIR(st.st_mode)    ? "a directory"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "a device";
    return absl::InvalidArgumentError(absl::StrCat(
        path, " is not a regular file (it is ", what,
        "): give the path of a .mcap log, e.g. one `tether record` wrote "
        "(a split recording's parts are NAME_000.mcap, NAME_001.mcap, "
        "...); a stream must be copied to a file first"));
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    const int err = errno;
    ::close(fd);
    return absl::DataLossError(
        absl::StrCat("cannot open ", path, ": ", std::strerror(err)));
  }
  return std::unique_ptr<McapFile>(
      new McapFile(path, fd, static_cast<uint64_t>(st.st_size)));
}

McapFile::~McapFile() { ::close(fd_); }

absl::Status McapFile::ReadAt(uint64_t offset, uint64_t size,
                              std::vector<std::byte>* out) const {
  if (offset >= size_) {
    out->clear();
    return absl::OkStatus();
  }
  size = std::min(size, size_ - offset);
  out->resize(size);
  uint64_t done = 0;
  while (done < size) {
    const ssize_t n =
        ::pread(fd_, out->data() + done, size - done, offset + done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return absl::DataLossError(absl::StrCat(
          "reading ", path_, " at offset ", offset + done, ": ",
          n < 0 ? std::strerror(errno) : "unexpected end of file"));
    }
    done += static_cast<uint64_t>(n);
  }
  return absl::OkStatus();
}

// --- scanner ----------------------------------------------------------------

McapRecordScanner::McapRecordScanner(const McapFile* file, uint64_t start,
                                     bool read_chunks)
    : file_(file), pos_(start), read_chunks_(read_chunks) {}

bool McapRecordScanner::Next(McapRecord* record) {
  while (!done_) {
    const uint64_t size = file_->size();
    if (pos_ >= size) {
      done_ = true;
      return false;
    }
    const uint64_t left = size - pos_;
    if (left < mcap::kRecordHeaderSize) {
      problems_.push_back(
          {pos_, absl::StrFormat("the last %u bytes are not a whole record "
                                 "(the file is truncated)",
                                 left)});
      done_ = true;
      return false;
    }
    if (absl::Status s =
            file_->ReadAt(pos_, mcap::kRecordHeaderSize, &header_);
        !s.ok()) {
      problems_.push_back({pos_, std::string(s.message())});
      done_ = true;
      return false;
    }
    const uint8_t opcode = static_cast<uint8_t>(header_[0]);
    const uint64_t length = mcap::LoadU64(header_.data() + 1);
    if (!IsKnownOrPrivate(opcode)) {
      problems_.push_back(
          {pos_, absl::StrFormat("byte 0x%02x is not a record opcode: the "
                                 "data here is corrupt; skipping to the next "
                                 "intact chunk",
                                 opcode)});
      Resync(pos_ + 1);
      continue;
    }
    if (length > left - mcap::kRecordHeaderSize) {
      problems_.push_back(
          {pos_, internal::TruncatedRecordText(
                     opcode, length, left - mcap::kRecordHeaderSize)});
      Resync(pos_ + 1);
      continue;
    }
    const bool big = opcode == static_cast<uint8_t>(mcap::Opcode::kChunk) ||
                     opcode == static_cast<uint8_t>(mcap::Opcode::kAttachment);
    if (length > (big ? kMaxChunkRecord : kMaxSmallRecord)) {
      problems_.push_back(
          {pos_, absl::StrFormat("%s record declares an implausible %u bytes: "
                                 "its length is corrupt; skipping to the "
                                 "next intact chunk",
                                 mcap::OpcodeName(opcode), length)});
      Resync(pos_ + 1);
      continue;
    }
    if (opcode == static_cast<uint8_t>(mcap::Opcode::kDataEnd)) {
      data_end_offset_ = pos_;
      done_ = true;
      return false;
    }
    if (opcode == static_cast<uint8_t>(mcap::Opcode::kFooter)) {
      problems_.push_back({pos_, "footer without a Data End record before it"});
      done_ = true;
      return false;
    }
    record->opcode = opcode;
    record->offset = pos_;
    record->content_size = length;
    const bool skip =
        !read_chunks_ && opcode == static_cast<uint8_t>(mcap::Opcode::kChunk);
    if (skip) {
      record->content.clear();
    } else if (absl::Status s = file_->ReadAt(pos_ + mcap::kRecordHeaderSize,
                                              length, &record->content);
               !s.ok()) {
      problems_.push_back({pos_, std::string(s.message())});
      done_ = true;
      return false;
    }
    pos_ += mcap::kRecordHeaderSize + length;
    return true;
  }
  return false;
}

void McapRecordScanner::Reject(const McapRecord& record,
                               const std::string& what, bool resync) {
  problems_.push_back({record.offset, what});
  if (resync) Resync(record.offset + 1);
}

bool McapRecordScanner::PlausibleChunkAt(uint64_t offset,
                                         std::span<const std::byte> window,
                                         uint64_t window_offset) {
  const uint64_t at = offset - window_offset;
  if (at + kChunkProbe > window.size()) return false;
  const std::byte* p = window.data() + at;
  if (static_cast<uint8_t>(p[0]) != static_cast<uint8_t>(mcap::Opcode::kChunk)) {
    return false;
  }
  const uint64_t length = mcap::LoadU64(p + 1);
  const uint64_t size = file_->size();
  if (length < kChunkProbe - mcap::kRecordHeaderSize + 8 ||
      length > size - offset - mcap::kRecordHeaderSize ||
      length > kMaxChunkRecord) {
    return false;
  }
  const uint64_t start = mcap::LoadU64(p + 9);
  const uint64_t end = mcap::LoadU64(p + 17);
  const uint64_t uncompressed = mcap::LoadU64(p + 25);
  const uint32_t name_length = mcap::LoadU32(p + 37);
  if (start > end || uncompressed > kMaxChunkRecord || name_length > 16) {
    return false;
  }
  if (at + kChunkProbe + name_length + 8 > window.size()) return false;
  const std::string_view name(reinterpret_cast<const char*>(p + kChunkProbe),
                              name_length);
  if (name != "" && name != "zstd" && name != "lz4") return false;
  const uint64_t records = mcap::LoadU64(p + kChunkProbe + name_length);
  // The record's length must be exactly its fields plus the records.
  return length == (kChunkProbe - mcap::kRecordHeaderSize) + name_length + 8 +
                       records;
}

void McapRecordScanner::Resync(uint64_t from) {
  const uint64_t size = file_->size();
  std::vector<std::byte> window;
  for (uint64_t w = from; w < size; w += kResyncWindow) {
    // Overlap windows so a chunk header across a boundary is seen.
    if (!file_->ReadAt(w, kResyncWindow + 64, &window).ok()) break;
    const uint64_t limit = std::min<uint64_t>(window.size(), kResyncWindow);
    for (uint64_t i = 0; i < limit; ++i) {
      if (static_cast<uint8_t>(window[i]) ==
              static_cast<uint8_t>(mcap::Opcode::kChunk) &&
          PlausibleChunkAt(w + i, window, w)) {
        problems_.push_back(
            {w + i, absl::StrFormat("resuming at an intact-looking chunk "
                                    "(%u bytes skipped)",
                                    w + i - from + 1)});
        pos_ = w + i;
        return;
      }
    }
  }
  pos_ = size;
  done_ = true;
}

}  // namespace tether::log
