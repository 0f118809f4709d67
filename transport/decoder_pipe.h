// transport: messages decoded to JSON by another process. Some channel types
// need code a tool may not link (bridged ROS envelopes are decoded in
// ros_bridge/, which nothing may depend on); the tool runs that package's
// decoder binary on a stream socket and asks it, message by message. This is
// the one place the exchange is written; both sides use it.
//
// The exchange, strictly one request then its reply:
//   request: u64 little-endian size (<= kMaxDecodeRequestBytes), then the
//            framed message (slot bytes as they are);
//   reply:   u8 kind (0: JSON, 1: error), u32 little-endian size
//            (<= kMaxDecodeReplyBytes), then that many bytes of text: the
//            message as one line of JSON without its newline, or why it
//            could not be decoded.
// Not for real-time paths: every call may allocate and blocks on the socket.
#ifndef TETHER_TRANSPORT_DECODER_PIPE_H_
#define TETHER_TRANSPORT_DECODER_PIPE_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "shm/queue_params.h"

namespace tether::transport {

// The largest slot: no message is bigger, so a larger size in a request is
// garbage and is refused before anything is allocated.
inline constexpr uint64_t kMaxDecodeRequestBytes = shm::kMaxSlotSize;
inline constexpr uint32_t kMaxDecodeReplyBytes = 256u << 20;

// Client side. Sends one request on `fd` (SIGPIPE-free on a socket).
// Unavailable if the peer has gone (it exited or crashed). Blocks until the
// bytes are written, or until the fd's SO_SNDTIMEO runs out
// (DeadlineExceeded: the peer is not reading). Any thread, one request at a
// time per fd.
absl::Status WriteDecodeRequest(int fd, std::span<const std::byte> framed);

// Client side. Reads the reply to the last request: the JSON line, or
// InvalidArgument with the decoder's reason (a bad message: the exchange
// goes on). Unavailable if the peer closed the socket or sent a malformed
// reply, DeadlineExceeded if the whole reply did not arrive within
// `timeout` (after either, the exchange is over: the caller stops the
// peer). Blocks up to `timeout` in all.
absl::StatusOr<std::string> ReadDecodeReply(int fd,
                                            std::chrono::milliseconds timeout);

// Decoder side. Answers requests read from `in_fd` on `out_fd` with
// `decode` (an error status becomes an error reply; the exchange goes on)
// until the client closes `in_fd`: then OK. InvalidArgument if a request is
// malformed or cut short, Unavailable if a reply cannot be written; the
// decoder then exits. Blocks; one thread.
absl::Status ServeDecodeRequests(
    int in_fd, int out_fd,
    absl::FunctionRef<absl::StatusOr<std::string>(std::span<const std::byte>)>
        decode);

}  // namespace tether::transport

#endif  // TETHER_TRANSPORT_DECODER_PIPE_H_
