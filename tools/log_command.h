// tools: `tether log <command>` — info, cat, check, recover and plot on MCAP
// logs (libraries in log/). A small command table of its own under the
// `log` word of the tether CLI.
#ifndef TETHER_TOOLS_LOG_COMMAND_H_
#define TETHER_TOOLS_LOG_COMMAND_H_

#include <ostream>
#include <span>
#include <string>

#include "tools/arg_parser.h"

namespace tether::tools {

// For `tether help log` / the top-level table: lists the log commands.
ArgParser LogParser();
// Unused by the table (main() hands `log ...` to RunLogCli), kept so the
// row is complete: prints the log commands.
int RunLogCommand(const ParsedArgs& args, std::ostream& out,
                  std::ostream& err);

// `args` are the words after `tether log`. Returns the exit code.
int RunLogCli(std::span<const std::string> args, std::ostream& out,
              std::ostream& err);

}  // namespace tether::tools

#endif  // TETHER_TOOLS_LOG_COMMAND_H_
