// tools: message types whose decoder lives in a package the CLI may not
// depend on (bridged ROS envelopes: ros_bridge/). `tether echo` recognises
// such a channel by its type id and runs that package's decoder binary
// (found next to this one, as package_binary.h finds commands) as a child on
// a socket, asking it for each message's JSON (transport/decoder_pipe.h).
#ifndef TETHER_TOOLS_PACKAGE_DECODER_H_
#define TETHER_TOOLS_PACKAGE_DECODER_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace tether::tools {

struct PackageDecoder {
  uint64_t type_id;            // the Cap'n Proto type id of the channel
  std::string_view type_name;  // for messages: "RosEnvelope (bridged ROS)"
  std::string_view path;       // under bazel-bin: "ros_bridge/ros_json"
  std::string_view target;     // to build it: "//ros_bridge:ros_json"
};

// The decoder for channels of `type_id`, or nullptr when the CLI decodes
// them itself (with the schema the channel carries). Any thread.
const PackageDecoder* PackageDecoderFor(uint64_t type_id);

// One running decoder child. Not copyable; one thread at a time.
class DecoderProcess {
 public:
  // Starts `decoder`'s binary with a socket as its stdin and stdout (its
  // stderr is ours). FailedPrecondition saying what to build if the binary
  // is missing; Internal if it cannot be started. Setup; allocates.
  static absl::StatusOr<std::unique_ptr<DecoderProcess>> Start(
      const PackageDecoder& decoder);

  // Closes the socket (the child ends on EOF) and reaps the child, killing
  // it (by pid) if it has not ended within a second.
  ~DecoderProcess();
  DecoderProcess(const DecoderProcess&) = delete;
  DecoderProcess& operator=(const DecoderProcess&) = delete;

  // `framed` (slot bytes) as one line of JSON. InvalidArgument with the
  // decoder's reason for a message it cannot decode (the decoder goes on).
  // Unavailable or DeadlineExceeded (no answer in 10 s) if the decoder has
  // failed: the message says so and how it ended; every later call fails
  // the same way. Blocks on the child; allocates.
  absl::StatusOr<std::string> Decode(std::span<const std::byte> framed);

 private:
  DecoderProcess(const PackageDecoder& decoder, std::string path, pid_t pid,
                 int fd)
      : decoder_(decoder), path_(std::move(path)), pid_(pid), fd_(fd) {}

  // How the child ended ("exited with status 3", "was killed by signal 11
  // (...)", "is still running"),
  // reaping it if it has ended.
  std::string ChildState();

  const PackageDecoder& decoder_;
  const std::string path_;
  pid_t pid_;
  bool reaped_ = false;
  int fd_;
  absl::Status failed_;  // sticky once the exchange is over
};

}  // namespace tether::tools

#endif  // TETHER_TOOLS_PACKAGE_DECODER_H_
