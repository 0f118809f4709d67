#include "ros_bridge/master_link.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "ros/master.h"
#include "ros/network.h"
#include "ros/xmlrpc_manager.h"
#include "xmlrpcpp/XmlRpcClient.h"
#include "xmlrpcpp/XmlRpcValue.h"

namespace tether::ros_bridge {
namespace {

constexpr char kRegistry[] = "/tether/bridges";
constexpr char kGraphParam[] = "/tether/graph";

// One master call that never waits for an absent master.
absl::StatusOr<XmlRpc::XmlRpcValue> Call(const std::string& method,
                                         const XmlRpc::XmlRpcValue& request) {
  XmlRpc::XmlRpcValue response, payload;
  if (!ros::master::execute(method, request, response, payload,
                            /*wait_for_master=*/false)) {
    if (response.valid() && response.getType() == XmlRpc::XmlRpcValue::TypeArray &&
        response.size() >= 2 &&
        response[1].getType() == XmlRpc::XmlRpcValue::TypeString) {
      return absl::NotFoundError(absl::StrCat(
          method, ": ", static_cast<std::string>(response[1])));
    }
    return absl::UnavailableError(absl::StrCat(
        "the ROS master at ", ros::master::getURI(), " does not answer ",
        method));
  }
  return payload;
}

XmlRpc::XmlRpcValue Args(std::initializer_list<std::string> args) {
  XmlRpc::XmlRpcValue v;
  v.setSize(static_cast<int>(args.size()));
  int i = 0;
  for (const std::string& a : args) v[i++] = a;
  return v;
}

std::vector<std::string> Strings(XmlRpc::XmlRpcValue& v) {
  std::vector<std::string> out;
  if (v.getType() != XmlRpc::XmlRpcValue::TypeArray) return out;
  for (int i = 0; i < v.size(); ++i) {
    if (v[i].getType() == XmlRpc::XmlRpcValue::TypeString) {
      out.push_back(static_cast<std::string>(v[i]));
    }
  }
  return out;
}

std::optional<BridgeRecord> ToRecord(XmlRpc::XmlRpcValue& v) {
  if (v.getType() != XmlRpc::XmlRpcValue::TypeStruct ||
      !v.hasMember("domain") || !v.hasMember("graph") || !v.hasMember("pid")) {
    return std::nullopt;
  }
  BridgeRecord r;
  if (v["domain"].getType() != XmlRpc::XmlRpcValue::TypeString ||
      v["graph"].getType() != XmlRpc::XmlRpcValue::TypeString ||
      v["pid"].getType() != XmlRpc::XmlRpcValue::TypeInt) {
    return std::nullopt;
  }
  r.domain = static_cast<std::string>(v["domain"]);
  r.graph = static_cast<std::string>(v["graph"]);
  r.pid = static_cast<int>(v["pid"]);
  return r;
}

}  // namespace

std::string RegistryKey(const std::string& node) {
  std::string key = node;
  while (!key.empty() && key[0] == '/') key.erase(0, 1);
  return absl::StrReplaceAll(key, {{"/", "__"}});
}

uint64_t ProvisionalGraphId(const std::string& master_uri) {
  std::string rest = master_uri;
  if (size_t p = rest.find("://"); p != std::string::npos) rest = rest.substr(p + 3);
  if (size_t p = rest.find('/'); p != std::string::npos) rest = rest.substr(0, p);
  std::string host = rest, port = "11311";
  if (size_t p = rest.rfind(':'); p != std::string::npos) {
    host = rest.substr(0, p);
    port = rest.substr(p + 1);
  }
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &res) == 0 && res != nullptr) {
    char buf[INET_ADDRSTRLEN];
    const auto* in = reinterpret_cast<const sockaddr_in*>(res->ai_addr);
    if (::inet_ntop(AF_INET, &in->sin_addr, buf, sizeof(buf)) != nullptr) {
      host = buf;
    }
    ::freeaddrinfo(res);
  }
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64: offset basis, prime
  for (const char c : absl::StrCat("ros1 ", host, ":", port)) {
    h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  }
  return h == 0 ? 1 : h;
}

