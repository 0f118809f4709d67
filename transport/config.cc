#include "transport/config.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>
#include <system_error>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "capnp/compat/json.h"
#include "capnp/dynamic.h"
#include "capnp/schema.h"
#include "kj/exception.h"
#include "transport/config_report.h"
#include "transport/config_validate.h"
#include "transport/json_check.h"
#include "transport/json_locator.h"
#include "transport/text_hints.h"
#include "transport/json_text.h"
#include "transport/queue_shape.h"

namespace tether::transport {
namespace {

namespace fs = std::filesystem;
using capnp::JsonValue;
using internal::Problem;
using internal::Quote;
using internal::View;

constexpr size_t kMaxReportedErrors = 25;

struct SourceFile {
  std::string name;  // displayed: the top path, or includer dir / include
  fs::path dir;      // where its includes are resolved
  internal::JsonLocations locations;
  std::unique_ptr<capnp::MallocMessageBuilder> message;  // a config::Stack

  config::Stack::Reader stack() const {
    return message->getRoot<config::Stack>().asReader();
  }
};

}  // namespace

std::string ConfigProblem::ToString() const {
  std::string out = file;
  if (!file.empty() && line > 0) absl::StrAppend(&out, ":", line);
  if (!out.empty()) absl::StrAppend(&out, ": ");
  if (!field.empty()) absl::StrAppend(&out, field, ": ");
  absl::StrAppend(&out, message);
  return out;
}

class StackConfigLoader {
 public:
  StackConfigLoader(const KnownTypes& types,
                    std::vector<ConfigProblem>* problems)
      : types_(types), out_(problems) {}

  absl::StatusOr<StackConfig> Load(const fs::path& path) {
    if (absl::Status s = LoadTop(path); !s.ok()) return s;
    return Finish();
  }

  // The files only (no validation): their schema files.
  absl::StatusOr<std::vector<StackSchemaFile>> ListSchemaFiles(
      const fs::path& path) {
    if (absl::Status s = LoadTop(path); !s.ok()) return s;
    if (!problems_.errors.empty()) return ErrorStatus();
    return SchemaFiles();
  }

  absl::StatusOr<StackConfig> Parse(std::string_view json,
                                    const std::string& name,
                                    const fs::path& include_dir) {
    std::error_code ec;
    const fs::path dir = include_dir.empty() ? fs::current_path(ec)
                                             : include_dir;
    LoadFile(dir / ".in-memory-stack", name, std::string(json));
    return Finish();
  }

 private:
  // Reads the top file and (recursively) its includes; NotFound if the top
  // file cannot be read, else problems are collected.
  absl::Status LoadTop(const fs::path& path) {
    std::string text;
    std::string read_error;
    if (!ReadFile(path, text, read_error)) {
      if (out_ != nullptr) {
        out_->push_back({ConfigProblem::Kind::kSyntax, path.string(), 0, "",
                         absl::StrCat("cannot read: ", read_error)});
      }
      return absl::NotFoundError(absl::StrCat("cannot read stack config ",
                                              path.string(), ": ", read_error));
    }
    LoadFile(path, path.lexically_normal().string(), text);
    return absl::OkStatus();
  }

  absl::StatusOr<StackConfig> Finish() {
    if (problems_.errors.empty()) Merge();
    if (out_ != nullptr) {
      for (const Problem& p : problems_.errors) out_->push_back(Place(p));
      for (const Problem& p : problems_.warnings) out_->push_back(Place(p));
    }
    if (!problems_.errors.empty()) return ErrorStatus();
    for (const Problem& warning : problems_.warnings) {
      result_.warnings_.push_back(Place(warning).ToString());
    }
    return std::move(result_);
  }

  // The errors so far, one per line (at most kMaxReportedErrors).
  absl::Status ErrorStatus() const {
    std::vector<std::string> lines;
    const auto& errors = problems_.errors;
    for (size_t i = 0; i < errors.size() && i < kMaxReportedErrors; ++i) {
      lines.push_back(Place(errors[i]).ToString());
    }
    if (errors.size() > kMaxReportedErrors) {
      lines.push_back(absl::StrCat(
          "... and ", errors.size() - kMaxReportedErrors, " more errors"));
    }
    return absl::InvalidArgumentError(absl::StrJoin(lines, "\n"));
  }

  // Every loaded file's `schemas`, resolved against that file, in merge
  // order (included files first), each once.
  std::vector<StackSchemaFile> SchemaFiles() const {
    std::vector<StackSchemaFile> out;
    absl::flat_hash_set<std::string> seen;
    for (int f : merge_order_) {
      auto schemas = files_[f].stack().getSchemas();
      for (uint32_t i = 0; i < schemas.size(); ++i) {
        std::error_code ec;
        fs::path path = files_[f].dir / fs::path(schemas[i].cStr());
        const fs::path absolute = fs::absolute(path, ec);
        if (!ec) path = absolute;
        path = path.lexically_normal();
        if (!seen.insert(path.string()).second) continue;
        ConfigProblem where = Place({f, absl::StrCat("schemas[", i, "]"), ""});
        std::string origin = where.file;
        if (where.line > 0) absl::StrAppend(&origin, ":", where.line);
        absl::StrAppend(&origin, ": ", where.field);
        out.push_back({std::move(path), std::move(origin)});
      }
    }
    return out;
  }

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

