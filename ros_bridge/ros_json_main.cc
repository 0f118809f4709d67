// ros_bridge: main() of the ROS envelope decoder that `tether echo` runs for
// channels of bridged ROS messages (RosEnvelope). The tether CLI may not link
// ros_bridge/, so it starts this binary (found next to itself in Bazel's
// output tree) with a stream socket on stdin and stdout and asks it to turn
// each envelope into JSON (transport/decoder_pipe.h). Needs no ROS
// installed: ros1msg decodes with the definition each envelope carries.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "ros_bridge/ros1msg/envelope.h"
#include "transport/decoder_pipe.h"

namespace {

constexpr char kUsage[] =
    "usage: ros_json   (run by `tether echo`, not by hand)\n"
    "\n"
    "Decodes bridged ROS messages (RosEnvelope, framed as in a tether slot)\n"
    "to one line of JSON each: the ROS message, decoded with the definition\n"
    "its envelope carries, with type, md5sum, topic, callerid, latching,\n"
    "receive time and origin. Reads requests on stdin and answers on stdout\n"
    "as transport/decoder_pipe.h describes; ends when stdin closes\n"
    "(ignores SIGINT: `tether echo` ends it).\n"
    "Use `tether echo CHANNEL` to see a bridged channel.\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) {
    const bool help =
        std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0;
    std::fputs(kUsage, help ? stdout : stderr);
    return help ? 0 : 2;
  }
  if (::isatty(STDIN_FILENO)) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  // A Ctrl-C at the terminal reaches the whole process group: echo stops
  // on it and closes our stdin; until then we answer (else echo would see
  // its decoder die and report a failure where the user only stopped it).
  ::signal(SIGINT, SIG_IGN);
  tether::ros1msg::EnvelopeDecoder decoder;
  const absl::Status served = tether::transport::ServeDecodeRequests(
      STDIN_FILENO, STDOUT_FILENO, [&](std::span<const std::byte> framed) {
        return decoder.ToJson(framed);
      });
  if (!served.ok()) {
    std::fprintf(stderr, "ros_json: %s\n",
                 std::string(served.message()).c_str());
    return 1;
  }
  return 0;
}
