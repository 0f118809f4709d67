#include "transport/config_validate.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "shm/queue_params.h"
#include "transport/names.h"
#include "transport/queue_shape.h"
#include "transport/text_hints.h"

namespace tether::transport::internal {
namespace {

constexpr int kMaxCpuId = 1023;  // CPU_SETSIZE - 1

class StackValidator {
 public:
  StackValidator(const MergedOrigins& origins, const KnownTypes& types,
                 Problems& problems)
      : types_(types),
        channel_origins_(*origins.channels),
        node_origins_(*origins.nodes),
        channel_file_(*origins.channel_files),
        node_file_(*origins.node_files),
        problems_(problems) {}

  void Run(config::Stack::Builder stack) {
    auto channels = stack.getChannels();
    auto nodes = stack.getNodes();
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

 private:
  std::string ChannelPath(size_t i, absl::string_view field = "") const {
    std::string path =
        absl::StrCat("channels[", channel_origins_[i].index, "]");
    if (!field.empty()) absl::StrAppend(&path, ".", field);
    return path;
  }
  std::string NodePath(size_t i, absl::string_view field = "") const {
    std::string path =
        absl::StrCat("nodes[", node_origins_[i].index, "]");
    if (!field.empty()) absl::StrAppend(&path, ".", field);
    return path;
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
      problems_.Error(file, ChannelPath(i, "name"),
            "missing; name the channel like \"/robot/joint_state\"");
    } else if (absl::Status bad = CheckChannelName(name); !bad.ok()) {
      problems_.Error(file, ChannelPath(i, "name"), std::string(bad.message()));
    } else {
      auto [it, inserted] = by_name.emplace(name, i);
      if (!inserted) {
        const ConfigOrigin& first = channel_origins_[it->second];
        problems_.Error(file, ChannelPath(i, "name"),
              absl::StrCat(Quote(name), " is already declared in ", first.file,
                           " (channels[", first.index,
                           "]); channel names must be unique in the stack and "
                           "its includes"));
      }
    }

    const std::string type(View(channel.getType()));
    if (type.empty()) {
      problems_.Error(file, ChannelPath(i, "type"),
            "missing; set the message type, a struct display name like "
            "\"examples/demo.capnp:JointState\" or a type id like "
            "\"0x9eb32e19f86ee174\"");
    } else if (absl::StartsWith(type, "0x")) {
      uint64_t id = 0;
      if (type.size() > 18 || !absl::SimpleHexAtoi(type.substr(2), &id)) {
        problems_.Error(file, ChannelPath(i, "type"),
              absl::StrCat(Quote(type),
                           " is not a type id; write 0x and up to 16 hex "
                           "digits, or use the display name"));
      } else if (!types_.ids.contains(id)) {
        problems_.Error(file, ChannelPath(i, "type"),
              absl::StrCat("type id ", type,
                           " is not a known message type; use one of the "
                           "registered types (",
                           ListNames(KnownTypeNames()), ")"),
              ConfigProblem::Kind::kUnknownType);
      }
    } else if (!types_.names.contains(type)) {
      problems_.Error(file, ChannelPath(i, "type"),
            absl::StrCat(Quote(type), " is not a known message type",
                         DidYouMean(type, KnownTypeNames()),
                         " (known types: ", ListNames(KnownTypeNames()), ")"),
            ConfigProblem::Kind::kUnknownType);
    }

    const uint32_t max_size = channel.getMaxSize();
    const std::string size_range =
        absl::StrCat("use ", ChannelFieldRange("maxSize"));
    if (max_size == 0) {
      problems_.Error(file, ChannelPath(i, "maxSize"),
            absl::StrCat("missing or 0; ", size_range));
    } else if (max_size < kMinMaxSize) {
      problems_.Error(file, ChannelPath(i, "maxSize"),
            absl::StrCat(max_size, " is too small; ", size_range));
    } else if (max_size > shm::kMaxSlotSize) {
      problems_.Error(file, ChannelPath(i, "maxSize"),
            absl::StrCat(max_size, " is larger than the 256 MiB limit; ",
                         size_range));
    }

    if (channel.getFrequencyHz() < 0) {
      problems_.Error(file, ChannelPath(i, "frequencyHz"),
            absl::StrCat(channel.getFrequencyHz(),
                         " is negative; use the publish rate in Hz, or 0 for "
                         "an aperiodic channel"));
    } else {
      internal::DepthResult depth = internal::ResolveQueueDepth(channel.asReader());
      if (!depth.error.empty()) {
        problems_.Error(file, ChannelPath(i, depth.field), depth.error);
      } else {
        channel.setQueueDepth(depth.depth);
      }
    }

    if (channel.getMaxPublishers() == 0 ||
        channel.getMaxPublishers() > shm::kMaxPublishers) {
      problems_.Error(file, ChannelPath(i, "maxPublishers"),
            absl::StrCat(channel.getMaxPublishers(), " is out of range; use ",
                         ChannelFieldRange("maxPublishers")));
    }
    if (channel.getMaxPinned() > shm::kMaxPinned) {
      problems_.Error(file, ChannelPath(i, "maxPinned"),
            absl::StrCat(channel.getMaxPinned(), " is too many; use ",
                         ChannelFieldRange("maxPinned")));
    }

    ValidateMode(i, file, "mode", View(channel.getMode()), /*optional=*/false);
    ValidateMode(i, file, "readerMode", View(channel.getReaderMode()),
                 /*optional=*/true);
    ValidateGroup(i, file, "group", View(channel.getGroup()));
    ValidateGroup(i, file, "readerGroup", View(channel.getReaderGroup()));
  }