uint64_t NewGraphId() {
  std::random_device rd;
  for (;;) {
    const uint64_t id = (static_cast<uint64_t>(rd()) << 32) ^ rd();
    if (id != 0) return id;
  }
}

std::string GraphName(uint64_t id) {
  return absl::StrFormat("%016x", id);
}

std::optional<uint64_t> ParseGraphName(absl::string_view name) {
  if (name.size() != 16) return std::nullopt;
  uint64_t id = 0;
  for (const char c : name) {
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else return std::nullopt;
    id = (id << 4) | static_cast<uint64_t>(d);
  }
  if (id == 0) return std::nullopt;
  return id;
}

absl::StatusOr<uint64_t> MasterLink::GraphParam() const {
  absl::StatusOr<XmlRpc::XmlRpcValue> v = Call("getParam", Args({node_, kGraphParam}));
  if (!v.ok()) return v.status();
  std::optional<uint64_t> id;
  if (v->getType() == XmlRpc::XmlRpcValue::TypeString) {
    id = ParseGraphName(static_cast<std::string>(*v));
  }
  if (!id.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        kGraphParam, " is not a graph id (16 hex digits, not 0)"));
  }
  return *id;
}

absl::Status MasterLink::SetGraphParam(uint64_t id) const {
  return Call("setParam", Args({node_, kGraphParam, GraphName(id)})).status();
}

absl::StatusOr<MasterIdentity> MasterLink::Identity() const {
  absl::StatusOr<XmlRpc::XmlRpcValue> pid = Call("getPid", Args({node_}));
  if (!pid.ok()) return pid.status();
  MasterIdentity id;
  if (pid->getType() == XmlRpc::XmlRpcValue::TypeInt) id.pid = static_cast<int>(*pid);
  absl::StatusOr<XmlRpc::XmlRpcValue> run = Call("getParam", Args({node_, "/run_id"}));
  if (run.ok() && run->getType() == XmlRpc::XmlRpcValue::TypeString) {
    id.run_id = static_cast<std::string>(*run);
  }
  return id;
}

absl::StatusOr<std::map<std::string, TopicInfo>> MasterLink::Topics() const {
  absl::StatusOr<XmlRpc::XmlRpcValue> types = Call("getTopicTypes", Args({node_}));
  if (!types.ok()) return types.status();
  absl::StatusOr<XmlRpc::XmlRpcValue> state = Call("getSystemState", Args({node_}));
  if (!state.ok()) return state.status();
  std::map<std::string, TopicInfo> out;
  for (int i = 0; types->getType() == XmlRpc::XmlRpcValue::TypeArray && i < types->size(); ++i) {
    XmlRpc::XmlRpcValue& t = (*types)[i];
    if (t.getType() != XmlRpc::XmlRpcValue::TypeArray || t.size() != 2) continue;
    out[static_cast<std::string>(t[0])].type = static_cast<std::string>(t[1]);
  }
  if (state->getType() == XmlRpc::XmlRpcValue::TypeArray && state->size() >= 2) {
    for (int kind = 0; kind < 2; ++kind) {
      XmlRpc::XmlRpcValue& list = (*state)[kind];
      for (int i = 0; list.getType() == XmlRpc::XmlRpcValue::TypeArray && i < list.size(); ++i) {
        XmlRpc::XmlRpcValue& entry = list[i];
        if (entry.getType() != XmlRpc::XmlRpcValue::TypeArray || entry.size() != 2) continue;
        TopicInfo& info = out[static_cast<std::string>(entry[0])];
        (kind == 0 ? info.publishers : info.subscribers) = Strings(entry[1]);
      }
    }
  }
  return out;
}

