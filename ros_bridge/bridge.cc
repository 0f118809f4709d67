#include "ros_bridge/bridge.h"

#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "capnp/dynamic.h"
#include "capnp/message.h"
#include "kj/exception.h"
#include "ros/ros.h"
#include "ros_bridge/bridge_status.capnp.h"
#include "ros_bridge/channel_watcher.h"
#include "ros_bridge/master_link.h"
#include "ros_bridge/outbox.h"
#include "ros_bridge/ros1msg/envelope.h"
#include "ros_bridge/ros1msg/typed.h"
#include "topic_tools/shape_shifter.h"
#include "transport/channel_handle.h"
#include "transport/config.capnp.h"
#include "transport/framing.h"
#include "transport/raw_endpoints.h"

namespace tether::ros_bridge {

namespace {

using Clock = std::chrono::steady_clock;

struct Counters {
  std::atomic<uint64_t> forwarded{0};
  std::atomic<uint64_t> dropped_full{0};
  std::atomic<uint64_t> too_large{0};
  std::atomic<uint64_t> loop_skipped{0};
  std::atomic<uint64_t> malformed{0};
};

// Last error of a route, written by callback threads, read by status.
class ErrorText {
 public:
  void Set(std::string text) {
    std::lock_guard<std::mutex> lock(mu_);
    text_ = std::move(text);
  }
  std::string Get() const {
    std::lock_guard<std::mutex> lock(mu_);
    return text_;
  }

 private:
  mutable std::mutex mu_;
  std::string text_;
};

// ROS topic -> tether channel.
struct RosToTether {
  std::string ros_topic;
  std::string channel;
  const ros1msg::CommonType* typed = nullptr;
  std::unique_ptr<transport::ChannelHandle> handle;
  std::unique_ptr<transport::RawPublisher> publisher;
  std::unique_ptr<transport::BuildArena> arena;  // the publisher's
  ros::Subscriber subscriber;  // main thread only
  Counters counters;
  ErrorText error;
  // Callback thread only (roscpp serialises one subscription's callbacks).
  std::vector<uint8_t> scratch;
  std::map<std::string, std::vector<uint8_t>> last_latched;  // by callerid
};

// tether channel -> ROS topic.
struct TetherToRos {
  std::string channel;
  std::string ros_topic;
  const ros1msg::CommonType* typed = nullptr;
  bool latch = false;
  int outbox_topic = -1;
  std::unique_ptr<ChannelWatcher> watcher;
  Counters counters;
  ErrorText error;
  // Guarded by mu: the ROS publication (publisher thread; the main thread
  // advertises typed ones and registers them again).
  std::mutex mu;
  ros::Publisher publisher;
  std::string advertised_type;
  std::string advertised_md5;
  bool advertised_latch = false;
  topic_tools::ShapeShifter shape;  // publisher thread only
};

bool UnderPrefix(const std::string& name, const std::string& prefix) {
  if (prefix == "/" || prefix.empty()) return absl::StartsWith(name, "/");
  return name == prefix || absl::StartsWith(name, prefix + "/");
}

// /sim/a with ros prefix /sim and tether prefix /ros/sim -> /ros/sim/a.
std::string MapName(const std::string& name, const std::string& from,
                    const std::string& to) {
  std::string rest = (from == "/" || from.empty()) ? name : name.substr(from.size());
  if (to == "/" || to.empty()) return rest.empty() ? "/" : rest;
  return rest.empty() ? to : to + rest;
}

std::string Hostname() {
  char buf[256] = {};
  ::gethostname(buf, sizeof(buf) - 1);
  return buf;
}

bool RosToTetherOn(Direction d) { return d != Direction::kTetherToRos; }
bool TetherToRosOn(Direction d) { return d != Direction::kRosToTether; }

}  // namespace

class Bridge::Impl {
 public:
  explicit Impl(BridgeOptions options)
      : options_(std::move(options)),
        outbox_(options_.outbox_depth == 0 ? 1 : options_.outbox_depth) {}

  ~Impl() { Shutdown(); }

  absl::Status Init();
  int Run();

 private:
  void Log(const std::string& line) {
    if (options_.log == nullptr) return;
    std::lock_guard<std::mutex> lock(log_mu_);
    *options_.log << "ros-bridge: " << line << "\n";
    options_.log->flush();
  }
  void Note(const std::string& line) {
    {
      std::lock_guard<std::mutex> lock(note_mu_);
      note_ = line;
    }
    Log(line);
  }

  absl::StatusOr<std::unique_ptr<transport::ChannelHandle>> OpenChannel(
      const std::string& name, uint64_t type_id, uint32_t max_size,
      uint32_t depth);

  absl::Status AddRosToTether(const std::string& ros_topic,
                              const std::string& channel,
                              const std::string& type, uint32_t max_size,
                              uint32_t depth);
  absl::Status AddTetherToRos(const std::string& channel,
                              const std::string& ros_topic,
                              const std::string& type, bool latch,
                              uint32_t max_size, uint32_t depth);

  void Tick();
  void CheckMaster();
  void Discover();
  void SubscribePending();
  void AdvertiseTyped(TetherToRos* r);
  void RegisterAgain();
  void PublishStatus();

