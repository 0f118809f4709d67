#include "ros_bridge/bridge_config.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string_view>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "capnp/compat/json.h"
#include "capnp/message.h"
#include "kj/exception.h"
#include "ros_bridge/bridge_config.capnp.h"
#include "transport/strict_json.h"
#include "transport/json_text.h"

namespace tether::ros_bridge {
namespace {

Direction FromConfig(config::Direction d) {
  switch (d) {
    case config::Direction::BOTH: return Direction::kBoth;
    case config::Direction::ROS_TO_TETHER: return Direction::kRosToTether;
    case config::Direction::TETHER_TO_ROS: return Direction::kTetherToRos;
  }
  return Direction::kBoth;
}

absl::Status CheckName(const std::string& what, const std::string& name) {
  if (name.empty() || name[0] != '/') {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " \"", name, "\" must be an absolute name starting with '/'"));
  }
  return absl::OkStatus();
}

// Splits "A=B,k=v,flag" into (A, B) and the options.
absl::Status SplitSpec(const std::string& spec, const char* what,
                       std::string* left, std::string* right,
                       std::vector<std::pair<std::string, std::string>>* opts) {
  std::vector<std::string> parts = absl::StrSplit(spec, ',');
  std::vector<std::string> sides = absl::StrSplit(parts[0], absl::MaxSplits('=', 1));
  if (sides.size() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " \"", spec, "\" needs the form ROS=TETHER[,key=value...]"));
  }
  *left = sides[0];
  *right = sides[1];
  for (size_t i = 1; i < parts.size(); ++i) {
    std::vector<std::string> kv = absl::StrSplit(parts[i], absl::MaxSplits('=', 1));
    opts->emplace_back(kv[0], kv.size() > 1 ? kv[1] : "");
  }
  return absl::OkStatus();
}

// True if `json` is an object with a member `name` at its top level.
bool HasTopLevelMember(const std::string& json, const char* name) {
  capnp::MallocMessageBuilder message;
  capnp::JsonValue::Builder value = message.initRoot<capnp::JsonValue>();
  try {
    transport::DecodeRawJson(json, value);
  } catch (const kj::Exception&) {
    return false;
  }
  if (value.which() != capnp::JsonValue::OBJECT) return false;
  for (capnp::JsonValue::Field::Reader f : value.asReader().getObject()) {
    if (f.getName() == name) return true;
  }
  return false;
}

}  // namespace

bool ParseDirection(const std::string& text, Direction* out) {
  if (text == "both") {
    *out = Direction::kBoth;
  } else if (text == "ros-to-tether" || text == "to-tether" ||
             text == "rosToTether") {
    *out = Direction::kRosToTether;
  } else if (text == "tether-to-ros" || text == "to-ros" ||
             text == "tetherToRos") {
    *out = Direction::kTetherToRos;
  } else {
    return false;
  }
  return true;
}

const char* DirectionName(Direction d) {
  switch (d) {
    case Direction::kBoth: return "both";
    case Direction::kRosToTether: return "ros-to-tether";
    case Direction::kTetherToRos: return "tether-to-ros";
  }
  return "?";
}

absl::Status LoadBridgeConfig(const std::string& path, BridgeOptions* options) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot read the bridge config ",
                                            path));
  }
  std::stringstream text;
  text << in.rdbuf();
  const std::string json = text.str();
  capnp::MallocMessageBuilder message;
  config::Config::Builder c = message.initRoot<config::Config>();
  if (absl::Status s = transport::DecodeStrictJson(json, path,
                                                   capnp::toDynamic(c));
      !s.ok()) {
    std::string hint;
    if (HasTopLevelMember(json, "channels")) {
      hint = absl::StrCat(
          "\n", path, ": this looks like a net-bridge config (it lists "
          "\"channels\"); run it with tether net-bridge --config ", path,
          ", or give ros-bridge \"pairs\" and \"prefixes\" "
          "(ros_bridge/bridge_config.capnp)");
    }
    return absl::InvalidArgumentError(absl::StrCat(s.message(), hint));
  }
  config::Config::Reader r = c.asReader();
  if (r.hasMaster()) options->master_uri = r.getMaster().cStr();
  options->node_name = r.getNodeName().cStr();
  options->max_size = r.getMaxSize();
  options->queue_depth = r.getQueueDepth();
  options->ros_queue_size = r.getRosQueueSize();
  options->outbox_depth = r.getOutboxDepth();
  options->discovery_period_ms = r.getDiscoveryPeriodMs();
  options->status_period_ms = r.getStatusPeriodMs();
  int i = 0;
  for (config::Pair::Reader p : r.getPairs()) {
    PairOptions o;
    o.ros = p.getRos().cStr();
    o.tether = p.getTether().cStr();
    if (o.tether.empty()) o.tether = o.ros;
    o.direction = FromConfig(p.getDirection());
    o.type = p.getType().cStr();
    o.latch = p.getLatch();
    o.max_size = p.getMaxSize();
    o.queue_depth = p.getQueueDepth();
    for (const auto& [what, name] : {std::pair{"ros", o.ros}, {"tether", o.tether}}) {
      if (absl::Status s = CheckName(absl::StrCat(path, ": pairs[", i, "].", what), name);
          !s.ok()) {
        return s;
      }
    }
    options->pairs.push_back(std::move(o));
    ++i;
  }
  i = 0;
  for (config::Prefix::Reader p : r.getPrefixes()) {
    PrefixOptions o;
    o.ros = p.getRos().cStr();
    o.tether = p.getTether().cStr();
    o.direction = FromConfig(p.getDirection());
    for (const auto& [what, name] : {std::pair{"ros", o.ros}, {"tether", o.tether}}) {
      if (absl::Status s = CheckName(absl::StrCat(path, ": prefixes[", i, "].", what), name);
          !s.ok()) {
        return s;
      }
    }
    options->prefixes.push_back(std::move(o));
    ++i;
  }
  if (options->max_size < 64) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": maxSize ", options->max_size, " is too small; use >= 64"));
  }
  const uint32_t depth = options->queue_depth;
  if (depth < 2 || (depth & (depth - 1)) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": queueDepth ", depth, " is not a power of two >= 2"));
  }
  return CheckNodeName(options->node_name, absl::StrCat(path, ": nodeName"));
}

