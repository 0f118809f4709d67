// tools: `tether echo` as a library — prints the messages of one channel as
// JSON lines, decoded with the schema the channel carries.
#ifndef TETHER_TOOLS_ECHO_H_
#define TETHER_TOOLS_ECHO_H_

#include <cstdint>
#include <ostream>
#include <string>

#include "shm/channel.h"
#include "tools/arg_parser.h"
#include "tools/channel_tool.h"
#include "transport/raw_endpoints.h"

namespace tether::tools {

struct EchoOptions {
  shm::ChannelOptions channels;
  std::string channel;
  uint64_t count = 0;     // messages to print; 0 = until stopped
  double rate_hz = 0;     // at most this many printed lines/s; 0 = all
  bool context = false;   // wrap each line with the message context
  bool from_oldest = false;
  bool force_unpinned = false;  // as if the channel's pins were exhausted
  StopFn stop;
};

// One output line (no newline). Without `context` the message's JSON as is;
// with it {"queue_index":..,"monotonic_send_ns":..,"realtime_send_ns":..,
// "publisher_pid":..,"latency_us":..,"missed":..,"message":{...}}.
std::string FormatEchoLine(const std::string& message_json,
                           const transport::MessageContext& context,
                           bool with_context);

// Runs until `count` lines are printed or `stop` says so. JSON lines go to
// `out` (flushed per line); losses, notes and the final tally go to `err`.
// Returns a process exit code. Sleeps on the channel's futex between
// messages (no busy wait).
int RunEcho(const EchoOptions& options, std::ostream& out, std::ostream& err);

// The command-line face: parser and runner for the `tether` table.
ArgParser EchoParser();
int RunEchoCommand(const ParsedArgs& args, std::ostream& out,
                   std::ostream& err);

}  // namespace tether::tools

#endif  // TETHER_TOOLS_ECHO_H_