  void OnRosMessage(
      RosToTether* r,
      const ros::MessageEvent<topic_tools::ShapeShifter const>& event);
  void OnTetherMessage(TetherToRos* r, const transport::RawMessage& m);
  bool FromSameDomainBridge(const std::string& callerid);
  void PublisherThread();
  void Shutdown();

  BridgeOptions options_;
  transport::SchemaRegistry schemas_;
  std::string graph_;
  std::string domain_;
  std::unique_ptr<MasterLink> link_;
  std::unique_ptr<ros::NodeHandle> nh_;
  std::unique_ptr<ros::AsyncSpinner> spinner_;

  // Routes: added by the main thread only; never removed while running.
  std::mutex routes_mu_;
  std::vector<std::unique_ptr<RosToTether>> to_tether_;
  std::vector<std::unique_ptr<TetherToRos>> to_ros_;
  std::vector<TetherToRos*> by_outbox_topic_;
  std::set<std::string> to_tether_channels_;  // made by this bridge
  std::map<std::string, RosToTether*> to_tether_by_topic_;
  std::map<std::string, TetherToRos*> to_ros_by_channel_;

  Outbox outbox_;
  std::thread publisher_thread_;
  std::atomic<bool> shut_down_{false};

  // Master state (main thread).
  bool master_up_ = false;
  bool ever_up_ = false;
  MasterIdentity identity_;
  uint32_t master_changes_ = 0;
  uint32_t reregistrations_ = 0;
  Clock::time_point waiting_since_ = Clock::now();
  Clock::time_point last_wait_log_{};
  // Publisher URIs of the topics we subscribe (for registering again).
  std::map<std::string, std::set<std::string>> publisher_uris_;
  std::map<std::string, std::string> node_uris_;

  // Bridges of this tether domain, by node name (callback threads).
  std::mutex bridges_mu_;
  std::map<std::string, std::pair<bool, Clock::time_point>> bridge_cache_;
  std::set<uint32_t> same_graph_pids_;  // guarded by bridges_mu_

  std::unique_ptr<transport::ChannelHandle> status_handle_;
  std::unique_ptr<transport::RawPublisher> status_publisher_;
  std::unique_ptr<transport::BuildArena> status_arena_;

