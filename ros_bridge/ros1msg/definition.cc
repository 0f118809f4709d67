#include "ros_bridge/ros1msg/definition.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace tether::ros1msg {
namespace {

struct PrimitiveEntry {
  const char* name;
  Primitive type;
};
constexpr PrimitiveEntry kPrimitives[] = {
    {"bool", Primitive::kBool},       {"int8", Primitive::kInt8},
    {"byte", Primitive::kInt8},       {"uint8", Primitive::kUInt8},
    {"char", Primitive::kUInt8},      {"int16", Primitive::kInt16},
    {"uint16", Primitive::kUInt16},   {"int32", Primitive::kInt32},
    {"uint32", Primitive::kUInt32},   {"int64", Primitive::kInt64},
    {"uint64", Primitive::kUInt64},   {"float32", Primitive::kFloat32},
    {"float64", Primitive::kFloat64}, {"string", Primitive::kString},
    {"time", Primitive::kTime},       {"duration", Primitive::kDuration},
};

bool LookupPrimitive(absl::string_view name, Primitive* out) {
  for (const PrimitiveEntry& e : kPrimitives) {
    if (name == e.name) {
      *out = e.type;
      return true;
    }
  }
  return false;
}

bool IsSeparator(absl::string_view line) {
  if (line.size() < 3) return false;
  for (char c : line) {
    if (c != '=') return false;
  }
  return true;
}

bool ValidName(absl::string_view name) {
  if (name.empty()) return false;
  if (!absl::ascii_isalpha(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_') {
      return false;
    }
  }
  return true;
}

std::string PackageOf(absl::string_view full_name) {
  const size_t slash = full_name.find('/');
  return slash == absl::string_view::npos
             ? std::string()
             : std::string(full_name.substr(0, slash));
}

// "Header" -> std_msgs/Header; "Point" in package p -> p/Point.
std::string ResolveType(absl::string_view type, absl::string_view package) {
  if (type.find('/') != absl::string_view::npos) return std::string(type);
  if (type == "Header") return "std_msgs/Header";
  return absl::StrCat(package, "/", type);
}

struct Section {
  std::string full_name;
  std::vector<std::pair<int, std::string>> lines;  // (line number, text)
};

}  // namespace

const char* PrimitiveName(Primitive p) {
  switch (p) {
    case Primitive::kBool: return "bool";
    case Primitive::kInt8: return "int8";
    case Primitive::kUInt8: return "uint8";
    case Primitive::kInt16: return "int16";
    case Primitive::kUInt16: return "uint16";
    case Primitive::kInt32: return "int32";
    case Primitive::kUInt32: return "uint32";
    case Primitive::kInt64: return "int64";
    case Primitive::kUInt64: return "uint64";
    case Primitive::kFloat32: return "float32";
    case Primitive::kFloat64: return "float64";
    case Primitive::kString: return "string";
    case Primitive::kTime: return "time";
    case Primitive::kDuration: return "duration";
    case Primitive::kMessage: return "message";
  }
  return "?";
}

size_t PrimitiveSize(Primitive p) {
  switch (p) {
    case Primitive::kBool:
    case Primitive::kInt8:
    case Primitive::kUInt8: return 1;
    case Primitive::kInt16:
    case Primitive::kUInt16: return 2;
    case Primitive::kInt32:
    case Primitive::kUInt32:
    case Primitive::kFloat32: return 4;
    case Primitive::kInt64:
    case Primitive::kUInt64:
    case Primitive::kFloat64:
    case Primitive::kTime:
    case Primitive::kDuration: return 8;
    case Primitive::kString:
    case Primitive::kMessage: return 0;
  }
  return 0;
}

