// tools: `tether replay FILE` — plays a log back into shared memory in real
// time (log/realtime_replay.h) with a progress bar; Space pauses and `s`
// steps when stdin is a terminal.
#ifndef TETHER_TOOLS_REPLAY_H_
#define TETHER_TOOLS_REPLAY_H_

#include <ostream>

#include "tools/arg_parser.h"

namespace tether::tools {

ArgParser ReplayParser();
int RunReplayCommand(const ParsedArgs& args, std::ostream& out,
                     std::ostream& err);

}  // namespace tether::tools

#endif  // TETHER_TOOLS_REPLAY_H_