  void ValidateMode(size_t i, int file, const char* field,
                    absl::string_view mode, bool optional) {
    if (optional && mode.empty()) return;
    bool octal = (mode.size() == 3 || mode.size() == 4) &&
                 (mode.size() == 3 || mode[0] == '0');
    unsigned mode_bits = 0;
    for (char ch : mode) {
      if (ch < '0' || ch > '7') octal = false;
      mode_bits = mode_bits * 8 + static_cast<unsigned>(ch - '0');
    }
    if (!octal) {
      problems_.Error(file, ChannelPath(i, field),
            absl::StrCat(Quote(mode),
                         " is not a file mode; use an octal string of "
                         "permission bits such as \"0660\" or \"0640\""));
    } else if ((mode_bits & 0600) != 0600) {
      problems_.Error(file, ChannelPath(i, field),
            absl::StrCat(Quote(mode),
                         " does not let the owner read and write the "
                         "channel; use e.g. \"0660\""));
    } else if ((mode_bits & 0002) != 0) {
      problems_.Error(file, ChannelPath(i, field),
            absl::StrCat(Quote(mode),
                         " lets every user write the file (",
                         std::string(field) == "mode"
                             ? "anyone could forge messages"
                             : "anyone could pin every slot and stop sends",
                         "); give write access to a group instead, e.g. "
                         "\"0664\""));
    }
  }

