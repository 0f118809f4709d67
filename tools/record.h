// tools: `tether record` — records a running stack's channels into an MCAP
// log (log/logger.h) with a live status line, until Ctrl-C/SIGTERM or
// --duration. Also usable as a node in a stack config (the launcher's
// TETHER_ROOT / TETHER_INSTANCE are used when --root / --instance are not
// given, and its SIGTERM finishes the file cleanly).
#ifndef TETHER_TOOLS_RECORD_H_
#define TETHER_TOOLS_RECORD_H_

#include <ostream>

#include "tools/arg_parser.h"

namespace tether::tools {

ArgParser RecordParser();
int RunRecordCommand(const ParsedArgs& args, std::ostream& out,
                     std::ostream& err);

}  // namespace tether::tools

#endif  // TETHER_TOOLS_RECORD_H_
