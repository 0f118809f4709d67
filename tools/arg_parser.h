// tools: a small argument parser for one `tether` subcommand: boolean flags
// (--json), options with a value (--out FILE, --out=FILE) and positionals.
#ifndef TETHER_TOOLS_ARG_PARSER_H_
#define TETHER_TOOLS_ARG_PARSER_H_

#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace tether::tools {

// What Parse() found. Asking for a name that the parser never declared is a
// programming error and aborts with a message. Read-only: any thread; the
// accessors do not allocate; not meant for RT code.
class ParsedArgs {
 public:
  // True when --help or -h appeared (before any "--"); nothing else is
  // validated then, so `tether cmd --bogus --help` still shows help.
  bool help_requested() const { return help_requested_; }

  // The boolean flag --name was given.
  bool Flag(std::string_view name) const;
  // The value of option --name, or its declared default.
  const std::string& Option(std::string_view name) const;
  // Option --name was given explicitly (even if equal to the default).
  bool HasOption(std::string_view name) const;
  // The positional declared as `name`, or "" for an absent optional one.
  const std::string& Positional(std::string_view name) const;
  // The words collected by AddPositionalList(name) (maybe none).
  const std::vector<std::string>& PositionalList(std::string_view name) const;

 private:
  friend class ArgParser;
  bool help_requested_ = false;
  std::map<std::string, bool, std::less<>> flags_;
  std::map<std::string, std::string, std::less<>> options_;
  std::map<std::string, bool, std::less<>> options_given_;
  std::map<std::string, std::string, std::less<>> positionals_;
  std::map<std::string, std::vector<std::string>, std::less<>>
      positional_lists_;
};

// Declares a command's arguments, parses them and renders its --help.
// Not thread-safe; build and use on one thread. Not RT-safe: allocates.
class ArgParser {
 public:
  // `command` is how help names the command, e.g. "tether doctor";
  // `description` is the paragraph under the usage line.
  ArgParser(std::string command, std::string description);

  // Declares a boolean flag --name. Names are lowercase words joined by '-'.
  void AddFlag(std::string name, std::string help);
  // Declares an option --name VALUE (also --name=VALUE).
  void AddOption(std::string name, std::string value_name, std::string help,
                 std::string default_value = "");
  // Declares the next positional argument. Optional ones must come last.
  void AddPositional(std::string name, std::string help, bool required = true);
  // Declares that the words after the positionals go to a list (zero or
  // more, or at least one if `required`), e.g. FIELD... or /a:=/b...
  // At most one, after every AddPositional().
  void AddPositionalList(std::string name, std::string help,
                         bool required = false);

  // Parses `args` (the words after the command name). "--" ends options.
  // InvalidArgument names the bad word and points at --help.
  absl::StatusOr<ParsedArgs> Parse(std::span<const std::string> args) const;

  // The command's help: usage line, description, positionals and options.
  std::string Help() const;

 private:
  struct Spec {
    std::string name;
    std::string value_name;  // Empty for a boolean flag.
    std::string help;
    std::string default_value;
  };
  struct PositionalSpec {
    std::string name;
    std::string help;
    bool required;
  };
  const Spec* FindSpec(std::string_view name) const;

  std::string command_;
  std::string description_;
  std::vector<Spec> specs_;
  std::vector<PositionalSpec> positionals_;
  std::optional<PositionalSpec> positional_list_;
};

}  // namespace tether::tools

#endif  // TETHER_TOOLS_ARG_PARSER_H_