  void Error(int file, std::string path, std::string message,
             ConfigProblem::Kind kind = ConfigProblem::Kind::kInvalid) {
    problems_.Error(file, std::move(path), std::move(message), kind);
  }

  // The problem at its file and line: the line of its path, or of the
  // nearest enclosing value present in the file.
  ConfigProblem Place(const Problem& p) const {
    ConfigProblem out{p.kind, "", 0, p.path, p.message};
    if (p.file < 0) return out;
    const SourceFile& file = files_[p.file];
    out.file = file.name;
    std::string path = p.path;
    while (true) {
      auto it = file.locations.lines.find(path);
      if (it != file.locations.lines.end()) {
        out.line = static_cast<int>(it->second);
        break;
      }
      if (path.empty()) break;
      const size_t cut = path.find_last_of(".[");
      path = cut == std::string::npos ? "" : path.substr(0, cut);
    }
    return out;
  }

  // Loads one file (read into `text`; `path` locates its includes, `name`
  // is what errors call it) and, recursively, its includes.
  void LoadFile(const fs::path& path, const std::string& name,
                const std::string& text) {
    std::error_code ec;
    fs::path canonical = fs::weakly_canonical(path, ec);
    if (ec) canonical = path.lexically_normal();

    const int index = static_cast<int>(files_.size());
    files_.push_back(SourceFile{});
    SourceFile& file = files_.back();
    file.name = name;
    file.dir = path.lexically_normal().parent_path();
    file_by_canonical_[canonical.string()] = index;

    if (!Parse(index, text)) return;
    auto schemas = files_[index].stack().getSchemas();
    for (uint32_t i = 0; i < schemas.size(); ++i) {
      if (View(schemas[i]).empty()) {
        Error(index, absl::StrCat("schemas[", i, "]"),
              "empty path; name a .capnp schema file relative to this one");
      }
    }

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
      const fs::path target =
          (files_[index].dir / fs::path(std::string(include)))
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
      LoadFile(target, target.string(), included_text);
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
                         ": malformed JSON: ", e.message),
            ConfigProblem::Kind::kSyntax);
      return false;
    }
    capnp::MallocMessageBuilder json_message;
    JsonValue::Builder json = json_message.initRoot<JsonValue>();
    capnp::JsonCodec codec;
    try {
      DecodeRawJson(text, json);
    } catch (const kj::Exception& e) {
      Error(index, "",
            absl::StrCat("malformed JSON: ", e.getDescription().cStr()),
            ConfigProblem::Kind::kSyntax);
      return false;
    }
    const size_t errors_before = problems_.errors.size();
    JsonSchemaChecker checker(
        [this, index](const std::string& path, std::string message) {
          Error(index, path, std::move(message));
        },
        [](const std::string& path) {
          // "channels[3].maxSize": what a channel's field takes.
          if (!absl::StartsWith(path, "channels[")) return std::string();
          const size_t dot = path.rfind('.');
          return dot == std::string::npos
                     ? std::string()
                     : ChannelFieldRange(
                           std::string_view(path).substr(dot + 1));
        });
    checker.CheckStruct(json.asReader(), capnp::Schema::from<config::Stack>(),
                        "");
    if (problems_.errors.size() != errors_before) return false;
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

  void Merge() {
    // Merge.
    result_.message_ = std::make_unique<capnp::MallocMessageBuilder>();
    auto merged = result_.message_->initRoot<config::Stack>();
    size_t channel_count = 0;
    size_t node_count = 0;
    for (int f : merge_order_) {
      channel_count += files_[f].stack().getChannels().size();
      node_count += files_[f].stack().getNodes().size();
    }
    const std::vector<StackSchemaFile> schema_files = SchemaFiles();
    if (!schema_files.empty()) {
      auto schemas = merged.initSchemas(schema_files.size());
      for (size_t i = 0; i < schema_files.size(); ++i) {
        schemas.set(i, schema_files[i].path.string());
      }
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

    internal::ValidateStack(merged,
                            {&result_.channel_origins_, &result_.node_origins_,
                             &channel_file_, &node_file_},
                            types_, problems_);
  }

  const KnownTypes& types_;
  std::vector<ConfigProblem>* const out_;
  std::vector<SourceFile> files_;
  absl::flat_hash_map<std::string, int> file_by_canonical_;
  std::vector<int> chain_;         // files being loaded, outermost first
  std::vector<int> merge_order_;   // files whose contents are merged, in order
  std::vector<int> channel_file_;  // merged channel -> files_ index
  std::vector<int> node_file_;
  internal::Problems problems_;
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
                                            const KnownTypes& types,
                                            std::vector<ConfigProblem>* problems) {
  return StackConfigLoader(types, problems).Load(path);
}

absl::StatusOr<std::vector<StackSchemaFile>> ListStackSchemaFiles(
    const std::filesystem::path& path) {
  const KnownTypes none;
  return StackConfigLoader(none, nullptr).ListSchemaFiles(path);
}

absl::StatusOr<StackConfig> ParseStackConfig(
    std::string_view json, const std::string& name, const KnownTypes& types,
    const std::filesystem::path& include_dir,
    std::vector<ConfigProblem>* problems) {
  return StackConfigLoader(types, problems).Parse(json, name, include_dir);
}

}  // namespace tether::transport
