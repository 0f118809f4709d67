// tools: the `tether` command's subcommand table and dispatch
// (`tether <command> [args]`, `tether --help`, `tether <command> --help`).
#ifndef TETHER_TOOLS_CLI_H_
#define TETHER_TOOLS_CLI_H_

#include <ostream>
#include <span>
#include <string>
#include <string_view>

#include "tools/arg_parser.h"

namespace tether::tools {

// Process exit codes of every command.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // The command ran and found a failure.
inline constexpr int kExitUsage = 2;    // Bad command line.
// Stopped by a signal before it finished its work (128 + SIGINT).
inline constexpr int kExitInterrupted = 130;

// One subcommand. A command is a row in the table main() passes to RunCli();
// new commands add a row and touch nothing else.
struct Command {
  // The word after `tether`, and a one-line summary for `tether --help`.
  std::string_view name;
  std::string_view summary;
  // Builds the command's parser: its description, flags, options and
  // positionals (used for parsing and for `tether <name> --help`).
  ArgParser (*make_parser)();
  // Runs the command with parsed arguments; returns the exit code. Output
  // for people goes to `out`; diagnostics go to `err`.
  int (*run)(const ParsedArgs& args, std::ostream& out, std::ostream& err);
};

// The top-level help: usage and the table's commands with their summaries.
// Any thread; not RT-safe (allocates).
std::string TopLevelHelp(std::span<const Command> commands);

// Dispatches `args` (argv without the program name). `--help`, `-h`, `help`
// and `help <command>` print help to `out` (exit 0); no command prints help
// to `err` (exit 2); an unknown command says so and lists the commands on
// `err` (exit 2); a parse error prints it with a pointer to the command's
// --help (exit 2). Otherwise returns the command's exit code.
// Main thread; not RT-safe; blocks for as long as the command runs.
int RunCli(std::span<const Command> commands, std::span<const std::string> args,
           std::ostream& out, std::ostream& err);

}  // namespace tether::tools

#endif  // TETHER_TOOLS_CLI_H_
