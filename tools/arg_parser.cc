#include "tools/arg_parser.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "absl/status/status.h"

namespace tether::tools {
namespace {

[[noreturn]] void Misuse(std::string_view what, std::string_view name) {
  std::fprintf(stderr, "tether: internal error: %.*s '%.*s'\n",
               static_cast<int>(what.size()), what.data(),
               static_cast<int>(name.size()), name.data());
  std::abort();
}

template <typename Map>
const auto& Lookup(const Map& map, std::string_view name,
                   std::string_view what) {
  auto it = map.find(name);
  if (it == map.end()) Misuse(what, name);
  return it->second;
}

bool ValidName(std::string_view name) {
  if (name.empty() || name.front() == '-') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}

}  // namespace

bool ParsedArgs::Flag(std::string_view name) const {
  return Lookup(flags_, name, "undeclared flag");
}

const std::string& ParsedArgs::Option(std::string_view name) const {
  return Lookup(options_, name, "undeclared option");
}

bool ParsedArgs::HasOption(std::string_view name) const {
  return Lookup(options_given_, name, "undeclared option");
}

const std::string& ParsedArgs::Positional(std::string_view name) const {
  return Lookup(positionals_, name, "undeclared positional");
}

const std::vector<std::string>& ParsedArgs::PositionalList(
    std::string_view name) const {
  return Lookup(positional_lists_, name, "undeclared positional list");
}

ArgParser::ArgParser(std::string command, std::string description)
    : command_(std::move(command)), description_(std::move(description)) {}

const ArgParser::Spec* ArgParser::FindSpec(std::string_view name) const {
  for (const Spec& spec : specs_) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

void ArgParser::AddFlag(std::string name, std::string help) {
  if (!ValidName(name) || name == "help" || FindSpec(name) != nullptr) {
    Misuse("bad or duplicate flag name", name);
  }
  specs_.push_back(Spec{std::move(name), "", std::move(help), ""});
}

void ArgParser::AddOption(std::string name, std::string value_name,
                          std::string help, std::string default_value) {
  if (!ValidName(name) || name == "help" || FindSpec(name) != nullptr ||
      value_name.empty()) {
    Misuse("bad or duplicate option name", name);
  }
  specs_.push_back(Spec{std::move(name), std::move(value_name), std::move(help),
                        std::move(default_value)});
}

void ArgParser::AddPositional(std::string name, std::string help,
                              bool required) {
  if (name.empty()) Misuse("empty positional name", name);
  if (required && !positionals_.empty() && !positionals_.back().required) {
    Misuse("required positional after an optional one", name);
  }
  if (positional_list_.has_value()) {
    Misuse("positional after a positional list", name);
  }
  positionals_.push_back(
      PositionalSpec{std::move(name), std::move(help), required});
}

void ArgParser::AddPositionalList(std::string name, std::string help,
                                  bool required) {
  if (name.empty() || positional_list_.has_value()) {
    Misuse("empty or second positional list", name);
  }
  positional_list_ =
      PositionalSpec{std::move(name), std::move(help), required};
}

absl::StatusOr<ParsedArgs> ArgParser::Parse(
    std::span<const std::string> args) const {
  ParsedArgs parsed;
  for (const Spec& spec : specs_) {
    if (spec.value_name.empty()) {
      parsed.flags_[spec.name] = false;
    } else {
      parsed.options_[spec.name] = spec.default_value;
      parsed.options_given_[spec.name] = false;
    }
  }
  for (const PositionalSpec& spec : positionals_) {
    parsed.positionals_[spec.name] = "";
  }
  if (positional_list_.has_value()) {
    parsed.positional_lists_[positional_list_->name] = {};
  }

  // Help wins over every other problem.
  for (const std::string& arg : args) {
    if (arg == "--") break;
    if (arg == "--help" || arg == "-h") {
      parsed.help_requested_ = true;
      return parsed;
    }
  }

  const std::string see_help = "; see `" + command_ + " --help`";
  std::vector<std::string> words;
  bool options_done = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (options_done || arg == "-" || arg.size() < 2 || arg[0] != '-') {
      words.push_back(arg);
      continue;
    }
    if (arg == "--") {
      options_done = true;
      continue;
    }
    if (arg[1] != '-') {
      return absl::InvalidArgumentError("unknown option '" + arg + "' for " +
                                        command_ + see_help);
    }
    const size_t eq = arg.find('=');
    const std::string name =
        arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    const Spec* spec = FindSpec(name);
    if (spec == nullptr) {
      return absl::InvalidArgumentError("unknown option '--" + name + "' for " +
                                        command_ + see_help);
    }
    if (spec->value_name.empty()) {
      if (eq != std::string::npos) {
        return absl::InvalidArgumentError("flag '--" + name +
                                          "' takes no value" + see_help);
      }
      parsed.flags_[name] = true;
      continue;
    }
    std::string value;
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return absl::InvalidArgumentError("option '--" + name + "' needs a " +
                                        spec->value_name + see_help);
    }
    parsed.options_[name] = std::move(value);
    parsed.options_given_[name] = true;
  }

