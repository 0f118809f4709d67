#include "log/compression.h"

#include <algorithm>

#include <zlib.h>
#include <zstd.h>

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tether::log {

// Largest chunk we agree to inflate: a corrupt size field must not make us
// allocate terabytes.
constexpr uint64_t kMaxUncompressedChunk = uint64_t{4} << 30;

std::string_view McapCompressionName(Compression compression) {
  return compression == Compression::kZstd ? "zstd" : "";
}

absl::StatusOr<Compression> ParseCompression(std::string_view name) {
  if (name == "zstd") return Compression::kZstd;
  if (name == "none") return Compression::kNone;
  return absl::InvalidArgumentError(
      absl::StrCat("compression '", std::string(name), "' is not one of: zstd, none"));
}

uint32_t Crc32(std::span<const std::byte> data, uint32_t previous) {
  return static_cast<uint32_t>(
      ::crc32_z(previous, reinterpret_cast<const Bytef*>(data.data()),
                data.size()));
}

uint32_t Crc32Combine(uint32_t crc_a, uint32_t crc_b, uint64_t length_b) {
  return static_cast<uint32_t>(
      ::crc32_combine(crc_a, crc_b, static_cast<z_off_t>(length_b)));
}

Compressor::Compressor(Compression compression, int zstd_level)
    : compression_(compression), level_(zstd_level) {
  if (compression_ == Compression::kZstd) context_ = ZSTD_createCCtx();
}

Compressor::~Compressor() {
  if (context_ != nullptr) ZSTD_freeCCtx(static_cast<ZSTD_CCtx*>(context_));
}

absl::Status Compressor::Compress(std::span<const std::byte> in,
                                  std::vector<std::byte>* out) {
  if (compression_ == Compression::kNone) {
    out->assign(in.begin(), in.end());
    return absl::OkStatus();
  }
  if (context_ == nullptr) return absl::ResourceExhaustedError("zstd: no context");
  out->resize(ZSTD_compressBound(in.size()));
  const size_t n =
      ZSTD_compressCCtx(static_cast<ZSTD_CCtx*>(context_), out->data(),
                        out->size(), in.data(), in.size(), level_);
  if (ZSTD_isError(n)) {
    return absl::InternalError(
        absl::StrCat("zstd compression failed: ", ZSTD_getErrorName(n)));
  }
  out->resize(n);
  return absl::OkStatus();
}

absl::Status Decompress(std::string_view compression,
                        std::span<const std::byte> in,
                        uint64_t uncompressed_size,
                        std::vector<std::byte>* out) {
  if (uncompressed_size > kMaxUncompressedChunk) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "chunk claims %u uncompressed bytes (more than the %u this reader "
        "accepts): the size field is corrupt",
        uncompressed_size, kMaxUncompressedChunk));
  }
  if (compression.empty()) {
    if (in.size() != uncompressed_size) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "uncompressed chunk holds %d bytes but declares %u", in.size(),
          uncompressed_size));
    }
    out->assign(in.begin(), in.end());
    return absl::OkStatus();
  }
  if (compression != "zstd") {
    // The name is the file's bytes: escaped, so a corrupt one prints as
    // what it is.
    return absl::InvalidArgumentError(absl::StrCat(
        "chunk compression \"",
        absl::CHexEscape(
            absl::string_view(compression.data(), compression.size())),
        "\" is not supported (tether reads \"zstd\" and uncompressed chunks, "
        "whose MCAP compression is the empty string \"\"",
        compression == "none" ? ", not \"none\"" : "",
        "; re-encode the file with zstd, e.g. `mcap convert`)"));
  }
  // The declared size is the file's word, so memory grows with what the
  // data really inflates to (a few bytes claiming 4 GiB must not allocate
  // 4 GiB), up to one byte past the declared size (which shows "more").
  ZSTD_DStream* z = ZSTD_createDStream();
  if (z == nullptr) return absl::ResourceExhaustedError("zstd: out of memory");
  const uint64_t cap = uncompressed_size + 1;
  out->resize(std::min<uint64_t>(cap, 16 * in.size() + 65536));
  ZSTD_inBuffer src{in.data(), in.size(), 0};
  ZSTD_outBuffer dst{out->data(), out->size(), 0};
  size_t left = 0;
  for (;;) {
    left = ZSTD_decompressStream(z, &dst, &src);
    if (ZSTD_isError(left)) break;
    if (left == 0 && src.pos == src.size) break;  // every frame done
    if (dst.pos == dst.size) {
      if (out->size() >= cap) break;  // more than declared
      out->resize(std::min<uint64_t>(cap, 2 * out->size()));
      dst.dst = out->data();
      dst.size = out->size();
    } else if (left != 0 && src.pos == src.size) {
      break;  // truncated: the frame wants input that is not there
    }
  }
  ZSTD_freeDStream(z);
  if (ZSTD_isError(left)) {
    return absl::InvalidArgumentError(
        absl::StrCat("zstd data is corrupt: ", ZSTD_getErrorName(left)));
  }
  const size_t n = dst.pos;
  out->resize(n);
  if (n > uncompressed_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "zstd data inflates to more than the %u bytes the chunk declares",
        uncompressed_size));
  }
  if (left != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "zstd data ends in the middle of a frame (%d bytes inflated, the "
        "chunk declares %u)",
        n, uncompressed_size));
  }
  if (n != uncompressed_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "zstd data inflates to %d bytes but the chunk declares %u", n,
        uncompressed_size));
  }
  return absl::OkStatus();
}

}  // namespace tether::log
