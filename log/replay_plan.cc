#include "log/replay_plan.h"

#include <fnmatch.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace tether::log {
namespace {

bool IsGlob(const std::string& p) {
  return p.find_first_of("*?[") != std::string::npos;
}

// A logged name and its MCAP channels in log order: more than one when the
// channel was re-created with another shape while it was recorded. A name
// is replayed, skipped or refused as one unit.
struct LoggedName {
  std::string name;
  std::vector<const LogChannel*> incarnations;
};

std::vector<LoggedName> GroupByName(const LogReader& reader) {
  std::vector<LoggedName> out;
  std::map<std::string, size_t> at;
  for (const LogChannel& c : reader.channels()) {
    auto [it, added] = at.emplace(c.name, out.size());
    if (added) out.push_back({c.name, {}});
    out[it->second].incarnations.push_back(&c);
  }
  return out;
}

// The log's channel names, each once, for errors.
std::string Names(const LogReader& reader) {
  std::vector<std::string> names;
  for (const LoggedName& n : GroupByName(reader)) names.push_back(n.name);
  return absl::StrJoin(names, ", ");
}

// Why `n` cannot be replayed on one channel ("" if it can): an incarnation
// without tether's description, or incarnations of two types.
std::string WhyNameNotReplayable(const LoggedName& n) {
  const size_t count = n.incarnations.size();
  for (size_t i = 0; i < count; ++i) {
    const LogChannel& c = *n.incarnations[i];
    if (c.description.has_value()) continue;
    if (count == 1) return c.not_replayable;
    return absl::StrCat(c.not_replayable, " (incarnation ", i + 1, " of the ",
                        count, " it has in the log; a channel is replayed "
                        "whole or not at all)");
  }
  const ChannelDescription& first = *n.incarnations.front()->description;
  for (const LogChannel* c : n.incarnations) {
    if (c->description->type_id != first.type_id) {
      return absl::StrCat(
          "it was re-created as another type while it was recorded (",
          first.type_name, ", then ", c->description->type_name,
          ") and one channel carries one type; read its messages with tether "
          "log cat");
    }
  }
  return "";
}

// Every queue dimension the largest any incarnation had, the last one's
// schema (see ReplayChannel::description). All have the same type.
ChannelDescription Merged(const LoggedName& n) {
  ChannelDescription into = *n.incarnations.front()->description;
  for (const LogChannel* c : n.incarnations) {
    const ChannelDescription& d = *c->description;
    into.max_size = std::max(into.max_size, d.max_size);
    into.queue_depth = std::max(into.queue_depth, d.queue_depth);
    into.max_publishers = std::max(into.max_publishers, d.max_publishers);
    into.max_pinned = std::max(into.max_pinned, d.max_pinned);
    into.frequency_hz = std::max(into.frequency_hz, d.frequency_hz);
    into.schema = d.schema;
  }
  return into;
}

}  // namespace

std::string WhyNotReplayable(const LogReader& reader, const std::string& name) {
  for (const LoggedName& n : GroupByName(reader)) {
    if (n.name != name) continue;
    if (n.incarnations.front()->is_gap_channel()) {
      return "it holds the log's loss records, not a tether channel";
    }
    return WhyNameNotReplayable(n);
  }
  return "the log has no such channel";
}

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
    if (auto [it, added] = rename.emplace(from, to); !added) {
      return absl::InvalidArgumentError(absl::StrCat(
          from, " is remapped twice (", from, ":=", it->second, " and ",
          from, ":=", to, "): give one"));
    }
  }
  std::vector<ReplayChannel> out;
  std::vector<std::string> skipped;
  std::set<std::string> used_patterns;
  for (const LoggedName& n : GroupByName(reader)) {
    bool explicit_name = false, selected = select.empty();
    for (const std::string& p : select) {
      if (p == n.name) {
        explicit_name = selected = true;
        used_patterns.insert(p);
      } else if (IsGlob(p) && ::fnmatch(p.c_str(), n.name.c_str(), 0) == 0) {
        selected = true;
        used_patterns.insert(p);
      }
    }
    if (!selected) continue;
    // A remapped name was asked for by name too.
    explicit_name = explicit_name || rename.count(n.name) > 0;
    const LogChannel& first = *n.incarnations.front();
    if (first.is_gap_channel()) {
      if (!explicit_name) continue;
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot replay ", n.name,
          ": it holds the log's loss records, not a tether channel (read it "
          "with tether log cat)"));
    }
    if (const std::string why = WhyNameNotReplayable(n); !why.empty()) {
      if (explicit_name) {
        return absl::FailedPreconditionError(absl::StrCat(
            "cannot replay ", n.name, ": ", why, "; leave it out of "
            "--channels and the remappings: the others replay"));
      }
      skipped.push_back(absl::StrCat(n.name, ": ", why));
      if (notes != nullptr) notes->push_back("skipping " + skipped.back());
      continue;
    }
    ReplayChannel rc;
    rc.logged = &first;
    for (const LogChannel* c : n.incarnations) rc.ids.push_back(c->id);
    rc.description = Merged(n);
    auto it = rename.find(n.name);
    rc.name = it == rename.end() ? n.name : it->second;
    out.push_back(std::move(rc));
  }
  for (const auto& [from, to] : rename) {
    const bool planned = std::any_of(out.begin(), out.end(), [&](const auto& rc) {
      return rc.logged->name == from;
    });
    if (!planned) {
      return absl::InvalidArgumentError(absl::StrCat(
          "remapping ", from, ":=", to, ": ", from,
          " is not among the channels selected; add it to --channels"));
    }
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
        Names(reader), ")",
        skipped.empty() ? ""
                        : absl::StrCat("; skipped ",
                                       absl::StrJoin(skipped, "; skipped "))));
  }
  return out;
}

void PublishFailures::Add(const std::string& channel,
                          transport::PublishStatus status) {
  ++failed_.try_emplace(channel, 0, status).first->second.first;
}

absl::Status PublishFailures::Summary() const {
  if (failed_.empty()) return absl::OkStatus();
  std::vector<std::string> parts;
  for (const auto& [name, f] : failed_) {
    parts.push_back(
        absl::StrCat(name, " ", f.first, " (", transport::ToString(f.second), ")"));
  }
  return absl::InternalError(absl::StrCat(
      "publishing failed on ", failed_.size(), " channel",
      failed_.size() == 1 ? "" : "s", ": ", absl::StrJoin(parts, ", ")));
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
