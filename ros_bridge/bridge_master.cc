// ros_bridge: the bridge's master link — joining, losing and re-joining the
// ROS master, registering everything again with a restarted one,
// subscribing, discovering topics and channels under prefixes, and telling
// bridges of this tether domain apart (bridge_impl.h).
#include <unistd.h>

#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "ros/ros.h"
#include "ros_bridge/bridge_impl.h"
#include "ros_bridge/master_link.h"
#include "ros_bridge/ros1msg/envelope.h"
#include "ros_bridge/ros1msg/typed.h"
#include "topic_tools/shape_shifter.h"
#include "transport/channel_handle.h"

namespace tether::ros_bridge {

namespace {

using internal::RosToTetherOn;
using internal::TetherToRosOn;

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

}  // namespace

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
  // Until the master's /tether/graph is known nothing crosses with the
  // provisional id: no subscription or advertisement is made before it
  // (ROS -> tether), and the publisher thread holds what it has (tether ->
  // ROS: PublisherThread).
  if (!JoinGraph() && !joined_graph_) return;
  if (master_up_ && *id == identity_) return;
  const bool first = !ever_up_;
  const bool replaced = ever_up_ && !(*id == identity_);
  if (ever_up_ && master_up_) ++master_changes_;  // replaced between checks
  master_up_ = true;
  ever_up_ = true;
  const MasterIdentity old = identity_;
  identity_ = *id;
  AnnounceSelf();
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

void Bridge::Impl::AnnounceSelf() {
  BridgeRecord me{domain_, GraphName(graph_.load(std::memory_order_relaxed)),
                  static_cast<int>(::getpid())};
  if (absl::Status s = link_->Announce(me); !s.ok()) {
    Log(absl::StrCat("could not list this bridge under /tether/bridges: ",
                     s.message()));
  }
}

bool Bridge::Impl::JoinGraph() {
  absl::StatusOr<uint64_t> param = link_->GraphParam();
  // Each kind of trouble said at most every 5 s: a master that keeps
  // refusing would otherwise fill the log at every discovery period.
  auto say = [&](GraphTrouble kind, std::string what) {
    Clock::time_point& last = last_graph_log_[static_cast<int>(kind)];
    if (Clock::now() - last < std::chrono::seconds(5)) return;
    last = Clock::now();
    Log(std::move(what));
  };
  if (absl::IsUnavailable(param.status())) {
    say(GraphTrouble::kRead,
        absl::StrCat("could not read /tether/graph: ", param.status().message(),
                     joined_graph_ ? "; keeping graph id "
                                   : "; not bridging until it is read (graph id ",
                     GraphName(graph_.load(std::memory_order_relaxed)),
                     joined_graph_ ? "" : " is provisional)"));
    return false;
  }
  uint64_t id = 0;
  if (param.ok()) {
    id = *param;
  } else {
    if (!absl::IsNotFound(param.status())) {
      say(GraphTrouble::kNotAnId,
          absl::StrCat(param.status().message(), "; setting it again"));
    }
    // Ours from this master's earlier run, or a new graph's first id.
    id = joined_graph_ ? graph_.load(std::memory_order_relaxed) : NewGraphId();
    if (absl::Status s = link_->SetGraphParam(id); !s.ok()) {
      say(GraphTrouble::kSet,
          absl::StrCat("could not set /tether/graph: ", s.message(),
                       joined_graph_ ? "" : "; not bridging until it is set"));
      return false;
    }
  }
  const bool had = joined_graph_.load(std::memory_order_relaxed);
  const uint64_t was = graph_.exchange(id, std::memory_order_relaxed);
  // After graph_: the publisher thread that sees joined_graph_ sees the id.
  joined_graph_.store(true, std::memory_order_release);
  if (was != id) {
    Note(absl::StrCat("ROS graph id ", GraphName(id), " (/tether/graph",
                      param.ok() ? "" : ", set by this bridge", ")"));
    // The /tether/bridges record names the graph: keep it true. (The first
    // join announces from CheckMaster.)
    if (had && master_up_) AnnounceSelf();
  }
  return true;
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
    for (const auto& [key, rec] : *bridges) {
      if (rec.domain == domain_) same_domain.insert(key);
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

}  // namespace tether::ros_bridge
