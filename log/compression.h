// log: chunk compression for MCAP files (none or zstd, Debian's libzstd) and
// the CRC-32 MCAP uses (IEEE 802.3, zlib's implementation).
#ifndef TETHER_LOG_COMPRESSION_H_
#define TETHER_LOG_COMPRESSION_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace tether::log {

enum class Compression { kNone, kZstd };

// The chunk record's compression string: "" or "zstd".
std::string_view McapCompressionName(Compression compression);
// "none" | "zstd" (command-line spelling). InvalidArgument otherwise.
absl::StatusOr<Compression> ParseCompression(std::string_view name);

// CRC-32 as MCAP uses it; pass the previous result to continue (0 to start).
// Any thread.
uint32_t Crc32(std::span<const std::byte> data, uint32_t previous = 0);
// The CRC of A followed by B from CRC(A), CRC(B) and B's length (no pass
// over the bytes). Any thread.
uint32_t Crc32Combine(uint32_t crc_a, uint32_t crc_b, uint64_t length_b);

// Reusable compression state. One thread at a time; allocates.
class Compressor {
 public:
  // `zstd_level`: 1 (fast) .. 19 (small); ignored for kNone.
  Compressor(Compression compression, int zstd_level);
  ~Compressor();
  Compressor(const Compressor&) = delete;
  Compressor& operator=(const Compressor&) = delete;

  // Replaces `*out` with `in` compressed (or copied for kNone).
  absl::Status Compress(std::span<const std::byte> in,
                        std::vector<std::byte>* out);
  Compression compression() const { return compression_; }

 private:
  Compression compression_;
  int level_;
  void* context_ = nullptr;  // ZSTD_CCtx
};

// Replaces `*out` with `in` decompressed per the chunk's `compression` string
// ("" or "zstd"). The result must be exactly `uncompressed_size` bytes.
// InvalidArgument naming the problem (unsupported compression, corrupt data,
// size mismatch). Any thread; allocates.
absl::Status Decompress(std::string_view compression,
                        std::span<const std::byte> in,
                        uint64_t uncompressed_size,
                        std::vector<std::byte>* out);

}  // namespace tether::log

#endif  // TETHER_LOG_COMPRESSION_H_