absl::Status AddPairSpec(const std::string& spec, BridgeOptions* options) {
  PairOptions p;
  std::vector<std::pair<std::string, std::string>> opts;
  if (absl::Status s = SplitSpec(spec, "--pair", &p.ros, &p.tether, &opts); !s.ok()) {
    return s;
  }
  if (p.tether.empty()) p.tether = p.ros;
  if (absl::Status s = CheckName("--pair ROS topic", p.ros); !s.ok()) return s;
  if (absl::Status s = CheckName("--pair tether channel", p.tether); !s.ok()) return s;
  for (const auto& [k, v] : opts) {
    if (k == "dir") {
      if (!ParseDirection(v, &p.direction)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--pair ", spec, ": dir=", v, " is not a direction; use both, "
            "to-tether or to-ros"));
      }
    } else if (k == "type") {
      p.type = v;
    } else if (k == "latch") {
      p.latch = true;
    } else if (k == "max_size") {
      if (!absl::SimpleAtoi(v, &p.max_size) || p.max_size < 64) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--pair ", spec, ": max_size=", v, " is not a size in bytes >= 64"));
      }
    } else if (k == "depth") {
      if (!absl::SimpleAtoi(v, &p.queue_depth) || p.queue_depth < 2) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--pair ", spec, ": depth=", v, " is not a power of two >= 2"));
      }
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "--pair ", spec, ": unknown option \"", k,
          "\"; use dir=, type=, latch, max_size=, depth="));
    }
  }
  options->pairs.push_back(std::move(p));
  return absl::OkStatus();
}

absl::Status AddPrefixSpec(const std::string& spec, BridgeOptions* options) {
  PrefixOptions p;
  std::vector<std::pair<std::string, std::string>> opts;
  if (absl::Status s = SplitSpec(spec, "--prefix", &p.ros, &p.tether, &opts); !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckName("--prefix ROS prefix", p.ros); !s.ok()) return s;
  if (absl::Status s = CheckName("--prefix tether prefix", p.tether); !s.ok()) return s;
  for (const auto& [k, v] : opts) {
    if (k != "dir" || !ParseDirection(v, &p.direction)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--prefix ", spec, ": \"", k, "=", v,
          "\" is not an option; use dir=both|to-tether|to-ros"));
    }
  }
  options->prefixes.push_back(std::move(p));
  return absl::OkStatus();
}

absl::Status CheckNodeName(const std::string& name, const std::string& origin) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(
        origin, " \"", name, "\" is not a ROS node name: ", why,
        "; use a letter, then letters, digits and '_' (e.g. tether_bridge)"));
  };
  if (name.empty()) return bad("it is empty");
  auto letter = [](char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
  };
  if (!letter(name[0])) return bad("it does not start with a letter");
  for (char ch : name) {
    if (!letter(ch) && !(ch >= '0' && ch <= '9') && ch != '_') {
      return bad(ch == '/' ? std::string("a node name has no namespace ('/')")
                           : absl::StrCat("'", std::string(1, ch),
                                          "' is not allowed in it"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckMasterUri(const std::string& uri, const std::string& origin) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(
        origin, " \"", uri, "\" is not a ROS master URI: ", why,
        "; use http://HOST:PORT, e.g. http://localhost:11311"));
  };
  constexpr std::string_view kScheme = "http://";
  if (uri.empty()) return bad("it is empty");
  if (uri.compare(0, kScheme.size(), kScheme) != 0) {
    return bad("it does not start with http:// (roscpp needs it, in lower "
               "case)");
  }
  const std::string rest = uri.substr(kScheme.size());
  const std::string authority = rest.substr(0, rest.find('/'));
  const size_t colon = authority.find(':');
  const std::string host = authority.substr(0, colon);
  if (host.empty()) return bad("it names no host");
  if (host[0] == '[') {
    return bad("roscpp cannot parse an IPv6 address in brackets (it cuts "
               "the host at the first ':'), give a host name that resolves "
               "to it");
  }
  for (char ch : host) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                    (ch >= '0' && ch <= '9') || ch == '.' || ch == '-' ||
                    ch == '_';
    if (!ok) {
      return bad(absl::StrCat("the host \"", host,
                              "\" is not a host name or IPv4 address"));
    }
  }
  if (colon == std::string::npos) {
    return bad("it has no :PORT (the master's default is 11311)");
  }
  const std::string port = authority.substr(colon + 1);
  uint32_t number = 0;
  if (port.empty() ||
      port.find_first_not_of("0123456789") != std::string::npos ||
      !absl::SimpleAtoi(port, &number) || number < 1 || number > 65535) {
    return bad(absl::StrCat("the port \"", port, "\" is not 1..65535"));
  }
  return absl::OkStatus();
}

shm::ChannelOptions ChannelOptionsFromEnvironment() {
  shm::ChannelOptions options;
  if (const char* v = std::getenv("TETHER_ROOT"); v != nullptr && *v) {
    options.root = v;
  }
  if (const char* v = std::getenv("TETHER_INSTANCE"); v != nullptr && *v) {
    options.instance = v;
  }
  return options;
}

}  // namespace tether::ros_bridge
