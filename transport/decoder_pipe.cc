#include "transport/decoder_pipe.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace tether::transport {
namespace {

enum ReplyKind : uint8_t { kJson = 0, kError = 1 };

// All of `bytes`, retrying short writes and EINTR. send() with MSG_NOSIGNAL
// on a socket (a gone peer is EPIPE, not SIGPIPE), write() on anything else.
bool WriteAll(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  bool socket = true;
  while (size > 0) {
    ssize_t n = socket ? ::send(fd, p, size, MSG_NOSIGNAL) : -1;
    if (n < 0 && socket && errno == ENOTSOCK) {
      socket = false;
      continue;
    }
    if (!socket) n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

enum class ReadResult { kOk, kEof, kError, kTimeout };

using Deadline = std::optional<std::chrono::steady_clock::time_point>;

// Exactly `size` bytes by `deadline` (none: wait for ever); kEof if the
// stream ends before the first byte and kError if it ends in the middle.
ReadResult ReadAll(int fd, void* data, size_t size, Deadline deadline) {
  char* p = static_cast<char*>(data);
  size_t got = 0;
  while (got < size) {
    if (deadline.has_value()) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(
          *deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return ReadResult::kTimeout;
      pollfd pfd{.fd = fd, .events = POLLIN, .revents = 0};
      const int r = ::poll(
          &pfd, 1, static_cast<int>(std::min<int64_t>(left.count(), INT_MAX)));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return ReadResult::kError;
      if (r == 0) return ReadResult::kTimeout;
    }
    const ssize_t n = ::read(fd, p + got, size - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ReadResult::kError;
    if (n == 0) return got == 0 ? ReadResult::kEof : ReadResult::kError;
    got += static_cast<size_t>(n);
  }
  return ReadResult::kOk;
}

template <typename T>
void PutLittleEndian(T value, unsigned char* out) {
  for (size_t i = 0; i < sizeof(T); ++i) out[i] = (value >> (8 * i)) & 0xff;
}

template <typename T>
T GetLittleEndian(const unsigned char* in) {
  T value = 0;
  for (size_t i = 0; i < sizeof(T); ++i) value |= T{in[i]} << (8 * i);
  return value;
}

bool WriteReply(int fd, ReplyKind kind, absl::string_view text) {
  if (text.size() > kMaxDecodeReplyBytes) {
    text = text.substr(0, kMaxDecodeReplyBytes);
    if (kind == kJson) {
      kind = kError;
      text = "the message's JSON is larger than a decoder reply may be";
    }
  }
  unsigned char head[5];
  head[0] = kind;
  PutLittleEndian<uint32_t>(static_cast<uint32_t>(text.size()), head + 1);
  return WriteAll(fd, head, sizeof(head)) &&
         WriteAll(fd, text.data(), text.size());
}

}  // namespace

absl::Status WriteDecodeRequest(int fd, std::span<const std::byte> framed) {
  if (framed.size() > kMaxDecodeRequestBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("a message of ", framed.size(),
                     " bytes is larger than a decoder request may be"));
  }
  unsigned char head[8];
  PutLittleEndian<uint64_t>(framed.size(), head);
  if (!WriteAll(fd, head, sizeof(head)) ||
      !WriteAll(fd, framed.data(), framed.size())) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      // The fd's send timeout (SO_SNDTIMEO) ran out: the peer is alive but
      // not reading.
      return absl::DeadlineExceededError(
          "the decoder did not take the message in time (it is not reading "
          "its input)");
    }
    return absl::UnavailableError(
        absl::StrCat("the decoder is gone (", std::strerror(errno), ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadDecodeReply(
    int fd, std::chrono::milliseconds timeout) {
  auto failed = [&](ReadResult r) {
    if (r == ReadResult::kTimeout) {
      return absl::DeadlineExceededError(absl::StrCat(
          "the decoder did not answer in ", timeout.count(), " ms"));
    }
    return absl::UnavailableError(
        r == ReadResult::kEof ? "the decoder closed its end (it exited)"
                              : "the decoder's reply was cut short");
  };
  // One deadline for the whole reply: a decoder that dribbles bytes does
  // not get `timeout` per byte.
  const Deadline deadline = std::chrono::steady_clock::now() + timeout;
  unsigned char head[5];
  if (ReadResult r = ReadAll(fd, head, sizeof(head), deadline);
      r != ReadResult::kOk) {
    return failed(r);
  }
  const uint32_t size = GetLittleEndian<uint32_t>(head + 1);
  if ((head[0] != kJson && head[0] != kError) || size > kMaxDecodeReplyBytes) {
    return absl::UnavailableError(absl::StrCat(
        "the decoder sent a malformed reply (kind ", head[0], ", ", size,
        " bytes)"));
  }
  std::string text(size, '\0');
  if (ReadResult r = ReadAll(fd, text.data(), size, deadline);
      r != ReadResult::kOk) {
    return failed(r == ReadResult::kEof ? ReadResult::kError : r);
  }
  if (head[0] == kError) return absl::InvalidArgumentError(text);
  return text;
}

absl::Status ServeDecodeRequests(
    int in_fd, int out_fd,
    absl::FunctionRef<absl::StatusOr<std::string>(std::span<const std::byte>)>
        decode) {
  constexpr Deadline kForever = std::nullopt;
  std::vector<uint64_t> buffer;  // 8-byte aligned, as Cap'n Proto reads it
  while (true) {
    unsigned char head[8];
    const ReadResult r = ReadAll(in_fd, head, sizeof(head), kForever);
    if (r == ReadResult::kEof) return absl::OkStatus();
    if (r != ReadResult::kOk) {
      return absl::InvalidArgumentError("a request's size was cut short");
    }
    const uint64_t size = GetLittleEndian<uint64_t>(head);
    if (size > kMaxDecodeRequestBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a request of ", size, " bytes is larger than one may be (",
          kMaxDecodeRequestBytes, ")"));
    }
    buffer.assign((size + 7) / 8, 0);
    if (size > 0 &&
        ReadAll(in_fd, buffer.data(), size, kForever) != ReadResult::kOk) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a request of ", size, " bytes was cut short"));
    }
    absl::StatusOr<std::string> json =
        decode({reinterpret_cast<const std::byte*>(buffer.data()), size});
    const bool written =
        json.ok() ? WriteReply(out_fd, kJson, *json)
                  : WriteReply(out_fd, kError, json.status().message());
    if (!written) {
      return absl::UnavailableError(absl::StrCat(
          "cannot write a reply (", std::strerror(errno), ")"));
    }
  }
}

}  // namespace tether::transport
