#include "transport/config.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <system_error>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "capnp/compat/json.h"
#include "capnp/dynamic.h"
#include "capnp/schema.h"
#include "kj/exception.h"
#include "transport/json_locator.h"

namespace tether::transport {
namespace {

namespace fs = std::filesystem;
using capnp::JsonValue;

constexpr size_t kMaxReportedErrors = 25;
// Segment table word + root pointer word: the smallest framed message.
constexpr uint32_t kMinMaxSize = 16;
constexpr int kMaxCpuId = 1023;  // CPU_SETSIZE - 1

std::string Quote(absl::string_view s) { return absl::StrCat("\"", s, "\""); }

absl::string_view View(kj::StringPtr text) {
  return absl::string_view(text.cStr(), text.size());
}

size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      const bool same =
          absl::ascii_tolower(a[i - 1]) == absl::ascii_tolower(b[j - 1]);
      row[j] =
          std::min({row[j] + 1, row[j - 1] + 1, diagonal + (same ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// "; did you mean "x"?" when a candidate is close to `name`, else "".
std::string DidYouMean(absl::string_view name,
                       const std::vector<std::string>& candidates) {
  const std::string* best = nullptr;
  size_t best_distance = std::max<size_t>(2, name.size() / 3) + 1;
  for (const std::string& candidate : candidates) {
    size_t d = EditDistance(name, candidate);
    // A cut-short name ("prio" for "priority") is a near miss too.
    if (name.size() >= 3 && absl::StartsWith(candidate, name)) d = 1;
    if (d < best_distance) {
      best_distance = d;
      best = &candidate;
    }
  }
  return best == nullptr ? ""
                         : absl::StrCat("; did you mean ", Quote(*best), "?");
}

// Up to `limit` names, quoted and comma-separated, "..." if there are more.
std::string ListNames(std::vector<std::string> names, size_t limit = 12) {
  std::sort(names.begin(), names.end());
  std::string out;
  for (size_t i = 0; i < names.size() && i < limit; ++i) {
    absl::StrAppend(&out, i == 0 ? "" : ", ", Quote(names[i]));
  }
  if (names.size() > limit) absl::StrAppend(&out, ", ...");
  if (names.empty()) out = "none";
  return out;
}

// ---------------------------------------------------------------------------
// Queue depth, shared by validation and QueueDepthFor().

struct DepthResult {
  uint32_t depth = 0;
  std::string field;  // the field at fault when error is set
  std::string error;
};

std::string FormatSeconds(double seconds) {
  std::ostringstream out;
  out << seconds;
  return out.str() + " s";
}

DepthResult ResolveQueueDepth(config::Channel::Reader channel) {
  const uint32_t depth = channel.getQueueDepth();
  const double frequency = channel.getFrequencyHz();
  const double history = channel.getHistorySeconds();
  const std::string valid =
      absl::StrCat("a power of two in 2..", shm::kMaxQueueDepth);
  if (!std::isfinite(history) || history < 0) {
    return {0, "historySeconds",
            absl::StrCat(history, " is not valid; use seconds > 0")};
  }
  uint64_t needed = 0;
  if (history > 0) {
    if (!std::isfinite(frequency) || frequency <= 0) {
      return {0, "historySeconds",
              "needs frequencyHz to derive a queue depth; set frequencyHz "
              "(> 0) or give queueDepth instead"};
    }
    const double messages = std::ceil(frequency * history * (1 - 1e-12));
    if (messages > shm::kMaxQueueDepth) {
      return {0, "historySeconds",
              absl::StrCat(FormatSeconds(history), " at ", frequency, " Hz is ",
                           messages, " messages, more than ",
                           shm::kMaxQueueDepth, "; keep less history")};
    }
    needed = static_cast<uint64_t>(messages);
  }
  if (depth == 0) {
    if (history == 0) {
      return {0, "queueDepth",
              absl::StrCat("missing; set queueDepth (", valid,
                           ") or historySeconds (seconds of history at "
                           "frequencyHz)")};
    }
    return {std::bit_ceil(static_cast<uint32_t>(std::max<uint64_t>(needed, 2))),
            "", ""};
  }
  if (depth < 2 || depth > shm::kMaxQueueDepth) {
    return {0, "queueDepth",
            absl::StrCat(depth, " is out of range; use ", valid)};
  }
  if (!std::has_single_bit(depth)) {
    return {0, "queueDepth",
            absl::StrCat(depth, " is not a power of two; use ",
                         std::bit_ceil(depth), " (", valid, ")")};
  }
  if (depth < needed) {
    return {0, "queueDepth",
            absl::StrCat(depth, " messages do not hold historySeconds = ",
                         FormatSeconds(history), " at ", frequency, " Hz (",
                         needed, " messages); use ",
                         std::bit_ceil(static_cast<uint32_t>(needed)),
                         " or omit queueDepth")};
  }
  return {depth, "", ""};
}

// ---------------------------------------------------------------------------
// The loader.

struct Problem {
  int file = -1;     // index into files_, -1: none
  std::string path;  // field path inside the file, "" for the file itself
  std::string message;
};

struct SourceFile {
  std::string name;  // displayed: the top path, or includer dir / include
  internal::JsonLocations locations;
  std::unique_ptr<capnp::MallocMessageBuilder> message;  // a config::Stack

  config::Stack::Reader stack() const {
    return message->getRoot<config::Stack>().asReader();
  }
};

}  // namespace

class StackConfigLoader {
 public:
  explicit StackConfigLoader(const KnownTypes& types) : types_(types) {}

  absl::StatusOr<StackConfig> Load(const fs::path& path) {
    std::string text;
    std::string read_error;
    if (!ReadFile(path, text, read_error)) {
      return absl::NotFoundError(absl::StrCat("cannot read stack config ",
                                              path.string(), ": ", read_error));
    }
    LoadFile(path, text);
    if (errors_.empty()) Validate();
    if (!errors_.empty()) {
      std::vector<std::string> lines;
      for (size_t i = 0; i < errors_.size() && i < kMaxReportedErrors; ++i) {
        lines.push_back(Format(errors_[i]));
      }
      if (errors_.size() > kMaxReportedErrors) {
        lines.push_back(absl::StrCat(
            "... and ", errors_.size() - kMaxReportedErrors, " more errors"));
      }
      return absl::InvalidArgumentError(absl::StrJoin(lines, "\n"));
    }
    for (const Problem& warning : warnings_) {
      result_.warnings_.push_back(Format(warning));
    }
    return std::move(result_);
  }

 private:
  static bool ReadFile(const fs::path& path, std::string& text,
                       std::string& error) {
    std::error_code ec;
    if (fs::is_directory(path, ec)) {
      error = "is a directory";
      return false;
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      error = std::strerror(errno);
      return false;
    }
    std::ostringstream content;
    content << in.rdbuf();
    if (in.bad()) {
      error = std::strerror(errno);
      return false;
    }
    text = content.str();
    return true;
  }

  void Error(int file, std::string path, std::string message) {
    errors_.push_back({file, std::move(path), std::move(message)});
  }
  void Warning(int file, std::string path, std::string message) {
    warnings_.push_back({file, std::move(path), std::move(message)});
  }

  // "file:line: path: message"; the line is that of the path or of its
  // nearest enclosing value present in the file.
  std::string Format(const Problem& p) const {
    if (p.file < 0) return p.message;
    const SourceFile& file = files_[p.file];
    std::string prefix = file.name;
    std::string path = p.path;
    while (true) {
      auto it = file.locations.lines.find(path);
      if (it != file.locations.lines.end()) {
        absl::StrAppend(&prefix, ":", it->second);
        break;
      }
      if (path.empty()) break;
      const size_t cut = path.find_last_of(".[");
      path = cut == std::string::npos ? "" : path.substr(0, cut);
    }
    if (p.path.empty()) return absl::StrCat(prefix, ": ", p.message);
    return absl::StrCat(prefix, ": ", p.path, ": ", p.message);
  }

  // Loads one file (read into `text`) and, recursively, its includes.
  void LoadFile(const fs::path& path, const std::string& text) {
    std::error_code ec;
    fs::path canonical = fs::weakly_canonical(path, ec);
    if (ec) canonical = path.lexically_normal();

    const int index = static_cast<int>(files_.size());
    files_.push_back(SourceFile{});
    SourceFile& file = files_.back();
    file.name = path.lexically_normal().string();
    file_by_canonical_[canonical.string()] = index;

    if (!Parse(index, text)) return;

    chain_.push_back(index);
    auto includes = files_[index].stack().getIncludes();
    for (uint32_t i = 0; i < includes.size(); ++i) {
      const std::string field = absl::StrCat("includes[", i, "]");
      const absl::string_view include = View(includes[i]);
      if (include.empty()) {
        Error(index, field,
              "empty path; name a stack file relative to this one");
        continue;
      }
      const fs::path target = (fs::path(files_[index].name).parent_path() /
                               fs::path(std::string(include)))
                                  .lexically_normal();
      std::error_code target_ec;
      fs::path target_canonical = fs::weakly_canonical(target, target_ec);
      if (target_ec) target_canonical = target;
      auto seen = file_by_canonical_.find(target_canonical.string());
      if (seen != file_by_canonical_.end()) {
        auto in_chain = std::find(chain_.begin(), chain_.end(), seen->second);
        if (in_chain != chain_.end()) {
          std::vector<std::string> cycle;
          for (auto it = in_chain; it != chain_.end(); ++it) {
            cycle.push_back(files_[*it].name);
          }
          cycle.push_back(files_[seen->second].name);
          Error(index, field,
                absl::StrCat("include cycle: ", absl::StrJoin(cycle, " -> "),
                             "; remove one of these includes"));
        }
        // Included before through another path: read once, merged once.
        continue;
      }
      std::string included_text;
      std::string read_error;
      if (!ReadFile(target, included_text, read_error)) {
        Error(index, field,
              absl::StrCat("cannot read ", Quote(include), " (",
                           target.string(), "): ", read_error,
                           "; include paths are relative to this file"));
        continue;
      }
      LoadFile(target, included_text);
    }
    chain_.pop_back();
    // Post-order: included files' channels and nodes come first.
    merge_order_.push_back(index);
  }

  bool Parse(int index, const std::string& text) {
    SourceFile& file = files_[index];
    file.locations = internal::LocateJson(text);
    if (file.locations.error) {
      const internal::JsonSyntaxError& e = *file.locations.error;
      file.locations.lines.clear();
      Error(-1, "",
            absl::StrCat(file.name, ":", e.line, ":", e.column,
                         ": malformed JSON: ", e.message));
      return false;
    }
    capnp::MallocMessageBuilder json_message;
    JsonValue::Builder json = json_message.initRoot<JsonValue>();
    capnp::JsonCodec codec;
    try {
      codec.decodeRaw(kj::ArrayPtr<const char>(text.data(), text.size()), json);
    } catch (const kj::Exception& e) {
      Error(index, "",
            absl::StrCat("malformed JSON: ", e.getDescription().cStr()));
      return false;
    }
    const size_t errors_before = errors_.size();
    CheckStruct(index, json.asReader(), capnp::Schema::from<config::Stack>(),
                "");
    if (errors_.size() != errors_before) return false;
    file.message = std::make_unique<capnp::MallocMessageBuilder>();
    try {
      codec.decode(json.asReader(),
                   capnp::toDynamic(file.message->initRoot<config::Stack>()));
    } catch (const kj::Exception& e) {
      Error(index, "",
            absl::StrCat("cannot decode: ", e.getDescription().cStr()));
      return false;
    }
    return true;
  }

  // ---- Checking JSON against the schema ----------------------------------

  static std::string Kind(JsonValue::Reader value) {
    switch (value.which()) {
      case JsonValue::NULL_:
        return "null";
      case JsonValue::BOOLEAN:
        return value.getBoolean() ? "true" : "false";
      case JsonValue::NUMBER: {
        std::ostringstream out;
        out << value.getNumber();
        return absl::StrCat("the number ", out.str());
      }
      case JsonValue::STRING:
        return absl::StrCat("the string ", Quote(View(value.getString())));
      case JsonValue::ARRAY:
        return "an array";
      case JsonValue::OBJECT:
        return "an object";
      case JsonValue::CALL:
        return "a call";
    }
    return "an unknown value";
  }

  static std::string StructName(capnp::StructSchema schema) {
    return std::string(View(schema.getUnqualifiedName()));
  }

  void CheckStruct(int file, JsonValue::Reader value,
                   capnp::StructSchema schema, const std::string& path) {
    const std::string where = path.empty() ? "the top level" : path;
    if (value.which() != JsonValue::OBJECT) {
      Error(file, path,
            absl::StrCat("expected an object (", StructName(schema), "), got ",
                         Kind(value)));
      return;
    }
    std::vector<std::string> field_names;
    for (capnp::StructSchema::Field field : schema.getFields()) {
      field_names.emplace_back(View(field.getProto().getName()));
    }
    absl::flat_hash_map<std::string, bool> seen;
    for (JsonValue::Field::Reader member : value.getObject()) {
      const std::string name(View(member.getName()));
      const std::string member_path = path.empty() ? name : path + "." + name;
      if (!seen.emplace(name, true).second) {
        Error(file, member_path,
              "given twice; JSON object members must be unique");
        continue;
      }
      KJ_IF_MAYBE (field, schema.findFieldByName(member.getName())) {
        if (field->getProto().isGroup()) {
          CheckStruct(file, member.getValue(), field->getType().asStruct(),
                      member_path);
        } else {
          CheckValue(file, member.getValue(), field->getType(), member_path);
        }
      } else {
        Error(file, member_path,
              absl::StrCat("unknown field", DidYouMean(name, field_names),
                           " (fields of ", StructName(schema), " in ", where,
                           ": ", absl::StrJoin(field_names, ", "), ")"));
      }
    }
  }

  void CheckInteger(int file, JsonValue::Reader value, const std::string& path,
                    double min, double max, bool allow_string) {
    double number = 0;
    if (value.which() == JsonValue::NUMBER) {
      number = value.getNumber();
    } else if (allow_string && value.which() == JsonValue::STRING) {
      // 64-bit integers may be strings (JSON numbers are doubles).
      int64_t s = 0;
      uint64_t u = 0;
      const absl::string_view text = View(value.getString());
      if (absl::SimpleAtoi(text, &s)) {
        number = static_cast<double>(s);
      } else if (absl::SimpleAtoi(text, &u)) {
        number = static_cast<double>(u);
      } else {
        Error(file, path,
              absl::StrCat("expected a whole number, got ", Kind(value)));
        return;
      }
    } else {
      Error(file, path,
            absl::StrCat("expected a whole number, got ", Kind(value)));
      return;
    }
    if (!std::isfinite(number) || std::floor(number) != number) {
      Error(file, path,
            absl::StrCat("expected a whole number, got ", Kind(value)));
      return;
    }
    if (number < min || number > max) {
      std::ostringstream range;
      range.precision(20);
      range << min << ".." << max;
      Error(file, path,
            absl::StrCat(Kind(value), " is out of range; use ", range.str()));
    }
  }

  void CheckValue(int file, JsonValue::Reader value, capnp::Type type,
                  const std::string& path) {
    if (value.which() == JsonValue::NULL_) {
      Error(file, path,
            "null is not a value here; give a value or leave the field out "
            "for its default");
      return;
    }
    switch (type.which()) {
      case capnp::schema::Type::BOOL:
        if (value.which() != JsonValue::BOOLEAN) {
          Error(file, path,
                absl::StrCat("expected true or false, got ", Kind(value)));
        }
        return;
      case capnp::schema::Type::INT8:
        return CheckInteger(file, value, path, -128, 127, false);
      case capnp::schema::Type::INT16:
        return CheckInteger(file, value, path, -32768, 32767, false);
      case capnp::schema::Type::INT32:
        return CheckInteger(file, value, path, -2147483648.0, 2147483647.0,
                            false);
      case capnp::schema::Type::INT64:
        return CheckInteger(file, value, path, -9223372036854775808.0,
                            9223372036854775807.0, true);
      case capnp::schema::Type::UINT8:
        return CheckInteger(file, value, path, 0, 255, false);
      case capnp::schema::Type::UINT16:
        return CheckInteger(file, value, path, 0, 65535, false);
      case capnp::schema::Type::UINT32:
        return CheckInteger(file, value, path, 0, 4294967295.0, false);
      case capnp::schema::Type::UINT64:
        return CheckInteger(file, value, path, 0, 18446744073709551615.0, true);
      case capnp::schema::Type::FLOAT32:
      case capnp::schema::Type::FLOAT64:
        if (value.which() != JsonValue::NUMBER ||
            !std::isfinite(value.getNumber())) {
          Error(file, path,
                absl::StrCat("expected a number, got ", Kind(value)));
        }
        return;
      case capnp::schema::Type::TEXT:
        if (value.which() != JsonValue::STRING) {
          Error(file, path,
                absl::StrCat("expected a string, got ", Kind(value)));
        }
        return;
      case capnp::schema::Type::ENUM: {
        const capnp::EnumSchema schema = type.asEnum();
        std::vector<std::string> names;
        for (capnp::EnumSchema::Enumerant e : schema.getEnumerants()) {
          names.emplace_back(View(e.getProto().getName()));
        }
        if (value.which() != JsonValue::STRING) {
          Error(file, path,
                absl::StrCat("expected one of ", ListNames(names), ", got ",
                             Kind(value)));
          return;
        }
        if (schema.findEnumerantByName(value.getString()) == nullptr) {
          Error(file, path,
                absl::StrCat(Quote(View(value.getString())),
                             " is not valid; use one of ", ListNames(names)));
        }
        return;
      }
      case capnp::schema::Type::LIST: {
        if (value.which() != JsonValue::ARRAY) {
          Error(file, path,
                absl::StrCat("expected an array, got ", Kind(value)));
          return;
        }
        const capnp::Type element = type.asList().getElementType();
        auto array = value.getArray();
        for (uint32_t i = 0; i < array.size(); ++i) {
          CheckValue(file, array[i], element, absl::StrCat(path, "[", i, "]"));
        }
        return;
      }
      case capnp::schema::Type::STRUCT:
        return CheckStruct(file, value, type.asStruct(), path);
      default:
        Error(file, path, "this field type cannot be written in a stack file");
        return;
    }
  }

  // ---- Validating the merged stack ---------------------------------------

  void Validate() {
    // Merge.
    result_.message_ = std::make_unique<capnp::MallocMessageBuilder>();
    auto merged = result_.message_->initRoot<config::Stack>();
    size_t channel_count = 0;
    size_t node_count = 0;
    for (int f : merge_order_) {
      channel_count += files_[f].stack().getChannels().size();
      node_count += files_[f].stack().getNodes().size();
    }
    auto channels = merged.initChannels(channel_count);
    auto nodes = merged.initNodes(node_count);
    size_t c = 0;
    size_t n = 0;
    for (int f : merge_order_) {
      auto stack = files_[f].stack();
      for (uint32_t i = 0; i < stack.getChannels().size(); ++i, ++c) {
        channels.setWithCaveats(c, stack.getChannels()[i]);
        result_.channel_origins_.push_back({files_[f].name, i});
        channel_file_.push_back(f);
      }
      for (uint32_t i = 0; i < stack.getNodes().size(); ++i, ++n) {
        nodes.setWithCaveats(n, stack.getNodes()[i]);
        result_.node_origins_.push_back({files_[f].name, i});
        node_file_.push_back(f);
      }
    }

    absl::flat_hash_map<std::string, size_t> channel_by_name;
    for (size_t i = 0; i < channels.size(); ++i) {
      ValidateChannel(i, channels[i], channel_by_name);
    }
    absl::flat_hash_map<std::string, size_t> node_by_name;
    for (size_t i = 0; i < nodes.size(); ++i) {
      ValidateNode(i, nodes[i].asReader(), node_by_name);
    }
    ValidateGraph(channels.asReader(), nodes.asReader(), channel_by_name,
                  node_by_name);
  }

  std::string ChannelPath(size_t i, absl::string_view field = "") const {
    std::string path =
        absl::StrCat("channels[", result_.channel_origins_[i].index, "]");
    if (!field.empty()) absl::StrAppend(&path, ".", field);
    return path;
  }
  std::string NodePath(size_t i, absl::string_view field = "") const {
    std::string path =
        absl::StrCat("nodes[", result_.node_origins_[i].index, "]");
    if (!field.empty()) absl::StrAppend(&path, ".", field);
    return path;
  }

  static bool IsChannelName(absl::string_view name) {
    if (name.size() < 2 || name[0] != '/' || name.back() == '/') return false;
    size_t part_start = 1;
    for (size_t i = 1; i <= name.size(); ++i) {
      if (i == name.size() || name[i] == '/') {
        const absl::string_view part = name.substr(part_start, i - part_start);
        if (part.empty() || part == "." || part == "..") return false;
        part_start = i + 1;
        continue;
      }
      const char ch = name[i];
      if (!absl::ascii_isalnum(ch) && ch != '_' && ch != '-' && ch != '.') {
        return false;
      }
    }
    return true;
  }

  static bool IsSimpleName(absl::string_view name) {
    if (name.empty()) return false;
    for (char ch : name) {
      if (!absl::ascii_isalnum(ch) && ch != '_' && ch != '-') return false;
    }
    return true;
  }

  std::vector<std::string> KnownTypeNames() const {
    std::vector<std::string> names(types_.names.begin(), types_.names.end());
    return names;
  }

  void ValidateChannel(size_t i, config::Channel::Builder channel,
                       absl::flat_hash_map<std::string, size_t>& by_name) {
    const int file = channel_file_[i];
    const std::string name(View(channel.getName()));
    if (name.empty()) {
      Error(file, ChannelPath(i, "name"),
            "missing; name the channel like \"/robot/joint_state\"");
    } else if (!IsChannelName(name)) {
      Error(file, ChannelPath(i, "name"),
            absl::StrCat(Quote(name),
                         " is not a channel name; use '/'-separated parts of "
                         "letters, digits, '_', '-' and '.', like "
                         "\"/robot/joint_state\""));
    } else {
      auto [it, inserted] = by_name.emplace(name, i);
      if (!inserted) {
        const ConfigOrigin& first = result_.channel_origins_[it->second];
        Error(file, ChannelPath(i, "name"),
              absl::StrCat(Quote(name), " is already declared in ", first.file,
                           " (channels[", first.index,
                           "]); channel names must be unique in the stack and "
                           "its includes"));
      }
    }

    const std::string type(View(channel.getType()));
    if (type.empty()) {
      Error(file, ChannelPath(i, "type"),
            "missing; set the message type, a struct display name like "
            "\"examples/demo.capnp:JointState\" or a type id like "
            "\"0x9eb32e19f86ee174\"");
    } else if (absl::StartsWith(type, "0x")) {
      uint64_t id = 0;
      if (type.size() > 18 || !absl::SimpleHexAtoi(type.substr(2), &id)) {
        Error(file, ChannelPath(i, "type"),
              absl::StrCat(Quote(type),
                           " is not a type id; write 0x and up to 16 hex "
                           "digits, or use the display name"));
      } else if (!types_.ids.contains(id)) {
        Error(file, ChannelPath(i, "type"),
              absl::StrCat("type id ", type,
                           " is not a known message type; use one of the "
                           "registered types (",
                           ListNames(KnownTypeNames()), ")"));
      }
    } else if (!types_.names.contains(type)) {
      Error(file, ChannelPath(i, "type"),
            absl::StrCat(Quote(type), " is not a known message type",
                         DidYouMean(type, KnownTypeNames()),
                         " (known types: ", ListNames(KnownTypeNames()), ")"));
    }

    const uint32_t max_size = channel.getMaxSize();
    const std::string size_range =
        absl::StrCat("use ", kMinMaxSize, "..", shm::kMaxSlotSize,
                     " bytes (the largest framed message: 8-byte segment "
                     "table + message)");
    if (max_size == 0) {
      Error(file, ChannelPath(i, "maxSize"),
            absl::StrCat("missing or 0; ", size_range));
    } else if (max_size < kMinMaxSize) {
      Error(file, ChannelPath(i, "maxSize"),
            absl::StrCat(max_size, " is too small; ", size_range));
    } else if (max_size > shm::kMaxSlotSize) {
      Error(file, ChannelPath(i, "maxSize"),
            absl::StrCat(max_size, " is larger than the 256 MiB limit; ",
                         size_range));
    }

    if (channel.getFrequencyHz() < 0) {
      Error(file, ChannelPath(i, "frequencyHz"),
            absl::StrCat(channel.getFrequencyHz(),
                         " is negative; use the publish rate in Hz, or 0 for "
                         "an aperiodic channel"));
    } else {
      DepthResult depth = ResolveQueueDepth(channel.asReader());
      if (!depth.error.empty()) {
        Error(file, ChannelPath(i, depth.field), depth.error);
      } else {
        channel.setQueueDepth(depth.depth);
      }
    }

    if (channel.getMaxPublishers() == 0 ||
        channel.getMaxPublishers() > shm::kMaxPublishers) {
      Error(file, ChannelPath(i, "maxPublishers"),
            absl::StrCat(channel.getMaxPublishers(),
                         " is out of range; use 1..", shm::kMaxPublishers));
    }
    if (channel.getMaxPinned() > shm::kMaxPinned) {
      Error(file, ChannelPath(i, "maxPinned"),
            absl::StrCat(channel.getMaxPinned(), " is too many; use 0..",
                         shm::kMaxPinned,
                         " (one bit per pinning reader in a slot's pin "
                         "word)"));
    }

    const absl::string_view mode = View(channel.getMode());
    bool octal = (mode.size() == 3 || mode.size() == 4) &&
                 (mode.size() == 3 || mode[0] == '0');
    unsigned mode_bits = 0;
    for (char ch : mode) {
      if (ch < '0' || ch > '7') octal = false;
      mode_bits = mode_bits * 8 + static_cast<unsigned>(ch - '0');
    }
    if (!octal) {
      Error(file, ChannelPath(i, "mode"),
            absl::StrCat(Quote(mode),
                         " is not a file mode; use an octal string of "
                         "permission bits such as \"0660\" or \"0640\""));
    } else if ((mode_bits & 0600) != 0600) {
      Error(file, ChannelPath(i, "mode"),
            absl::StrCat(Quote(mode),
                         " does not let the owner read and write the "
                         "channel; use e.g. \"0660\""));
    }

    const absl::string_view group = View(channel.getGroup());
    if (!group.empty() &&
        (!IsSimpleName(group) || absl::ascii_isdigit(group[0]))) {
      Error(file, ChannelPath(i, "group"),
            absl::StrCat(Quote(group),
                         " is not a group name; use letters, digits, '_' and "
                         "'-', starting with a letter, or leave it out"));
    }
  }

  void ValidateNode(size_t i, config::Node::Reader node,
                    absl::flat_hash_map<std::string, size_t>& by_name) {
    const int file = node_file_[i];
    const std::string name(View(node.getName()));
    if (name.empty()) {
      Error(file, NodePath(i, "name"),
            "missing; name the node, e.g. \"controller\"");
    } else if (!IsSimpleName(name)) {
      Error(file, NodePath(i, "name"),
            absl::StrCat(Quote(name),
                         " is not a node name; use letters, digits, '_' and "
                         "'-'"));
    } else {
      auto [it, inserted] = by_name.emplace(name, i);
      if (!inserted) {
        const ConfigOrigin& first = result_.node_origins_[it->second];
        Error(file, NodePath(i, "name"),
              absl::StrCat(Quote(name), " is already declared in ", first.file,
                           " (nodes[", first.index,
                           "]); node names must be unique in the stack and "
                           "its includes"));
      }
    }

    if (absl::StripAsciiWhitespace(View(node.getCommand())).empty()) {
      Error(file, NodePath(i, "command"),
            "empty; set the program to run, e.g. "
            "\"bazel-bin/examples/controller\"");
    }

    auto scheduling = node.getScheduling();
    const int priority = scheduling.getPriority();
    const int nice = scheduling.getNice();
    if (scheduling.getPolicy() == config::Policy::OTHER) {
      if (priority != 0) {
        Error(file, NodePath(i, "scheduling.priority"),
              absl::StrCat(priority,
                           " needs a real-time policy; use policy \"fifo\" or "
                           "\"rr\" with priority 1..99, or priority 0 (and "
                           "nice) with \"other\""));
      }
      if (nice < -20 || nice > 19) {
        Error(file, NodePath(i, "scheduling.nice"),
              absl::StrCat(nice, " is out of range; use -20..19"));
      }
    } else {
      const char* policy =
          scheduling.getPolicy() == config::Policy::FIFO ? "fifo" : "rr";
      if (priority < 1 || priority > 99) {
        Error(file, NodePath(i, "scheduling.priority"),
              absl::StrCat(priority, " is not a valid ", policy,
                           " priority; use 1..99 (higher runs first)"));
      }
      if (nice != 0) {
        Error(file, NodePath(i, "scheduling.nice"),
              absl::StrCat("nice applies to policy \"other\" only; remove it "
                           "for ",
                           policy));
      }
    }

    auto cpus = node.getCpus();
    for (uint32_t k = 0; k < cpus.size(); ++k) {
      const std::string path = NodePath(i, absl::StrCat("cpus[", k, "]"));
      if (cpus[k] < 0 || cpus[k] > kMaxCpuId) {
        Error(file, path,
              absl::StrCat(cpus[k], " is not a CPU id; use 0..", kMaxCpuId));
        continue;
      }
      for (uint32_t j = 0; j < k; ++j) {
        if (cpus[j] == cpus[k]) {
          Error(file, path,
                absl::StrCat("CPU ", cpus[k], " is listed twice (also cpus[", j,
                             "])"));
          break;
        }
      }
    }

    auto restart = node.getRestart();
    if (restart.getBackoffMs() > restart.getMaxBackoffMs()) {
      Error(file, NodePath(i, "restart.backoffMs"),
            absl::StrCat(restart.getBackoffMs(), " exceeds maxBackoffMs ",
                         restart.getMaxBackoffMs(),
                         "; use a backoff <= maxBackoffMs"));
    }

    auto env = node.getEnv();
    for (uint32_t k = 0; k < env.size(); ++k) {
      const absl::string_view var = View(env[k].getName());
      const std::string path = NodePath(i, absl::StrCat("env[", k, "].name"));
      if (var.empty() || var.find('=') != absl::string_view::npos ||
          var.find('\0') != absl::string_view::npos) {
        Error(file, path,
              absl::StrCat(Quote(var),
                           " is not an environment variable name; use a "
                           "non-empty name without '='"));
        continue;
      }
      for (uint32_t j = 0; j < k; ++j) {
        if (View(env[j].getName()) == var) {
          Error(file, path,
                absl::StrCat(Quote(var), " is set twice (also env[", j, "])"));
          break;
        }
      }
    }

    for (const auto& [field, list] : {std::pair{"reads", node.getReads()},
                                      std::pair{"writes", node.getWrites()}}) {
      for (uint32_t k = 0; k < list.size(); ++k) {
        for (uint32_t j = 0; j < k; ++j) {
          if (list[j] == list[k]) {
            Error(file, NodePath(i, absl::StrCat(field, "[", k, "]")),
                  absl::StrCat(Quote(View(list[k])), " is listed twice (also ",
                               field, "[", j, "])"));
            break;
          }
        }
      }
    }
  }

  void ValidateGraph(
      capnp::List<config::Channel>::Reader channels,
      capnp::List<config::Node>::Reader nodes,
      const absl::flat_hash_map<std::string, size_t>& channel_by_name,
      const absl::flat_hash_map<std::string, size_t>& node_by_name) {
    std::vector<std::string> channel_names;
    for (const auto& [name, index] : channel_by_name)
      channel_names.push_back(name);
    std::vector<std::string> node_names;
    for (const auto& [name, index] : node_by_name) node_names.push_back(name);

    // Channel references.
    std::vector<std::vector<std::string>> writers(channels.size());
    for (size_t i = 0; i < nodes.size(); ++i) {
      auto writes = nodes[i].getWrites();
      for (uint32_t k = 0; k < writes.size(); ++k) {
        auto it = channel_by_name.find(View(writes[k]));
        if (it == channel_by_name.end()) {
          UnknownChannel(i, "writes", k, View(writes[k]), channel_names);
          continue;
        }
        auto& list = writers[it->second];
        const std::string writer(View(nodes[i].getName()));
        if (std::find(list.begin(), list.end(), writer) == list.end()) {
          list.push_back(writer);
        }
      }
    }
    for (size_t i = 0; i < nodes.size(); ++i) {
      auto reads = nodes[i].getReads();
      for (uint32_t k = 0; k < reads.size(); ++k) {
        auto it = channel_by_name.find(View(reads[k]));
        if (it == channel_by_name.end()) {
          UnknownChannel(i, "reads", k, View(reads[k]), channel_names);
        } else if (writers[it->second].empty()) {
          Warning(node_file_[i], NodePath(i, absl::StrCat("reads[", k, "]")),
                  absl::StrCat("no node writes ", Quote(View(reads[k])),
                               "; this node receives nothing unless a tool "
                               "or bridge publishes it"));
        }
      }
    }
    for (size_t c = 0; c < channels.size(); ++c) {
      const uint32_t max_publishers = channels[c].getMaxPublishers();
      if (max_publishers != 0 && writers[c].size() > max_publishers) {
        Error(channel_file_[c], ChannelPath(c, "maxPublishers"),
              absl::StrCat(max_publishers, " is fewer than the ",
                           writers[c].size(), " nodes that write ",
                           Quote(View(channels[c].getName())), " (",
                           absl::StrJoin(writers[c], ", "), "); use at least ",
                           writers[c].size()));
      }
    }

    // startAfter: names, then cycles.
    std::vector<std::vector<std::pair<size_t, uint32_t>>> edges(nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i) {
      auto after = nodes[i].getStartAfter();
      for (uint32_t k = 0; k < after.size(); ++k) {
        const absl::string_view target = View(after[k]);
        const std::string path =
            NodePath(i, absl::StrCat("startAfter[", k, "]"));
        auto it = node_by_name.find(target);
        if (it == node_by_name.end()) {
          Error(node_file_[i], path,
                absl::StrCat("no node named ", Quote(target),
                             DidYouMean(target, node_names),
                             " (nodes: ", ListNames(node_names), ")"));
        } else if (it->second == i) {
          Error(node_file_[i], path,
                "a node cannot start after itself; remove this entry");
        } else {
          edges[i].push_back({it->second, k});
        }
      }
    }
    // Iterative DFS; each cycle is reported once, at the edge closing it.
    enum class Mark { kNew, kActive, kDone };
    std::vector<Mark> mark(nodes.size(), Mark::kNew);
    for (size_t root = 0; root < nodes.size(); ++root) {
      if (mark[root] != Mark::kNew) continue;
      std::vector<std::pair<size_t, size_t>> stack{{root, 0}};
      mark[root] = Mark::kActive;
      while (!stack.empty()) {
        auto& [node, next] = stack.back();
        if (next == edges[node].size()) {
          mark[node] = Mark::kDone;
          stack.pop_back();
          continue;
        }
        const auto [target, k] = edges[node][next++];
        if (mark[target] == Mark::kNew) {
          mark[target] = Mark::kActive;
          stack.push_back({target, 0});
        } else if (mark[target] == Mark::kActive) {
          std::vector<std::string> cycle;
          bool in_cycle = false;
          for (const auto& frame : stack) {
            if (frame.first == target) in_cycle = true;
            if (in_cycle)
              cycle.emplace_back(View(nodes[frame.first].getName()));
          }
          cycle.emplace_back(View(nodes[target].getName()));
          const size_t from = stack.back().first;
          Error(
              node_file_[from],
              NodePath(from, absl::StrCat("startAfter[", k, "]")),
              absl::StrCat("start-after cycle: ", absl::StrJoin(cycle, " -> "),
                           "; remove one of these dependencies"));
        }
      }
    }
  }

  void UnknownChannel(size_t node, absl::string_view field, uint32_t k,
                      absl::string_view channel,
                      const std::vector<std::string>& channel_names) {
    Error(node_file_[node], NodePath(node, absl::StrCat(field, "[", k, "]")),
          absl::StrCat("no channel named ", Quote(channel),
                       "; declare it under \"channels\" (channels: ",
                       ListNames(channel_names), ")",
                       DidYouMean(channel, channel_names)));
  }

  const KnownTypes& types_;
  std::vector<SourceFile> files_;
  absl::flat_hash_map<std::string, int> file_by_canonical_;
  std::vector<int> chain_;         // files being loaded, outermost first
  std::vector<int> merge_order_;   // files whose contents are merged, in order
  std::vector<int> channel_file_;  // merged channel -> files_ index
  std::vector<int> node_file_;
  std::vector<Problem> errors_;
  std::vector<Problem> warnings_;
  StackConfig result_;
};

StackConfig::StackConfig() = default;
StackConfig::StackConfig(StackConfig&&) noexcept = default;
StackConfig& StackConfig::operator=(StackConfig&&) noexcept = default;
StackConfig::~StackConfig() = default;

config::Stack::Reader StackConfig::stack() const {
  return message_->getRoot<config::Stack>().asReader();
}

std::optional<config::Channel::Reader> StackConfig::FindChannel(
    std::string_view name) const {
  for (config::Channel::Reader channel : channels()) {
    if (View(channel.getName()) ==
        absl::string_view(name.data(), name.size())) {
      return channel;
    }
  }
  return std::nullopt;
}

std::optional<config::Node::Reader> StackConfig::FindNode(
    std::string_view name) const {
  for (config::Node::Reader node : nodes()) {
    if (View(node.getName()) == absl::string_view(name.data(), name.size())) {
      return node;
    }
  }
  return std::nullopt;
}

absl::StatusOr<StackConfig> LoadStackConfig(const std::filesystem::path& path,
                                            const KnownTypes& types) {
  return StackConfigLoader(types).Load(path);
}

absl::StatusOr<uint32_t> QueueDepthFor(config::Channel::Reader channel) {
  DepthResult depth = ResolveQueueDepth(channel);
  if (!depth.error.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("channel ", Quote(View(channel.getName())), ": ",
                     depth.field, ": ", depth.error));
  }
  return depth.depth;
}

absl::StatusOr<shm::QueueParams> QueueParamsFor(
    config::Channel::Reader channel) {
  absl::StatusOr<uint32_t> depth = QueueDepthFor(channel);
  if (!depth.ok()) return depth.status();
  const uint32_t max_size = channel.getMaxSize();
  if (max_size < kMinMaxSize || max_size > shm::kMaxSlotSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("channel ", Quote(View(channel.getName())),
                     ": maxSize: ", max_size, " is out of range; use ",
                     kMinMaxSize, "..", shm::kMaxSlotSize, " bytes"));
  }
  shm::QueueParams params;
  // Rounded up to whole Cap'n Proto words; kMaxSlotSize is a multiple of 8.
  params.slot_size = (max_size + 7u) & ~7u;
  params.queue_depth = *depth;
  params.max_publishers = channel.getMaxPublishers();
  params.max_pinned = channel.getMaxPinned();
  if (absl::Status status = shm::Validate(params); !status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "channel ", Quote(View(channel.getName())), ": ", status.message()));
  }
  return params;
}

}  // namespace tether::transport