  if (positional_list_.has_value()) {
    if (words.size() > positionals_.size()) {
      parsed.positional_lists_[positional_list_->name].assign(
          words.begin() + positionals_.size(), words.end());
      words.resize(positionals_.size());
    } else if (positional_list_->required &&
               words.size() == positionals_.size()) {
      return absl::InvalidArgumentError("missing argument <" +
                                        positional_list_->name + "...> for " +
                                        command_ + see_help);
    }
  }
  if (words.size() > positionals_.size()) {
    return absl::InvalidArgumentError("unexpected argument '" +
                                      words[positionals_.size()] + "' for " +
                                      command_ + see_help);
  }
  for (size_t i = 0; i < positionals_.size(); ++i) {
    if (i < words.size()) {
      parsed.positionals_[positionals_[i].name] = words[i];
    } else if (positionals_[i].required) {
      return absl::InvalidArgumentError("missing argument <" +
                                        positionals_[i].name + "> for " +
                                        command_ + see_help);
    }
  }
  return parsed;
}

std::string ArgParser::Help() const {
  std::ostringstream out;
  out << "usage: " << command_;
  if (!specs_.empty()) out << " [options]";
  for (const PositionalSpec& p : positionals_) {
    out << (p.required ? " <" : " [<") << p.name << (p.required ? ">" : ">]");
  }
  if (positional_list_.has_value()) {
    out << (positional_list_->required ? " <" : " [<") << positional_list_->name
        << (positional_list_->required ? ">..." : ">...]");
  }
  out << "\n\n" << description_ << "\n";

  // Two aligned columns: the left side of each row, then its help.
  std::vector<std::pair<std::string, std::string>> rows;
  for (const PositionalSpec& p : positionals_) {
    rows.emplace_back("<" + p.name + ">", p.help);
  }
  if (positional_list_.has_value()) {
    rows.emplace_back("<" + positional_list_->name + ">...",
                      positional_list_->help);
  }
  const size_t positional_rows = rows.size();
  for (const Spec& s : specs_) {
    std::string left = "--" + s.name;
    if (!s.value_name.empty()) left += " " + s.value_name;
    std::string help = s.help;
    if (!s.default_value.empty()) help += " (default: " + s.default_value + ")";
    rows.emplace_back(std::move(left), std::move(help));
  }
  rows.emplace_back("-h, --help", "show this help");
  size_t width = 0;
  for (const auto& row : rows) width = std::max(width, row.first.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i == 0 && positional_rows > 0) out << "\narguments:\n";
    if (i == positional_rows) out << "\noptions:\n";
    out << "  " << rows[i].first
        << std::string(width - rows[i].first.size() + 2, ' ') << rows[i].second
        << "\n";
  }
  return out.str();
}

}  // namespace tether::tools
