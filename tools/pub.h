// tools: `tether pub` as a library — publishes a JSON message on a channel,
// encoded with the schema the channel carries.
#ifndef TETHER_TOOLS_PUB_H_
#define TETHER_TOOLS_PUB_H_

#include <cstdint>
#include <ostream>
#include <string>

#include "shm/channel.h"
#include "tools/arg_parser.h"
#include "tools/channel_tool.h"

namespace tether::tools {

struct PubOptions {
  shm::ChannelOptions channels;
  std::string channel;
  std::string json;
  double rate_hz = 0;  // 0: publish `count` messages back to back
  uint64_t count = 1;  // 0: until stopped (only with a rate)
  StopFn stop;
};

// Publishes; errors (bad JSON naming the problem, unknown channel listing
// the existing ones, no free publisher entry) go to `err`. Prints
// "published N messages on CHANNEL" to `out`. Returns an exit code.
int RunPub(const PubOptions& options, std::ostream& out, std::ostream& err);

ArgParser PubParser();
int RunPubCommand(const ParsedArgs& args, std::ostream& out,
                  std::ostream& err);

}  // namespace tether::tools

#endif  // TETHER_TOOLS_PUB_H_
