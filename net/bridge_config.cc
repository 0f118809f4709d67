#include "net/bridge_config.h"

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "capnp/message.h"
#include "net/bridge_config.capnp.h"
#include "transport/strict_json.h"

namespace tether::net {
namespace {

bool AllOf(std::string_view s, std::string_view extra) {
  for (char c : s) {
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                       (c >= '0' && c <= '9');
    if (!alnum && extra.find(c) == std::string_view::npos) return false;
  }
  return true;
}

// Channel names as the stack config accepts them: absolute, '/'-separated
// parts of [A-Za-z0-9_.-].
bool ValidChannelName(std::string_view name) {
  if (name.size() < 2 || name.front() != '/' || name.back() == '/') {
    return false;
  }
  if (name.find("//") != std::string_view::npos) return false;
  return AllOf(name, "/_.-");
}

}  // namespace

const char* ToString(Direction direction) {
  return direction == Direction::kOut ? "out" : "in";
}

const char* ToString(Reliability reliability) {
  switch (reliability) {
    case Reliability::kDefault:
      return "default";
    case Reliability::kReliable:
      return "reliable";
    case Reliability::kBestEffort:
      return "bestEffort";
  }
  return "?";
}

bool IsLoopback(std::string_view interface) {
  return interface == "lo" || interface == "lo0";
}

absl::Status ValidateBridgeOptions(const BridgeOptions& o,
                                   const std::string& origin) {
  std::vector<std::string> problems;
  auto bad = [&](const std::string& field, const std::string& what) {
    problems.push_back(absl::StrCat(origin, ": ", field, ": ", what));
  };
  if (o.name.empty() || o.name.size() > 64 || !AllOf(o.name, "_-")) {
    bad("name", absl::StrCat("\"", o.name,
                             "\" is not 1..64 characters of [A-Za-z0-9_-]"));
  }
  const DdsOptions& d = o.dds;
  if (d.domain > kMaxDomainId) {
    bad("domain", absl::StrCat(d.domain, " is out of range; use 0..",
                               kMaxDomainId));
  }
  if (d.partition.empty() || d.partition.size() > 128 ||
      !AllOf(d.partition, "_./-")) {
    bad("partition",
        absl::StrCat("\"", d.partition,
                     "\" is not 1..128 characters of [A-Za-z0-9_./-] (no "
                     "wildcards)"));
  }
  if (d.interface.empty() || d.interface.size() > 15 ||
      !AllOf(d.interface, "_.:-")) {
    bad("interface", absl::StrCat("\"", d.interface,
                                  "\" is not an interface name (ip link "
                                  "lists them, e.g. \"eth0\"; default "
                                  "\"lo\")"));
  }
  for (size_t i = 0; i < d.peers.size(); ++i) {
    if (d.peers[i].empty() || d.peers[i].size() > 253 ||
        !AllOf(d.peers[i], ".:-_")) {
      bad(absl::StrCat("peers[", i, "]"),
          absl::StrCat("\"", d.peers[i],
                       "\" is not an address or host name (e.g. "
                       "\"10.0.0.2\")"));
    }
  }
  if (!std::isfinite(d.lease_seconds) || d.lease_seconds < 0.2 ||
      d.lease_seconds > 3600) {
    bad("leaseSeconds", absl::StrFormat("%g is out of range; use 0.2..3600",
                                        d.lease_seconds));
  }
  if (!std::isfinite(d.announce_seconds) || d.announce_seconds < 0.05 ||
      d.announce_seconds > d.lease_seconds) {
    bad("announceSeconds",
        absl::StrFormat("%g is out of range; use 0.05..leaseSeconds (%g)",
                        d.announce_seconds, d.lease_seconds));
  }
  if (o.channels.empty()) {
    bad("channels", "empty; list the channels to forward, e.g. "
                    "{\"name\": \"/robot/imu\", \"direction\": \"out\"}");
  }
  std::set<std::pair<std::string, Direction>> seen;
  for (size_t i = 0; i < o.channels.size(); ++i) {
    const BridgedChannel& c = o.channels[i];
    const std::string at = absl::StrCat("channels[", i, "]");
    if (!ValidChannelName(c.name)) {
      bad(at + ".name",
          absl::StrCat("\"", c.name,
                       "\" is not a channel name (absolute, like "
                       "\"/robot/imu\": '/'-separated parts of "
                       "[A-Za-z0-9_.-])"));
    } else if (c.name.rfind("/tether/net/", 0) == 0) {
      bad(at + ".name", absl::StrCat(c.name, " is a bridge status channel; "
                                     "bridges do not forward those"));
    }
    if (!seen.insert({c.name, c.direction}).second) {
      bad(at, absl::StrCat(c.name, " is listed twice as ",
                           ToString(c.direction)));
    }
    if (c.history_depth > kMaxHistoryDepth) {
      bad(at + ".historyDepth",
          absl::StrCat(c.history_depth, " is out of range; use 0 (the "
                       "channel's depth) or 1..", kMaxHistoryDepth));
    }
    if (!std::isfinite(c.deadline_ms) || c.deadline_ms < 0 ||
        c.deadline_ms > 3.6e6) {
      bad(at + ".deadlineMs",
          absl::StrFormat("%g is out of range; use 0 (none) or a period "
                          "in milliseconds up to 3600000",
                          c.deadline_ms));
    }
  }
  if (problems.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(problems, "\n"));
}

absl::StatusOr<BridgeOptions> ParseBridgeConfig(std::string_view json,
                                                const std::string& origin) {
  capnp::MallocMessageBuilder message;
  auto root = message.initRoot<config::Bridge>();
  if (absl::Status s =
          transport::DecodeStrictJson(json, origin, capnp::toDynamic(root));
      !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        s.message(), "\n", origin, ": not a valid net bridge config "
        "(fields and values: net/bridge_config.capnp, example: "
        "net/README.md)"));
  }
  BridgeOptions o;
  o.name = root.getName().cStr();
  o.dds.domain = root.getDomain();
  o.dds.partition = root.getPartition().cStr();
  o.dds.interface = root.getInterface().cStr();
  for (capnp::Text::Reader p : root.getPeers()) o.dds.peers.emplace_back(p);
  o.dds.multicast = root.getMulticast();
  o.dds.lease_seconds = root.getLeaseSeconds();
  o.dds.announce_seconds = root.getAnnounceSeconds();
  for (config::Channel::Reader c : root.getChannels()) {
    BridgedChannel b;
    b.name = c.getName().cStr();
    b.direction =
        c.getDirection() == config::Direction::OUT ? Direction::kOut
                                                   : Direction::kIn;
    switch (c.getReliability()) {
      case config::Reliability::DEFAULT:
        b.reliability = Reliability::kDefault;
        break;
      case config::Reliability::RELIABLE:
        b.reliability = Reliability::kReliable;
        break;
      case config::Reliability::BEST_EFFORT:
        b.reliability = Reliability::kBestEffort;
        break;
    }
    b.history_depth = c.getHistoryDepth();
    b.deadline_ms = c.getDeadlineMs();
    o.channels.push_back(std::move(b));
  }
  if (absl::Status s = ValidateBridgeOptions(o, origin); !s.ok()) return s;
  return o;
}

