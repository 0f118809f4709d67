#include "tools/cli.h"

#include <algorithm>
#include <sstream>

namespace tether::tools {
namespace {

const Command* Find(std::span<const Command> commands, std::string_view name) {
  for (const Command& command : commands) {
    if (command.name == name) return &command;
  }
  return nullptr;
}

}  // namespace

std::string TopLevelHelp(std::span<const Command> commands) {
  std::ostringstream out;
  out << "usage: tether <command> [args...]\n\n"
         "tether: shared-memory transport for robot control stacks.\n\n"
         "commands:\n";
  size_t width = 0;
  for (const Command& c : commands) width = std::max(width, c.name.size());
  for (const Command& c : commands) {
    out << "  " << c.name << std::string(width - c.name.size() + 2, ' ')
        << c.summary << "\n";
  }
  out << "\nRun `tether <command> --help` for a command's options.\n";
  return out.str();
}

int RunCli(std::span<const Command> commands, std::span<const std::string> args,
           std::ostream& out, std::ostream& err) {
  if (args.empty()) {
    err << TopLevelHelp(commands);
    return kExitUsage;
  }
  const std::string& first = args[0];
  if (first == "--help" || first == "-h" || first == "help") {
    if (first == "help" && args.size() > 1) {
      if (const Command* c = Find(commands, args[1])) {
        out << c->make_parser().Help();
        return kExitOk;
      }
      err << "tether: unknown command '" << args[1] << "'\n\n"
          << TopLevelHelp(commands);
      return kExitUsage;
    }
    out << TopLevelHelp(commands);
    return kExitOk;
  }
  const Command* command = Find(commands, first);
  if (command == nullptr) {
    err << "tether: unknown command '" << first << "'\n\n"
        << TopLevelHelp(commands);
    return kExitUsage;
  }
  const ArgParser parser = command->make_parser();
  absl::StatusOr<ParsedArgs> parsed = parser.Parse(args.subspan(1));
  if (!parsed.ok()) {
    err << "tether " << command->name << ": " << parsed.status().message()
        << "\n";
    return kExitUsage;
  }
  if (parsed->help_requested()) {
    out << parser.Help();
    return kExitOk;
  }
  return command->run(*parsed, out, err);
}

}  // namespace tether::tools
