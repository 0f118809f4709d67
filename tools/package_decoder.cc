#include "tools/package_decoder.h"

#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "tools/package_binary.h"
#include "transport/decoder_pipe.h"

extern char** environ;

namespace tether::tools {
namespace {

// RosEnvelope's id (ros_bridge/ros1msg/envelope.capnp). The CLI may not
// link ros1msg to ask it; tests/ros_bridge/ros1msg/envelope_test.cc looks
// EnvelopeTypeId() up in this table, and the echo test
// (tests/ros_bridge/ros_echo_test.cc) that echo decodes through it.
constexpr uint64_t kRosEnvelopeTypeId = 0x99f0e31ed20732b9;

constexpr std::chrono::milliseconds kReplyTimeout{10000};

}  // namespace

const PackageDecoder* PackageDecoderFor(uint64_t type_id) {
  static constexpr PackageDecoder kDecoders[] = {
      {kRosEnvelopeTypeId, "RosEnvelope (bridged ROS messages)",
       "ros_bridge/ros_json", "//ros_bridge:ros_json"},
  };
  for (const PackageDecoder& d : kDecoders) {
    if (d.type_id == type_id) return &d;
  }
  return nullptr;
}

absl::StatusOr<std::unique_ptr<DecoderProcess>> DecoderProcess::Start(
    const PackageDecoder& decoder) {
  const std::string path = PackageBinaryPath(decoder.path);
  if (path.empty() || ::access(path.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "its messages are ", std::string(decoder.type_name), ", decoded by ",
        path.empty() ? std::string(decoder.path) : path,
        ", which is not built: run it as ./tether echo (which builds it) or "
        "bazel build ",
        std::string(decoder.target)));
  }
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return absl::InternalError(
        absl::StrCat("socketpair: ", std::strerror(errno)));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  // dup2 clears close-on-exec on the copies; the originals close at exec.
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  std::string arg0 = path;
  char* argv[] = {arg0.data(), nullptr};
  pid_t pid = -1;
  const int rc =
      ::posix_spawn(&pid, path.c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  // A decoder that stops reading must not block echo for ever: a write
  // gives up after as long as a reply may take.
  const timeval send_timeout{
      .tv_sec = static_cast<time_t>(kReplyTimeout.count() / 1000),
      .tv_usec = 0};
  (void)::setsockopt(fds[0], SOL_SOCKET, SO_SNDTIMEO, &send_timeout,
                     sizeof(send_timeout));
  if (rc != 0) {
    ::close(fds[0]);
    return absl::InternalError(
        absl::StrCat("cannot run ", path, ": ", std::strerror(rc)));
  }
  return std::unique_ptr<DecoderProcess>(
      new DecoderProcess(decoder, path, pid, fds[0]));
}

DecoderProcess::~DecoderProcess() {
  ::close(fd_);
  if (reaped_) return;
  for (int i = 0; i < 100; ++i) {
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
}

std::string DecoderProcess::ChildState() {
  if (!reaped_) {
    int status = 0;
    // A child that closed its socket is ending: give it a moment.
    for (int i = 0; i < 50 && !reaped_; ++i) {
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped_ = true;
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    if (!reaped_) return "is still running";
    if (WIFSIGNALED(status)) {
      return absl::StrCat("was killed by signal ", WTERMSIG(status), " (",
                          strsignal(WTERMSIG(status)), ")");
    }
    return absl::StrCat("exited with status ", WEXITSTATUS(status));
  }
  return "has ended";
}

absl::StatusOr<std::string> DecoderProcess::Decode(
    std::span<const std::byte> framed) {
  if (!failed_.ok()) return failed_;
  absl::Status sent = transport::WriteDecodeRequest(fd_, framed);
  absl::StatusOr<std::string> reply =
      sent.ok() ? transport::ReadDecodeReply(fd_, kReplyTimeout) : sent;
  if (reply.ok() || absl::IsInvalidArgument(reply.status())) return reply;
  failed_ = absl::Status(
      reply.status().code(),
      absl::StrCat("the decoder of ", std::string(decoder_.type_name), " (", path_,
                   ") failed: ", reply.status().message(), "; it ",
                   ChildState()));
  return failed_;
}

}  // namespace tether::tools