  std::mutex log_mu_;
  std::mutex note_mu_;
  std::string note_;
};

absl::Status Bridge::Impl::Init() {
  ros1msg::RegisterRosSchemas(&schemas_);
  schemas_.Register<BridgeStatus>();
  domain_ = absl::StrCat(Hostname(), ":", options_.channels.root, "/",
                         options_.channels.instance);

  for (const PairOptions& p : options_.pairs) {
    const std::string channel = p.tether.empty() ? p.ros : p.tether;
    if (p.ros.empty() || p.ros[0] != '/') {
      return absl::InvalidArgumentError(absl::StrCat(
          "pair ", p.ros, "=", channel,
          ": the ROS topic must be absolute (start with '/')"));
    }
    if (!p.type.empty() && ros1msg::FindCommonType(p.type) == nullptr) {
      std::string known;
      for (const ros1msg::CommonType& t : ros1msg::CommonTypes()) {
        absl::StrAppend(&known, known.empty() ? "" : ", ", t.ros_type);
      }
      return absl::InvalidArgumentError(absl::StrCat(
          "pair ", p.ros, "=", channel, ": type ", p.type,
          " has no typed twin; leave the type out (the channel then carries "
          "envelopes of any type) or use one of: ", known));
    }
  }

  // roscpp: once per process. Signals are the caller's (StopSignals).
  std::map<std::string, std::string> remappings;
  if (!options_.master_uri.empty()) remappings["__master"] = options_.master_uri;
  ros::init(remappings, options_.node_name,
            ros::init_options::NoSigintHandler | ros::init_options::NoRosout);
  // A master call that cannot get through fails after a second instead of
  // retrying forever (calls we make ourselves never wait at all).
  ros::master::setRetryTimeout(ros::WallDuration(1.0));
  graph_ = GraphId(ros::master::getURI());
  link_ = std::make_unique<MasterLink>(ros::this_node::getName());
  nh_ = std::make_unique<ros::NodeHandle>();  // ros::start()
  spinner_ = std::make_unique<ros::AsyncSpinner>(2);
  spinner_->start();
  Log(absl::StrCat("node ", ros::this_node::getName(), ", master ",
                   ros::master::getURI(), " (graph ", graph_,
                   "), tether channels in ", options_.channels.root, "/",
                   options_.channels.instance));

  for (const PairOptions& p : options_.pairs) {
    const std::string channel = p.tether.empty() ? p.ros : p.tether;
    const uint32_t size = p.max_size != 0 ? p.max_size : options_.max_size;
    const uint32_t depth = p.queue_depth != 0 ? p.queue_depth : options_.queue_depth;
    if (RosToTetherOn(p.direction)) {
      if (absl::Status s = AddRosToTether(p.ros, channel, p.type, size, depth);
          !s.ok()) {
        return s;
      }
    }
    if (TetherToRosOn(p.direction)) {
      if (absl::Status s =
              AddTetherToRos(channel, p.ros, p.type, p.latch, size, depth);
          !s.ok()) {
        return s;
      }
    }
  }

  if (options_.status_channel) {
    const std::string name = absl::StrCat(
        "/tether/ros_bridge/", RegistryKey(ros::this_node::getName()),
        "/status");
    absl::StatusOr<std::unique_ptr<transport::ChannelHandle>> h =
        OpenChannel(name, capnp::typeId<BridgeStatus>(), 64 << 10, 8);
    if (!h.ok()) return h.status();
    status_handle_ = std::move(*h);
    absl::StatusOr<std::unique_ptr<transport::RawPublisher>> p =
        transport::RawPublisher::Create(status_handle_.get());
    if (!p.ok()) return p.status();
    status_publisher_ = std::move(*p);
    status_arena_ = std::make_unique<transport::BuildArena>(
        status_handle_->params().slot_size);
  }
  publisher_thread_ = std::thread([this] { PublisherThread(); });
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<transport::ChannelHandle>>
Bridge::Impl::OpenChannel(const std::string& name, uint64_t type_id,
                          uint32_t max_size, uint32_t depth) {
  ChannelShape shape;
  absl::StatusOr<ChannelShape> existing = ShapeOf(options_.channels, name);
  if (existing.ok()) {
    if (existing->type_id != type_id) {
      return absl::FailedPreconditionError(absl::StrCat(
          "channel ", name, " exists with type ",
          schemas_.NameOf(existing->type_id), ", but the bridge needs ",
          schemas_.NameOf(type_id),
          " there; use another channel name or remove it (tether clean)"));
    }
    shape = *existing;
  } else {
    shape.name = name;
    shape.type_id = type_id;
    shape.max_size = max_size;
    shape.queue_depth = depth;
  }
  absl::StatusOr<transport::StackConfig> stack = OneChannelStack(shape, schemas_);
  if (!stack.ok()) return stack.status();
  return transport::ChannelHandle::Create(options_.channels,
                                          stack->channels()[0], schemas_);
}

absl::Status Bridge::Impl::AddRosToTether(const std::string& ros_topic,
                                          const std::string& channel,
                                          const std::string& type,
                                          uint32_t max_size, uint32_t depth) {
  if (to_tether_by_topic_.count(ros_topic) > 0) return absl::OkStatus();
  auto r = std::make_unique<RosToTether>();
  r->ros_topic = ros_topic;
  r->channel = channel;
  r->typed = type.empty() ? nullptr : ros1msg::FindCommonType(type);
  const uint64_t type_id = r->typed != nullptr
                               ? r->typed->schema.getProto().getId()
                               : ros1msg::EnvelopeTypeId();
  absl::StatusOr<std::unique_ptr<transport::ChannelHandle>> h =
      OpenChannel(channel, type_id, max_size, depth);
  if (!h.ok()) return h.status();
  r->handle = std::move(*h);
  absl::StatusOr<std::unique_ptr<transport::RawPublisher>> p =
      transport::RawPublisher::Create(r->handle.get());
  if (!p.ok()) return p.status();
  r->publisher = std::move(*p);
  r->arena = std::make_unique<transport::BuildArena>(r->handle->params().slot_size);
  Log(absl::StrCat("ROS ", ros_topic, " -> tether ", channel, " (",
                   r->typed != nullptr ? r->typed->schema.getProto().getDisplayName().cStr()
                                       : "RosEnvelope",
                   ")"));
  std::lock_guard<std::mutex> lock(routes_mu_);
  to_tether_channels_.insert(channel);
  to_tether_by_topic_[ros_topic] = r.get();
  to_tether_.push_back(std::move(r));
  return absl::OkStatus();
}

absl::Status Bridge::Impl::AddTetherToRos(const std::string& channel,
                                          const std::string& ros_topic,
                                          const std::string& type, bool latch,
                                          uint32_t max_size, uint32_t depth) {
  if (to_ros_by_channel_.count(channel) > 0) return absl::OkStatus();
  auto r = std::make_unique<TetherToRos>();
  r->channel = channel;
  r->ros_topic = ros_topic;
  r->latch = latch;
  uint64_t type_id = ros1msg::EnvelopeTypeId();
  if (!type.empty()) {
    r->typed = ros1msg::FindCommonType(type);
    type_id = r->typed->schema.getProto().getId();
  }
  ChannelShape shape;
  absl::StatusOr<ChannelShape> existing = ShapeOf(options_.channels, channel);
  if (existing.ok()) {
    shape = *existing;
    if (type.empty() && shape.type_id != type_id) {
      // An existing typed channel: its type says which twin it is.
      r->typed = ros1msg::FindCommonTypeById(shape.type_id);
      if (r->typed == nullptr) {
        return absl::FailedPreconditionError(absl::StrCat(
            "channel ", channel, " carries ", schemas_.NameOf(shape.type_id),
            ", which is neither a RosEnvelope nor a typed twin of a ROS type; "
            "the bridge cannot publish it into ROS"));
      }
    } else if (shape.type_id != type_id) {
      return absl::FailedPreconditionError(absl::StrCat(
          "channel ", channel, " carries ", schemas_.NameOf(shape.type_id),
          ", not ", schemas_.NameOf(type_id), " as the pair says"));
    }
  } else {
    shape.name = channel;
    shape.type_id = type_id;
    shape.max_size = max_size;
    shape.queue_depth = depth;
  }
  r->outbox_topic = outbox_.AddTopic();
  TetherToRos* raw = r.get();
  ChannelWatcher::Callbacks callbacks;
  callbacks.on_message = [this, raw](const transport::RawMessage& m) {
    OnTetherMessage(raw, m);
  };
  callbacks.latest_at_start = [this, raw](const transport::RawMessage& m) {
    // Only a latched message is worth re-sending from before we started.
    if (raw->typed != nullptr && !raw->latch) return;
    if (raw->typed == nullptr) {
      ros1msg::EnvelopeView v;
      if (!ros1msg::ReadEnvelope(m.bytes, &v).ok() || !v.header.latching) return;
    }
    OnTetherMessage(raw, m);
  };
  {
    std::lock_guard<std::mutex> lock(routes_mu_);
    by_outbox_topic_.push_back(raw);
  }
  absl::StatusOr<std::unique_ptr<ChannelWatcher>> w = ChannelWatcher::Start(
      options_.channels, shape, schemas_, std::move(callbacks));
  if (!w.ok()) return w.status();
  r->watcher = std::move(*w);
  Log(absl::StrCat("tether ", channel, " -> ROS ", ros_topic, " (",
                   r->typed != nullptr ? r->typed->ros_type : "any type, from envelopes",
                   ")"));
  std::lock_guard<std::mutex> lock(routes_mu_);
  to_ros_by_channel_[channel] = raw;
  to_ros_.push_back(std::move(r));
  return absl::OkStatus();
}

int Bridge::Impl::Run() {
  auto next_tick = Clock::now();
  auto next_status = Clock::now();
  for (;;) {
    const auto now = Clock::now();
    if (now >= next_tick) {
      Tick();
      next_tick = now + std::chrono::milliseconds(options_.discovery_period_ms);
    }
    if (now >= next_status) {
      PublishStatus();
      next_status = now + std::chrono::milliseconds(options_.status_period_ms);
    }
    const auto wake = std::min(next_tick, next_status);
    const int timeout_ms = static_cast<int>(std::max<int64_t>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(
               wake - Clock::now())
                   .count() +
               1));
    pollfd pfd{options_.stop_fd, POLLIN, 0};
    const int n = ::poll(&pfd, options_.stop_fd >= 0 ? 1 : 0, timeout_ms);
    if (n > 0 && (pfd.revents & POLLIN) != 0) break;
  }
  Log("stopping");
  PublishStatus();
  Shutdown();
  return 0;
}

void Bridge::Impl::Tick() {
  CheckMaster();
  if (!master_up_) return;
  SubscribePending();
  Discover();
}

void Bridge::Impl::CheckMaster() {
  absl::StatusOr<MasterIdentity> id = link_->Identity();
  if (!id.ok()) {
    if (master_up_) {
      master_up_ = false;
      ++master_changes_;
      waiting_since_ = Clock::now();
      Note(absl::StrCat("master ", ros::master::getURI(),
                        " went away; forwarding over existing connections "
                        "goes on; waiting for it to come back"));
    } else if (Clock::now() - last_wait_log_ > std::chrono::seconds(5)) {
      last_wait_log_ = Clock::now();
      Log(absl::StrCat(
          "waiting for the ROS master at ", ros::master::getURI(), " (",
          std::chrono::duration_cast<std::chrono::seconds>(Clock::now() -
                                                           waiting_since_)
              .count(),
          " s; start roscore, or check ROS_MASTER_URI / --master)"));
    }
    return;
  }
  if (master_up_ && *id == identity_) return;
  const bool first = !ever_up_;
  const bool replaced = ever_up_ && !(*id == identity_);
  if (ever_up_ && master_up_) ++master_changes_;  // replaced between checks
  master_up_ = true;
  ever_up_ = true;
  const MasterIdentity old = identity_;
  identity_ = *id;
  BridgeRecord me{domain_, graph_, static_cast<int>(::getpid())};
  if (absl::Status s = link_->Announce(me); !s.ok()) {
    Log(absl::StrCat("could not list this bridge under /tether/bridges: ",
                     s.message()));
  }
  if (first) {
    Note(absl::StrCat("joined the ROS master at ", ros::master::getURI(),
                      " (pid ", id->pid, ")"));
    for (auto& r : to_ros_) {
      if (r->typed != nullptr) AdvertiseTyped(r.get());
    }
    return;
  }
  if (replaced) {
    RegisterAgain();
    Note(absl::StrCat("master ", ros::master::getURI(), " restarted (pid ",
                      old.pid, " -> ", id->pid,
                      "); registered every topic again (", reregistrations_,
                      " time(s) so far)"));
  } else {
    Note(absl::StrCat("master ", ros::master::getURI(), " is back (pid ",
                      id->pid, ")"));
  }
}

void Bridge::Impl::RegisterAgain() {
  ++reregistrations_;
  std::vector<RosToTether*> subs;
  std::vector<TetherToRos*> pubs;
  {
    std::lock_guard<std::mutex> lock(routes_mu_);
    for (auto& r : to_tether_) subs.push_back(r.get());
    for (auto& r : to_ros_) pubs.push_back(r.get());
  }
  for (TetherToRos* r : pubs) {
    std::lock_guard<std::mutex> lock(r->mu);
    if (!r->publisher) continue;
    if (absl::Status s = link_->RegisterPublisher(r->ros_topic, r->advertised_type);
        !s.ok()) {
      r->error.Set(absl::StrCat("registering again: ", s.message()));
    }
  }
  for (RosToTether* r : subs) {
    if (!r->subscriber) continue;
    absl::StatusOr<std::vector<std::string>> uris =
        link_->RegisterSubscriber(r->ros_topic, "*");
    if (!uris.ok()) {
      r->error.Set(absl::StrCat("registering again: ", uris.status().message()));
      continue;
    }
    // Keep the publishers we had (the new master does not know them yet)
    // and connect to the ones it knows.
    std::set<std::string> all = publisher_uris_[r->ros_topic];
    all.insert(uris->begin(), uris->end());
    if (absl::Status s = link_->UpdatePublishers(
            r->ros_topic, std::vector<std::string>(all.begin(), all.end()));
        !s.ok()) {
      r->error.Set(std::string(s.message()));
    }
  }
}

void Bridge::Impl::AdvertiseTyped(TetherToRos* r) {
  std::lock_guard<std::mutex> lock(r->mu);
  if (r->publisher) return;
  const std::string type(r->typed->ros_type);
  const std::string md5(r->typed->md5sum);
  r->shape.morph(md5, type, std::string(r->typed->definition),
                 r->latch ? "1" : "0");
  r->publisher = r->shape.advertise(*nh_, r->ros_topic, options_.ros_queue_size,
                                    r->latch);
  r->advertised_type = type;
  r->advertised_md5 = md5;
  r->advertised_latch = r->latch;
}

void Bridge::Impl::SubscribePending() {
  std::vector<RosToTether*> pending;
  {
    std::lock_guard<std::mutex> lock(routes_mu_);
    for (auto& r : to_tether_) {
      if (!r->subscriber) pending.push_back(r.get());
    }
  }
  for (RosToTether* r : pending) {
    ros::SubscribeOptions ops;
    ops.template initByFullCallbackType<
        const ros::MessageEvent<topic_tools::ShapeShifter const>&>(
        r->ros_topic, options_.ros_queue_size,
        [this, r](const ros::MessageEvent<topic_tools::ShapeShifter const>& e) {
          OnRosMessage(r, e);
        });
    ops.transport_hints = ros::TransportHints().tcpNoDelay();
    r->subscriber = nh_->subscribe(ops);
    if (!r->subscriber) {
      r->error.Set("subscribing failed (master unreachable?); retrying");
    }
  }
}

void Bridge::Impl::Discover() {
  absl::StatusOr<std::map<std::string, TopicInfo>> topics = link_->Topics();
  if (!topics.ok()) return;
  const std::string me = ros::this_node::getName();
  absl::StatusOr<std::map<std::string, BridgeRecord>> bridges =
      link_->AllBridges();
  std::set<std::string> same_domain;
  if (bridges.ok()) {
    std::lock_guard<std::mutex> lock(bridges_mu_);
    same_graph_pids_.clear();
    for (const auto& [key, rec] : *bridges) {
      if (rec.domain == domain_) same_domain.insert(key);
      if (rec.graph == graph_ && rec.domain == domain_) {
        same_graph_pids_.insert(static_cast<uint32_t>(rec.pid));
      }
    }
  }
  // Publishers of subscribed topics, for registering again after a restart.
  for (auto& [topic, info] : *topics) {
    if (to_tether_by_topic_.count(topic) == 0) continue;
    std::set<std::string>& uris = publisher_uris_[topic];
    uris.clear();
    for (const std::string& node : info.publishers) {
      if (node == me) continue;
      auto it = node_uris_.find(node);
      if (it == node_uris_.end()) {
        absl::StatusOr<std::string> uri = link_->LookupNode(node);
        if (!uri.ok()) continue;
        it = node_uris_.emplace(node, *uri).first;
      }
      uris.insert(it->second);
    }
  }
  if (node_uris_.size() > 4096) node_uris_.clear();

  for (const PrefixOptions& p : options_.prefixes) {
    // ROS side: topics with a publisher that is not a bridge of ours.
    for (const auto& [topic, info] : *topics) {
      if (!UnderPrefix(topic, p.ros)) continue;
      bool real_publisher = false;
      for (const std::string& node : info.publishers) {
        if (node != me && same_domain.count(RegistryKey(node)) == 0) {
          real_publisher = true;
        }
      }
      if (!real_publisher) continue;
      const std::string channel = MapName(topic, p.ros, p.tether);
      if (RosToTetherOn(p.direction) && to_tether_by_topic_.count(topic) == 0) {
        if (absl::Status s = AddRosToTether(topic, channel, "", options_.max_size,
                                            options_.queue_depth);
            !s.ok()) {
          Note(absl::StrCat("cannot bridge ROS ", topic, ": ", s.message()));
        }
      }
      if (p.direction == Direction::kBoth && to_ros_by_channel_.count(channel) == 0 &&
          to_tether_channels_.count(channel) > 0) {
        if (absl::Status s = AddTetherToRos(channel, topic, "", false,
                                            options_.max_size, options_.queue_depth);
            !s.ok()) {
          Note(absl::StrCat("cannot bridge tether ", channel, ": ", s.message()));
        }
      }
    }
    // tether side: channels of envelopes or twins under the prefix.
    if (!TetherToRosOn(p.direction)) continue;
    absl::StatusOr<std::vector<transport::ChannelSummary>> channels =
        transport::ListChannels(options_.channels);
    if (!channels.ok()) continue;
    for (const transport::ChannelSummary& c : *channels) {
      if (!c.error.empty() || !UnderPrefix(c.name, p.tether)) continue;
      if (to_ros_by_channel_.count(c.name) > 0) continue;
      const bool envelope = c.type_id == ros1msg::EnvelopeTypeId();
      const ros1msg::CommonType* twin = ros1msg::FindCommonTypeById(c.type_id);
      if (!envelope && twin == nullptr) continue;
      // Channels this bridge fills from ROS go back only in "both" mode
      // (then loop prevention keeps ROS's own messages out).
      if (to_tether_channels_.count(c.name) > 0 && p.direction != Direction::kBoth) {
        continue;
      }
      const std::string topic = MapName(c.name, p.tether, p.ros);
      if (absl::Status s = AddTetherToRos(
              c.name, topic, twin != nullptr ? std::string(twin->ros_type) : "",
              false, c.max_size, c.params.queue_depth);
          !s.ok()) {
        Note(absl::StrCat("cannot bridge tether ", c.name, ": ", s.message()));
        continue;
      }
      if (twin != nullptr) AdvertiseTyped(to_ros_by_channel_[c.name]);
      if (p.direction == Direction::kBoth && to_tether_by_topic_.count(topic) == 0 &&
          twin == nullptr) {
        if (absl::Status s = AddRosToTether(topic, c.name, "", c.max_size,
                                            c.params.queue_depth);
            !s.ok()) {
          Note(absl::StrCat("cannot bridge ROS ", topic, ": ", s.message()));
        }
      }
    }
  }
  SubscribePending();
}

bool Bridge::Impl::FromSameDomainBridge(const std::string& callerid) {
  const auto now = Clock::now();
  {
    std::lock_guard<std::mutex> lock(bridges_mu_);
    auto it = bridge_cache_.find(callerid);
    if (it != bridge_cache_.end() &&
        (it->second.first || now - it->second.second < std::chrono::seconds(2))) {
      return it->second.first;
    }
  }
  // First message from this publisher (or a stale "not a bridge"): ask the
  // master (fails fast when it is away: then not a bridge).
  absl::StatusOr<std::optional<BridgeRecord>> rec = link_->FindBridge(callerid);
  const bool same = rec.ok() && rec->has_value() && (*rec)->domain == domain_;
  std::lock_guard<std::mutex> lock(bridges_mu_);
  if (bridge_cache_.size() > 4096) bridge_cache_.clear();
  bridge_cache_[callerid] = {same, now};
  return same;
}

void Bridge::Impl::OnRosMessage(
    RosToTether* r,
    const ros::MessageEvent<topic_tools::ShapeShifter const>& event) {
  const std::string& callerid = event.getPublisherName();
  if (callerid == link_->node() || FromSameDomainBridge(callerid)) {
    r->counters.loop_skipped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const topic_tools::ShapeShifter& m = *event.getConstMessage();
  const ros::M_string& header = event.getConnectionHeader();
  auto latching_it = header.find("latching");
  const bool latching = latching_it != header.end() && latching_it->second == "1";
  const int64_t receive_ns = static_cast<int64_t>(event.getReceiptTime().toNSec());
  const uint32_t size = m.size();

  if (latching || r->typed != nullptr) {
    r->scratch.resize(size);
    ros::serialization::OStream os(r->scratch.data(), size);
    m.write(os);
  }
  if (latching) {
    // A latched publisher sends its message again on every new connection
    // (e.g. after we subscribed again to a restarted master): not news.
    std::vector<uint8_t>& last = r->last_latched[callerid];
    if (last == r->scratch) {
      r->counters.loop_skipped.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    last = r->scratch;
  }

  std::span<std::byte> loan = r->publisher->Loan();
  if (loan.empty()) {
    r->counters.dropped_full.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  transport::FinishResult finish;
  if (r->typed != nullptr) {
    if (m.getMD5Sum() != r->typed->md5sum) {
      r->counters.malformed.fetch_add(1, std::memory_order_relaxed);
      r->error.Set(absl::StrCat(callerid, " publishes ", m.getDataType(),
                                " (md5 ", m.getMD5Sum(), ") on ", r->ros_topic,
                                "; the channel is typed ", r->typed->ros_type,
                                " (md5 ", r->typed->md5sum, ")"));
      return;
    }
    transport::SlotMessageBuilder builder(r->arena.get(), loan, r->channel);
    absl::Status s;
    try {
      capnp::DynamicStruct::Builder root =
          builder.initRoot<capnp::DynamicStruct>(r->typed->schema);
      s = ros1msg::RosToCapnp(*r->typed->parsed, r->scratch, root);
    } catch (const kj::Exception& e) {
      s = absl::InternalError(e.getDescription().cStr());
    }
    finish = builder.Finish();
    if (!s.ok() && finish.ok()) {
      r->counters.malformed.fetch_add(1, std::memory_order_relaxed);
      r->error.Set(std::string(s.message()));
      return;
    }
  } else {
    ros1msg::EnvelopeHeader h;
    h.type = m.getDataType();
    h.md5sum = m.getMD5Sum();
    h.definition = m.getMessageDefinition();
    h.latching = latching;
    h.callerid = callerid;
    h.topic = r->ros_topic;
    h.receive_time_ns = receive_ns;
    h.origin_graph = graph_;
    h.origin_bridge = link_->node();
    const bool have_bytes = latching;
    finish = ros1msg::BuildEnvelope(r->arena.get(), loan, r->channel, h, size,
                                    [&](std::span<uint8_t> out) {
                                      if (have_bytes) {
                                        std::memcpy(out.data(), r->scratch.data(), size);
                                        return;
                                      }
                                      ros::serialization::OStream os(out.data(), out.size());
                                      m.write(os);
                                    });
  }
  if (!finish.ok()) {
    r->counters.too_large.fetch_add(1, std::memory_order_relaxed);
    r->error.Set(finish.ErrorMessage());
    return;
  }
  const transport::PublishResult sent =
      r->publisher->Send(finish.size, nullptr, finish.offset);
  if (sent.status != transport::PublishStatus::kOk) {
    r->counters.dropped_full.fetch_add(1, std::memory_order_relaxed);
    r->error.Set(absl::StrCat("send: ", transport::ToString(sent.status)));
    return;
  }
  r->counters.forwarded.fetch_add(1, std::memory_order_relaxed);
}

void Bridge::Impl::OnTetherMessage(TetherToRos* r,
                                   const transport::RawMessage& m) {
  // Our own ROS -> tether publisher on this channel ("both").
  if (m.context.publisher_pid == static_cast<uint32_t>(::getpid())) {
    r->counters.loop_skipped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  std::unique_ptr<OutboxItem> item = outbox_.Acquire(r->outbox_topic);
  if (r->typed != nullptr) {
    {
      // Typed messages carry no origin: skip those a bridge of this graph
      // published (it took them from this graph).
      std::lock_guard<std::mutex> lock(bridges_mu_);
      if (same_graph_pids_.count(m.context.publisher_pid) > 0) {
        r->counters.loop_skipped.fetch_add(1, std::memory_order_relaxed);
        return;
      }
    }
    transport::SlotMessageReader reader(m.bytes);
    absl::Status s = absl::InvalidArgumentError(
        transport::FramingStatusName(reader.status()));
    if (reader.ok()) {
      try {
        s = ros1msg::CapnpToRos(
            *r->typed->parsed,
            reader.getRoot<capnp::DynamicStruct>(r->typed->schema), &item->data);
      } catch (const kj::Exception& e) {
        s = absl::InvalidArgumentError(e.getDescription().cStr());
      }
    }
    if (!s.ok()) {
      r->counters.malformed.fetch_add(1, std::memory_order_relaxed);
      r->error.Set(absl::StrCat("queue index ", m.context.queue_index, ": ",
                                s.message()));
      outbox_.Recycle(r->outbox_topic, std::move(item));
      return;
    }
    item->type = std::string(r->typed->ros_type);
    item->md5sum = std::string(r->typed->md5sum);
    item->definition = std::string(r->typed->definition);
    item->latching = r->latch;
  } else {
    ros1msg::EnvelopeView v;
    if (absl::Status s = ros1msg::ReadEnvelope(m.bytes, &v); !s.ok()) {
      r->counters.malformed.fetch_add(1, std::memory_order_relaxed);
      r->error.Set(absl::StrCat("queue index ", m.context.queue_index, ": ",
                                s.message()));
      outbox_.Recycle(r->outbox_topic, std::move(item));
      return;
    }
    if (v.header.origin_graph == graph_) {
      // It came from this ROS graph: ROS has it already.
      r->counters.loop_skipped.fetch_add(1, std::memory_order_relaxed);
      outbox_.Recycle(r->outbox_topic, std::move(item));
      return;
    }
    if (v.header.type.empty() || v.header.md5sum.empty()) {
      r->counters.malformed.fetch_add(1, std::memory_order_relaxed);
      r->error.Set("an envelope without type or md5sum cannot go into ROS");
      outbox_.Recycle(r->outbox_topic, std::move(item));
      return;
    }
    item->data.assign(v.data.begin(), v.data.end());
    item->type.assign(v.header.type.data(), v.header.type.size());
    item->md5sum.assign(v.header.md5sum.data(), v.header.md5sum.size());
    item->definition.assign(v.header.definition.data(), v.header.definition.size());
    item->latching = v.header.latching || r->latch;
  }
  outbox_.Push(r->outbox_topic, std::move(item));
}

void Bridge::Impl::PublisherThread() {
  for (;;) {
    int topic = -1;
    std::unique_ptr<OutboxItem> item = outbox_.Pop(200, &topic);
    if (item == nullptr) {
      if (shut_down_) return;
      continue;
    }
    TetherToRos* r;
    {
      std::lock_guard<std::mutex> lock(routes_mu_);
      r = by_outbox_topic_.at(topic);
    }
    {
      std::lock_guard<std::mutex> lock(r->mu);
      if (!r->publisher || r->advertised_type != item->type ||
          r->advertised_md5 != item->md5sum ||
          r->advertised_latch != item->latching) {
        if (r->publisher) {
          r->error.Set(absl::StrCat("type changed from ", r->advertised_type,
                                    " to ", item->type, "; advertised again"));
          r->publisher.shutdown();
        }
        r->shape.morph(item->md5sum, item->type, item->definition,
                       item->latching ? "1" : "0");
        r->publisher = r->shape.advertise(*nh_, r->ros_topic,
                                          options_.ros_queue_size, item->latching);
        r->advertised_type = item->type;
        r->advertised_md5 = item->md5sum;
        r->advertised_latch = item->latching;
      }
      r->shape.morph(item->md5sum, item->type, item->definition,
                     item->latching ? "1" : "0");
      ros::serialization::IStream is(item->data.data(),
                                     static_cast<uint32_t>(item->data.size()));
      r->shape.read(is);
      r->publisher.publish(r->shape);
    }
    r->counters.forwarded.fetch_add(1, std::memory_order_relaxed);
    outbox_.Recycle(topic, std::move(item));
  }
}

void Bridge::Impl::PublishStatus() {
  if (status_publisher_ == nullptr) return;
  std::span<std::byte> loan = status_publisher_->Loan();
  if (loan.empty()) return;
  transport::SlotMessageBuilder builder(status_arena_.get(), loan,
                                       status_handle_->name());
  BridgeStatus::Builder st = builder.initRoot<BridgeStatus>();
  st.setTimeNs(static_cast<int64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count()));
  st.setNode(link_->node());
  st.setMaster(ros::master::getURI());
  st.setGraph(graph_);
  st.setPid(static_cast<uint32_t>(::getpid()));
  st.setMasterUp(master_up_);
  st.setMasterChanges(master_changes_);
  st.setReregistrations(reregistrations_);
  {
    std::lock_guard<std::mutex> lock(note_mu_);
    st.setNote(note_);
  }
  std::lock_guard<std::mutex> lock(routes_mu_);
  auto routes = st.initRoutes(static_cast<capnp::uint>(to_tether_.size() + to_ros_.size()));
  capnp::uint i = 0;
  for (auto& r : to_tether_) {
    auto o = routes[i++];
    o.setRosTopic(r->ros_topic);
    o.setChannel(r->channel);
    o.setToTether(true);
    o.setRosType(r->typed != nullptr ? std::string(r->typed->ros_type) : "");
    o.setTyped(r->typed != nullptr);
    o.setForwarded(r->counters.forwarded.load());
    o.setDroppedFull(r->counters.dropped_full.load());
    o.setDroppedTooLarge(r->counters.too_large.load());
    o.setLoopSkipped(r->counters.loop_skipped.load());
    o.setMalformed(r->counters.malformed.load());
    o.setConnections(r->subscriber ? r->subscriber.getNumPublishers() : 0);
    o.setError(r->error.Get());
  }
  for (auto& r : to_ros_) {
    auto o = routes[i++];
    o.setRosTopic(r->ros_topic);
    o.setChannel(r->channel);
    o.setToTether(false);
    o.setTyped(r->typed != nullptr);
    o.setForwarded(r->counters.forwarded.load());
    o.setDroppedFull(outbox_.dropped(r->outbox_topic));
    o.setLoopSkipped(r->counters.loop_skipped.load());
    o.setMalformed(r->counters.malformed.load());
    o.setTetherMissed(r->watcher != nullptr ? r->watcher->missed() : 0);
    {
      std::lock_guard<std::mutex> route_lock(r->mu);
      o.setRosType(r->advertised_type);
      o.setConnections(r->publisher ? r->publisher.getNumSubscribers() : 0);
    }
    o.setError(r->error.Get());
  }
  transport::FinishResult f = builder.Finish();
  if (f.ok()) (void)status_publisher_->Send(f.size, nullptr, f.offset);
}

void Bridge::Impl::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  if (spinner_ != nullptr) spinner_->stop();
  // Watchers first: nothing new reaches the outbox.
  for (auto& r : to_ros_) r->watcher.reset();
  outbox_.Close();
  if (publisher_thread_.joinable()) publisher_thread_.join();
  if (link_ != nullptr && master_up_) link_->Withdraw();
  for (auto& r : to_tether_) r->subscriber.shutdown();
  for (auto& r : to_ros_) {
    std::lock_guard<std::mutex> lock(r->mu);
    r->publisher.shutdown();
  }
  spinner_.reset();
  nh_.reset();
  if (ros::isInitialized()) ros::shutdown();
}

absl::StatusOr<std::unique_ptr<Bridge>> Bridge::Create(BridgeOptions options) {
  auto impl = std::make_unique<Impl>(std::move(options));
  if (absl::Status s = impl->Init(); !s.ok()) return s;
  return std::unique_ptr<Bridge>(new Bridge(std::move(impl)));
}

Bridge::Bridge(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Bridge::~Bridge() = default;
int Bridge::Run() { return impl_->Run(); }

}  // namespace tether::ros_bridge