  void ValidateGroup(size_t i, int file, const char* field,
                     absl::string_view group) {
    if (!group.empty() &&
        (!IsSimpleName(group) || absl::ascii_isdigit(group[0]))) {
      problems_.Error(file, ChannelPath(i, field),
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
      problems_.Error(file, NodePath(i, "name"),
            "missing; name the node, e.g. \"controller\"");
    } else if (!IsSimpleName(name)) {
      problems_.Error(file, NodePath(i, "name"),
            absl::StrCat(Quote(name),
                         " is not a node name; use letters, digits, '_' and "
                         "'-'"));
    } else {
      auto [it, inserted] = by_name.emplace(name, i);
      if (!inserted) {
        const ConfigOrigin& first = node_origins_[it->second];
        problems_.Error(file, NodePath(i, "name"),
              absl::StrCat(Quote(name), " is already declared in ", first.file,
                           " (nodes[", first.index,
                           "]); node names must be unique in the stack and "
                           "its includes"));
      }
    }

    if (absl::StripAsciiWhitespace(View(node.getCommand())).empty()) {
      problems_.Error(file, NodePath(i, "command"),
            "empty; set the program to run, e.g. "
            "\"bazel-bin/examples/controller\"");
    }

    auto scheduling = node.getScheduling();
    const int priority = scheduling.getPriority();
    const int nice = scheduling.getNice();
    if (scheduling.getPolicy() == config::Policy::OTHER) {
      if (priority != 0) {
        problems_.Error(file, NodePath(i, "scheduling.priority"),
              absl::StrCat(priority,
                           " needs a real-time policy; use policy \"fifo\" or "
                           "\"rr\" with priority 1..99, or priority 0 (and "
                           "nice) with \"other\""));
      }
      if (nice < -20 || nice > 19) {
        problems_.Error(file, NodePath(i, "scheduling.nice"),
              absl::StrCat(nice, " is out of range; use -20..19"));
      }
    } else {
      const char* policy =
          scheduling.getPolicy() == config::Policy::FIFO ? "fifo" : "rr";
      if (priority < 1 || priority > 99) {
        problems_.Error(file, NodePath(i, "scheduling.priority"),
              absl::StrCat(priority, " is not a valid ", policy,
                           " priority; use 1..99 (higher runs first)"));
      }
      if (nice != 0) {
        problems_.Error(file, NodePath(i, "scheduling.nice"),
              absl::StrCat("nice applies to policy \"other\" only; remove it "
                           "for ",
                           policy));
      }
    }

    auto cpus = node.getCpus();
    for (uint32_t k = 0; k < cpus.size(); ++k) {
      const std::string path = NodePath(i, absl::StrCat("cpus[", k, "]"));
      if (cpus[k] < 0 || cpus[k] > kMaxCpuId) {
        problems_.Error(file, path,
              absl::StrCat(cpus[k], " is not a CPU id; use 0..", kMaxCpuId));
        continue;
      }
      for (uint32_t j = 0; j < k; ++j) {
        if (cpus[j] == cpus[k]) {
          problems_.Error(file, path,
                absl::StrCat("CPU ", cpus[k], " is listed twice (also cpus[", j,
                             "])"));
          break;
        }
      }
    }

    auto restart = node.getRestart();
    if (restart.getBackoffMs() > restart.getMaxBackoffMs()) {
      problems_.Error(file, NodePath(i, "restart.backoffMs"),
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
        problems_.Error(file, path,
              absl::StrCat(Quote(var),
                           " is not an environment variable name; use a "
                           "non-empty name without '='"));
        continue;
      }
      for (uint32_t j = 0; j < k; ++j) {
        if (View(env[j].getName()) == var) {
          problems_.Error(file, path,
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
            problems_.Error(file, NodePath(i, absl::StrCat(field, "[", k, "]")),
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
          problems_.Warning(node_file_[i], NodePath(i, absl::StrCat("reads[", k, "]")),
                  absl::StrCat("no node writes ", Quote(View(reads[k])),
                               "; this node receives nothing unless a tool "
                               "or bridge publishes it"));
        }
      }
    }
    for (size_t c = 0; c < channels.size(); ++c) {
      const uint32_t max_publishers = channels[c].getMaxPublishers();
      if (max_publishers != 0 && writers[c].size() > max_publishers) {
        problems_.Error(channel_file_[c], ChannelPath(c, "maxPublishers"),
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
          problems_.Error(node_file_[i], path,
                absl::StrCat("no node named ", Quote(target),
                             DidYouMean(target, node_names),
                             " (nodes: ", ListNames(node_names), ")"));
        } else if (it->second == i) {
          problems_.Error(node_file_[i], path,
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
          problems_.Error(
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
    problems_.Error(node_file_[node], NodePath(node, absl::StrCat(field, "[", k, "]")),
          absl::StrCat("no channel named ", Quote(channel),
                       "; declare it under \"channels\" (channels: ",
                       ListNames(channel_names), ")",
                       DidYouMean(channel, channel_names)));
  }

  const KnownTypes& types_;
  const std::vector<ConfigOrigin>& channel_origins_;
  const std::vector<ConfigOrigin>& node_origins_;
  const std::vector<int>& channel_file_;
  const std::vector<int>& node_file_;
  Problems& problems_;
};

}  // namespace

void ValidateStack(config::Stack::Builder stack, const MergedOrigins& origins,
                   const KnownTypes& types, Problems& problems) {
  StackValidator(origins, types, problems).Run(stack);
}

}  // namespace tether::transport::internal