absl::StatusOr<std::string> MasterLink::LookupNode(const std::string& name) const {
  absl::StatusOr<XmlRpc::XmlRpcValue> uri = Call("lookupNode", Args({node_, name}));
  if (!uri.ok()) return uri.status();
  if (uri->getType() != XmlRpc::XmlRpcValue::TypeString) {
    return absl::NotFoundError(absl::StrCat("no URI for node ", name));
  }
  return static_cast<std::string>(*uri);
}

absl::Status MasterLink::Announce(const BridgeRecord& me) const {
  XmlRpc::XmlRpcValue request;
  request[0] = node_;
  request[1] = absl::StrCat(kRegistry, "/", RegistryKey(node_));
  XmlRpc::XmlRpcValue record;
  record["domain"] = me.domain;
  record["graph"] = me.graph;
  record["pid"] = me.pid;
  record["node"] = node_;
  request[2] = record;
  return Call("setParam", request).status();
}

void MasterLink::Withdraw() const {
  (void)Call("deleteParam",
             Args({node_, absl::StrCat(kRegistry, "/", RegistryKey(node_))}));
}

absl::StatusOr<std::optional<BridgeRecord>> MasterLink::FindBridge(
    const std::string& node) const {
  absl::StatusOr<XmlRpc::XmlRpcValue> v = Call(
      "getParam", Args({node_, absl::StrCat(kRegistry, "/", RegistryKey(node))}));
  if (absl::IsNotFound(v.status())) return std::optional<BridgeRecord>();
  if (!v.ok()) return v.status();
  return ToRecord(*v);
}

absl::StatusOr<std::map<std::string, BridgeRecord>> MasterLink::AllBridges()
    const {
  std::map<std::string, BridgeRecord> out;
  absl::StatusOr<XmlRpc::XmlRpcValue> v = Call("getParam", Args({node_, kRegistry}));
  if (absl::IsNotFound(v.status())) return out;
  if (!v.ok()) return v.status();
  if (v->getType() != XmlRpc::XmlRpcValue::TypeStruct) return out;
  for (auto& [key, value] : *v) {
    if (std::optional<BridgeRecord> r = ToRecord(value)) out[key] = *r;
  }
  return out;
}

absl::Status MasterLink::RegisterPublisher(const std::string& topic,
                                           const std::string& type) const {
  return Call("registerPublisher",
              Args({node_, topic, type,
                    ros::XMLRPCManager::instance()->getServerURI()}))
      .status();
}

absl::StatusOr<std::vector<std::string>> MasterLink::RegisterSubscriber(
    const std::string& topic, const std::string& type) const {
  absl::StatusOr<XmlRpc::XmlRpcValue> v =
      Call("registerSubscriber",
           Args({node_, topic, type,
                 ros::XMLRPCManager::instance()->getServerURI()}));
  if (!v.ok()) return v.status();
  return Strings(*v);
}

absl::Status MasterLink::UpdatePublishers(
    const std::string& topic, const std::vector<std::string>& uris) const {
  std::string host;
  uint32_t port = 0;
  const std::string self = ros::XMLRPCManager::instance()->getServerURI();
  if (!ros::network::splitURI(self, host, port)) {
    return absl::InternalError(absl::StrCat("cannot parse own URI ", self));
  }
  XmlRpc::XmlRpcClient client(host.c_str(), static_cast<int>(port), "/");
  XmlRpc::XmlRpcValue params, result;
  params[0] = node_;
  params[1] = topic;
  XmlRpc::XmlRpcValue list;
  list.setSize(static_cast<int>(uris.size()));
  for (size_t i = 0; i < uris.size(); ++i) list[static_cast<int>(i)] = uris[i];
  params[2] = list;
  const bool ok = client.execute("publisherUpdate", params, result);
  client.close();
  if (!ok) {
    return absl::UnavailableError(
        absl::StrCat("publisherUpdate to own XML-RPC server ", self, " failed"));
  }
  return absl::OkStatus();
}

}  // namespace tether::ros_bridge
