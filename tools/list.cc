#include "tools/list.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "util/json_writer.h"

namespace tether::tools {
namespace {

std::string HumanBytes(uint64_t n) {
  if (n >= (1u << 20)) return absl::StrFormat("%.1f MiB", n / 1048576.0);
  if (n >= (1u << 10)) return absl::StrFormat("%.1f KiB", n / 1024.0);
  return absl::StrFormat("%u B", n);
}

}  // namespace

std::string FormatChannelTable(
    const std::vector<transport::ChannelSummary>& channels) {
  if (channels.empty()) return "no channels\n";
  size_t name_w = 7, type_w = 4;
  for (const auto& c : channels) {
    name_w = std::max(name_w, c.name.size());
    type_w = std::max(type_w, c.type_name.size());
  }
  std::string out = absl::StrFormat(
      "%-*s  %-*s  %9s  %6s  %8s  %10s  %4s  %4s  %9s\n", name_w, "CHANNEL",
      type_w, "TYPE", "MAX SIZE", "DEPTH", "RATE HZ", "MESSAGES", "PUBS",
      "PINS", "MEMORY");
  for (const auto& c : channels) {
    if (!c.error.empty()) {
      absl::StrAppendFormat(&out, "%-*s  error: %s\n", name_w, c.name, c.error);
      continue;
    }
    if (!c.corruption.empty()) {
      absl::StrAppendFormat(&out, "%-*s  CORRUPT: %s\n", name_w, c.name,
                            c.corruption);
      continue;
    }
    absl::StrAppendFormat(
        &out, "%-*s  %-*s  %9s  %6u  %8g  %10u  %4d  %4d  %9s\n", name_w,
        c.name, type_w, c.type_name, HumanBytes(c.max_size),
        c.params.queue_depth, c.frequency_hz, c.stats.next_queue_index,
        c.stats.publishers, c.stats.pinning_readers,
        HumanBytes(c.stats.file_size));
    if (!c.reader_state_problem.empty()) {
      absl::StrAppendFormat(&out, "%-*s  warning: %s\n", name_w, "",
                            c.reader_state_problem);
    }
  }
  return out;
}

std::string FormatChannelJson(
    const std::vector<transport::ChannelSummary>& channels) {
  util::JsonWriter w;
  w.BeginObject().Key("channels").BeginArray();
  for (const auto& c : channels) {
    w.BeginObject().Key("name").String(c.name);
    if (!c.error.empty()) {
      w.Key("error").String(c.error).EndObject();
      continue;
    }
    if (!c.corruption.empty()) {
      w.Key("corrupt").String(c.corruption).EndObject();
      continue;
    }
    w.Key("type").String(c.type_name)
        .Key("type_id").String(absl::StrFormat("0x%016x", c.type_id))
        .Key("max_size").Uint(c.max_size)
        .Key("queue_depth").Uint(c.params.queue_depth)
        .Key("max_publishers").Uint(c.params.max_publishers)
        .Key("max_pinned").Uint(c.params.max_pinned)
        .Key("frequency_hz").Int(static_cast<int64_t>(c.frequency_hz))
        .Key("messages").Uint(c.stats.next_queue_index)
        .Key("publishers").Int(c.stats.publishers)
        .Key("pinning_readers").Int(c.stats.pinning_readers)
        .Key("sleepers").Uint(c.stats.sleepers)
        .Key("send_failures").Uint(c.stats.send_failures)
        .Key("file_bytes").Uint(c.stats.file_size);
    if (!c.reader_state_problem.empty()) {
      w.Key("reader_state_problem").String(c.reader_state_problem);
    }
    w.EndObject();
  }
  w.EndArray().EndObject();
  return w.str() + "\n";
}

}  // namespace tether::tools
