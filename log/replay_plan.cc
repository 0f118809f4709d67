#include "log/replay_plan.h"

#include <fnmatch.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
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
  std::set<std::string> seen;
  for (const LogChannel& c : reader.channels()) {
    if (seen.insert(c.name).second) names.push_back(c.name);
  }
  return absl::StrJoin(names, ", ");
}

// Adds the later incarnation `c` of `rc`'s channel to it (see
// ReplayChannel), or says why the two cannot share one channel.
absl::Status AddIncarnation(ReplayChannel& rc, const LogChannel& c) {
  const ChannelDescription& d = *c.description;
  ChannelDescription& into = rc.description;
  if (d.type_id != into.type_id) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot replay ", c.name, ": it was re-created as another type while "
        "it was recorded (", into.type_name, ", then ", d.type_name,
        "), and one channel carries one type; leave it out (--channels "
        "names the others) and read its messages with tether log cat"));
  }
  into.max_size = std::max(into.max_size, d.max_size);
  into.queue_depth = std::max(into.queue_depth, d.queue_depth);
  into.max_publishers = std::max(into.max_publishers, d.max_publishers);
  into.max_pinned = std::max(into.max_pinned, d.max_pinned);
  into.frequency_hz = std::max(into.frequency_hz, d.frequency_hz);
  into.schema = d.schema;
  rc.ids.push_back(c.id);
  return absl::OkStatus();
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
    auto earlier = std::find_if(out.begin(), out.end(), [&](const auto& rc) {
      return rc.logged->name == c.name;
    });
    if (earlier != out.end()) {
      if (absl::Status s = AddIncarnation(*earlier, c); !s.ok()) return s;
      continue;
    }
    ReplayChannel rc;
    rc.logged = &c;
    rc.ids = {c.id};
    rc.description = *c.description;
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
    const ChannelDescription& d = rc.description;
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
