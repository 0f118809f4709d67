#include "log/replay_plan.h"

#include <fnmatch.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace tether::log {
namespace {

bool IsGlob(const std::string& p) {
  return p.find_first_of("*?[") != std::string::npos;
}

std::string Names(const LogReader& reader) {
  std::vector<std::string> names;
  for (const LogChannel& c : reader.channels()) names.push_back(c.name);
  return absl::StrJoin(names, ", ");
}

}  // namespace

absl::StatusOr<std::pair<std::string, std::string>> ParseRemap(
    std::string_view text) {
  const size_t at = text.find(":=");
  if (at == std::string_view::npos || at == 0 || at + 2 >= text.size() ||
      text[0] != '/' || text[at + 2] != '/') {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", std::string(text),
        "' is not a remapping; write /logged/name:=/replayed/name"));
  }
  return std::make_pair(std::string(text.substr(0, at)),
                        std::string(text.substr(at + 2)));
}

absl::StatusOr<std::vector<ReplayChannel>> PlanReplay(
    const LogReader& reader, const std::vector<std::string>& select,
    const std::vector<std::pair<std::string, std::string>>& remaps,
    std::vector<std::string>* notes) {
  std::map<std::string, std::string> rename;
  for (const auto& [from, to] : remaps) {
    if (reader.FindChannel(from) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "remapping ", from, ":=", to, ": the log has no channel ", from,
          " (it has: ", Names(reader), ")"));
    }
    rename[from] = to;
  }
  std::vector<ReplayChannel> out;
  std::set<std::string> used_patterns;
  for (const LogChannel& c : reader.channels()) {
    bool explicit_name = false, selected = select.empty();
    for (const std::string& p : select) {
      if (p == c.name) {
        explicit_name = selected = true;
        used_patterns.insert(p);
      } else if (IsGlob(p) && ::fnmatch(p.c_str(), c.name.c_str(), 0) == 0) {
        selected = true;
        used_patterns.insert(p);
      }
    }
    if (!selected) continue;
    if (c.is_gap_channel()) {
      if (!explicit_name) continue;
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot replay ", c.name,
          ": it holds the log's loss records, not a tether channel (read it "
          "with tether log cat)"));
    }
    if (!c.description.has_value()) {
      if (explicit_name) {
        return absl::FailedPreconditionError(absl::StrCat(
            "cannot replay ", c.name, ": ", c.not_replayable));
      }
      if (notes != nullptr) {
        notes->push_back(absl::StrCat("skipping ", c.name, ": ", c.not_replayable));
      }
      continue;
    }
    ReplayChannel rc;
    rc.logged = &c;
    auto it = rename.find(c.name);
    rc.name = it == rename.end() ? c.name : it->second;
    out.push_back(std::move(rc));
  }
  for (const std::string& p : select) {
    if (used_patterns.count(p) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "no channel of the log matches ", p, " (it has: ", Names(reader), ")"));
    }
  }
  std::map<std::string, std::string> target;
  for (const ReplayChannel& rc : out) {
    auto [it, added] = target.emplace(rc.name, rc.logged->name);
    if (!added) {
      return absl::InvalidArgumentError(absl::StrCat(
          "both ", it->second, " and ", rc.logged->name, " would be replayed on ",
          rc.name, ": remap one of them elsewhere"));
    }
  }
  if (out.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "nothing to replay: no replayable channel selected (the log has: ",
        Names(reader), ")"));
  }
  return out;
}

absl::Status LoadReplaySchemas(const std::vector<ReplayChannel>& channels,
                               transport::SchemaRegistry* schemas) {
  for (const ReplayChannel& rc : channels) {
    const ChannelDescription& d = *rc.logged->description;
    std::vector<uint64_t> words((d.schema.size() + 7) / 8);
    if (!d.schema.empty()) std::memcpy(words.data(), d.schema.data(), d.schema.size());
    if (absl::Status s = schemas->AddCodeGeneratorRequest(
            std::span<const std::byte>(
                reinterpret_cast<const std::byte*>(words.data()),
                words.size() * 8),
            d.type_id);
        !s.ok()) {
      return absl::DataLossError(absl::StrCat(
          "the log's schema for ", rc.logged->name, " is unusable: ", s.message()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<transport::StackConfig> StackConfigFor(
    const std::vector<std::pair<std::string, ChannelDescription>>& channels,
    const transport::KnownTypes& types) {
  std::string json = "{\"channels\": [";
  for (size_t i = 0; i < channels.size(); ++i) {
    const auto& [name, d] = channels[i];
    absl::StrAppendFormat(
        &json,
        "%s\n {\"name\": \"%s\", \"type\": \"0x%016x\", \"maxSize\": %u, "
        "\"frequencyHz\": %.17g, \"queueDepth\": %u, \"maxPublishers\": %u, "
        "\"maxPinned\": %u}",
        i == 0 ? "" : ",", name, d.type_id, d.max_size, d.frequency_hz,
        d.queue_depth, d.max_publishers, d.max_pinned);
  }
  json += "\n], \"nodes\": []}\n";
  absl::StatusOr<transport::StackConfig> stack =
      transport::ParseStackConfig(json, "<the log's channels>", types);
  if (!stack.ok()) {
    return absl::Status(stack.status().code(),
                        absl::StrCat("the log's channels do not make a valid "
                                     "stack: ",
                                     stack.status().message()));
  }
  return stack;
}

}  // namespace tether::log