absl::StatusOr<BridgeOptions> LoadBridgeConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(absl::StrCat(
        "cannot read the net bridge config ", path,
        ": give an existing JSON file (example: net/README.md)"));
  }
  std::stringstream text;
  text << in.rdbuf();
  return ParseBridgeConfig(text.str(), path);
}

std::string CycloneConfigXml(const DdsOptions& dds) {
  const bool loopback = IsLoopback(dds.interface);
  const bool unicast = loopback || !dds.peers.empty() || !dds.multicast;
  std::string xml = absl::StrCat(
      "<General><Interfaces><NetworkInterface name=\"", dds.interface,
      "\"/></Interfaces><AllowMulticast>", unicast ? "false" : "true",
      "</AllowMulticast></General><Discovery>");
  if (unicast) {
    absl::StrAppend(&xml, "<ParticipantIndex>auto</ParticipantIndex><Peers>");
    if (dds.peers.empty()) {
      absl::StrAppend(&xml, "<Peer address=\"127.0.0.1\"/>");
    }
    for (const std::string& p : dds.peers) {
      absl::StrAppend(&xml, "<Peer address=\"", p, "\"/>");
    }
    absl::StrAppend(&xml, "</Peers>");
  }
  absl::StrAppend(
      &xml,
      absl::StrFormat("<SPDPInterval>%dms</SPDPInterval>"
                      "<LeaseDuration>%dms</LeaseDuration>",
                      static_cast<int>(std::lround(dds.announce_seconds * 1e3)),
                      static_cast<int>(std::lround(dds.lease_seconds * 1e3))),
      "</Discovery><SharedMemory><Enable>false</Enable></SharedMemory>",
      "<Tracing><Verbosity>severe</Verbosity>",
      "<OutputFile>stderr</OutputFile></Tracing>");
  return xml;
}

}  // namespace tether::net