absl::StatusOr<std::unique_ptr<MessageDefinition>> MessageDefinition::Parse(
    absl::string_view type, absl::string_view text) {
  if (type.find('/') == absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "message type \"", type, "\" is not of the form package/Name"));
  }
  // Split into sections: the root, then one per "MSG: pkg/Name".
  std::vector<Section> sections(1);
  sections[0].full_name = std::string(type);
  bool expect_msg_line = false;
  int line_number = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++line_number;
    absl::string_view line = absl::StripAsciiWhitespace(raw);
    if (IsSeparator(line)) {
      expect_msg_line = true;
      continue;
    }
    if (expect_msg_line) {
      if (line.empty()) continue;
      if (!absl::ConsumePrefix(&line, "MSG:")) {
        return absl::InvalidArgumentError(absl::StrCat(
            "definition of ", type, ", line ", line_number,
            ": expected \"MSG: package/Name\" after a line of '=', got \"",
            line, "\""));
      }
      Section s;
      s.full_name = std::string(absl::StripAsciiWhitespace(line));
      if (s.full_name.find('/') == std::string::npos) {
        return absl::InvalidArgumentError(absl::StrCat(
            "definition of ", type, ", line ", line_number, ": \"MSG: ",
            s.full_name, "\" is not of the form package/Name"));
      }
      sections.push_back(std::move(s));
      expect_msg_line = false;
      continue;
    }
    sections.back().lines.emplace_back(line_number, std::string(raw));
  }

  std::unique_ptr<MessageDefinition> def(new MessageDefinition());
  for (const Section& s : sections) {
    auto spec = std::make_unique<MessageSpec>();
    spec->full_name = s.full_name;
    const std::string package = PackageOf(s.full_name);
    for (const auto& [number, raw] : s.lines) {
      auto bad = [&, number = number](absl::string_view why) {
        return absl::InvalidArgumentError(
            absl::StrCat("definition of ", type, ", line ", number, " (in ",
                         s.full_name, "): ", why));
      };
      absl::string_view line = absl::StripAsciiWhitespace(raw);
      // A string constant keeps '#' in its value; anything else drops the
      // comment first.
      const size_t eq = line.find('=');
      const size_t hash = line.find('#');
      absl::string_view decl = line;
      absl::string_view value;
      const bool is_constant = eq != absl::string_view::npos &&
                               (hash == absl::string_view::npos || eq < hash);
      if (is_constant) {
        decl = absl::StripAsciiWhitespace(line.substr(0, eq));
        value = line.substr(eq + 1);
      } else if (hash != absl::string_view::npos) {
        decl = absl::StripAsciiWhitespace(line.substr(0, hash));
      }
      if (decl.empty()) continue;
      std::vector<absl::string_view> parts =
          absl::StrSplit(decl, absl::ByAnyChar(" \t"), absl::SkipEmpty());
      if (parts.size() != 2) {
        return bad(absl::StrCat("expected \"type name\", got \"", decl, "\""));
      }
      absl::string_view type_text = parts[0];
      const absl::string_view name = parts[1];
      if (!ValidName(name)) {
        return bad(absl::StrCat("\"", name, "\" is not a valid field name"));
      }
      if (is_constant) {
        Constant c;
        c.name = std::string(name);
        if (!LookupPrimitive(type_text, &c.type) ||
            c.type == Primitive::kTime || c.type == Primitive::kDuration) {
          return bad(absl::StrCat("constant ", name, " has type ", type_text,
                                  "; constants must be numbers, bool or "
                                  "string"));
        }
        c.value = std::string(c.type == Primitive::kString
                                  ? absl::StripAsciiWhitespace(value)
                                  : absl::StripAsciiWhitespace(
                                        value.substr(0, value.find('#'))));
        spec->constants.push_back(std::move(c));
        continue;
      }
      Field f;
      f.name = std::string(name);
      f.type_text = std::string(type_text);
      const size_t bracket = type_text.find('[');
      if (bracket != absl::string_view::npos) {
        if (type_text.back() != ']') {
          return bad(absl::StrCat("malformed array type \"", type_text, "\""));
        }
        f.is_array = true;
        absl::string_view len =
            type_text.substr(bracket + 1, type_text.size() - bracket - 2);
        if (!len.empty()) {
          uint32_t n = 0;
          if (!absl::SimpleAtoi(len, &n)) {
            return bad(absl::StrCat("array length \"", len,
                                    "\" is not a number"));
          }
          f.array_length = n;
        }
        type_text = type_text.substr(0, bracket);
      }
      if (!LookupPrimitive(type_text, &f.type)) {
        f.type = Primitive::kMessage;
        // The resolved name is kept in type_text until linking below.
        f.type_text = ResolveType(type_text, package) +
                      (f.is_array ? f.type_text.substr(bracket) : "");
      }
      spec->fields.push_back(std::move(f));
    }
    if (def->specs_.count(spec->full_name) > 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "definition of ", type, ": ", spec->full_name, " is defined twice"));
    }
    def->specs_.emplace(spec->full_name, std::move(spec));
  }
  // Link nested types.
  for (auto& [name, spec] : def->specs_) {
    for (Field& f : spec->fields) {
      if (f.type != Primitive::kMessage) continue;
      absl::string_view nested = f.type_text;
      nested = nested.substr(0, nested.find('['));
      const MessageSpec* m = def->Find(nested);
      if (m == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            "definition of ", type, ": field ", name, ".", f.name,
            " has type ", nested, ", which the definition does not include "
            "(a full definition lists every type it uses after \"MSG: ...\")"));
      }
      f.message = m;
    }
  }
  def->root_ = def->Find(type);
  // A type that (indirectly) contains itself cannot be serialized: find
  // cycles with a depth-first walk (0 = unseen, 1 = on the path, 2 = done).
  std::map<const MessageSpec*, int> state;
  std::vector<std::pair<const MessageSpec*, size_t>> path = {{def->root_, 0}};
  state[def->root_] = 1;
  while (!path.empty()) {
    auto& [spec, next] = path.back();
    if (next == spec->fields.size()) {
      state[spec] = 2;
      path.pop_back();
      continue;
    }
    const MessageSpec* child = spec->fields[next++].message;
    if (child == nullptr || state[child] == 2) continue;
    if (state[child] == 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "definition of ", type, ": ", child->full_name,
          " contains itself; such a message cannot be serialized"));
    }
    state[child] = 1;
    path.emplace_back(child, 0);
  }
  return def;
}

const MessageSpec* MessageDefinition::Find(absl::string_view full_name) const {
  auto it = specs_.find(full_name);
  return it == specs_.end() ? nullptr : it->second.get();
}

}  // namespace tether::ros1msg
