// ros_bridge: the Bridge itself — setup (the routes and their channels),
// the main loop, the status channel and shutdown. The master link is in
// bridge_master.cc, forwarding in bridge_forward.cc (bridge_impl.h).
#include "ros_bridge/bridge.h"

#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "capnp/message.h"
#include "ros/ros.h"
#include "ros_bridge/bridge_impl.h"
#include "ros_bridge/bridge_status.capnp.h"
#include "ros_bridge/channel_watcher.h"
#include "ros_bridge/master_link.h"
#include "ros_bridge/ros1msg/envelope.h"
#include "ros_bridge/ros1msg/typed.h"
#include "shm/channel.h"
#include "transport/channel_handle.h"
#include "transport/framing.h"
#include "transport/raw_endpoints.h"

namespace tether::ros_bridge {

namespace {

using internal::RosToTetherOn;
using internal::TetherToRosOn;

std::string Hostname() {
  char buf[256] = {};
  ::gethostname(buf, sizeof(buf) - 1);
  return buf;
}

}  // namespace

absl::Status Bridge::Impl::Init() {
  ros1msg::RegisterRosSchemas(&schemas_);
  schemas_.Register<BridgeStatus>();
  domain_ = absl::StrCat(Hostname(), ":", options_.channels.root, "/",
                         options_.channels.instance);

  // Each ROS topic goes into one channel, each channel out to one ROS
  // topic: a second pair for either would be dropped by the routes' maps.
  std::map<std::string, std::string> into_tether, into_ros;
  const auto claim = [](std::map<std::string, std::string>* taken,
                        const std::string& key, const std::string& pair,
                        const char* what) -> absl::Status {
    auto [it, fresh] = taken->emplace(key, pair);
    if (fresh) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        "pairs ", it->second, " and ", pair, " both forward ", what, " ", key,
        ": a bridge forwards it one way only once; keep one of the pairs (a "
        "second reader of the channel, or a second subscriber of the topic, "
        "gets the same messages)"));
  };
  for (const PairOptions& p : options_.pairs) {
    const std::string channel = p.tether.empty() ? p.ros : p.tether;
    const std::string pair = absl::StrCat(p.ros, "=", channel);
    if (RosToTetherOn(p.direction)) {
      if (absl::Status s = claim(&into_tether, p.ros, pair, "ROS topic");
          !s.ok()) {
        return s;
      }
    }
    if (TetherToRosOn(p.direction)) {
      if (absl::Status s = claim(&into_ros, channel, pair, "tether channel");
          !s.ok()) {
        return s;
      }
    }
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
  graph_ = ProvisionalGraphId(ros::master::getURI());
  link_ = std::make_unique<MasterLink>(ros::this_node::getName());
  nh_ = std::make_unique<ros::NodeHandle>();  // ros::start()
  spinner_ = std::make_unique<ros::AsyncSpinner>(2);
  spinner_->start();
  Log(absl::StrCat("node ", ros::this_node::getName(), ", master ",
                   ros::master::getURI(), ", tether channels in ",
                   options_.channels.root, "/", options_.channels.instance));

  for (const PairOptions& p : options_.pairs) {
    const std::string channel = p.tether.empty() ? p.ros : p.tether;
    const uint32_t size = p.max_size != 0 ? p.max_size : options_.max_size;
    const uint32_t depth = p.queue_depth != 0 ? p.queue_depth : options_.queue_depth;
    const BridgeOptions defaults;
    const bool asked = p.max_size != 0 || p.queue_depth != 0 ||
                       options_.max_size != defaults.max_size ||
                       options_.queue_depth != defaults.queue_depth;
    if (RosToTetherOn(p.direction)) {
      if (absl::Status s =
              AddRosToTether(p.ros, channel, p.type, size, depth, asked);
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
                          uint32_t max_size, uint32_t depth, bool asked) {
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
    if (asked && (existing->max_size < max_size || existing->queue_depth < depth)) {
      // A channel is sized when it is made: ours would be ignored.
      Log(absl::StrCat(
          "channel ", name, " exists with maxSize ", existing->max_size,
          " and queueDepth ", existing->queue_depth, ", less than the ",
          max_size, " and ", depth,
          " asked for: it is used as it is (larger ROS messages are dropped "
          "and counted in droppedTooLarge); to resize it, stop the processes "
          "that use it, run `", shm::Channel::CleanCommand(options_.channels),
          "` and start the bridge again"));
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
                                          uint32_t max_size, uint32_t depth,
                                          bool asked) {
  if (to_tether_by_topic_.count(ros_topic) > 0) return absl::OkStatus();
  auto r = std::make_unique<RosToTether>();
  r->ros_topic = ros_topic;
  r->channel = channel;
  r->typed = type.empty() ? nullptr : ros1msg::FindCommonType(type);
  const uint64_t type_id = r->typed != nullptr
                               ? r->typed->schema.getProto().getId()
                               : ros1msg::EnvelopeTypeId();
  absl::StatusOr<std::unique_ptr<transport::ChannelHandle>> h =
      OpenChannel(channel, type_id, max_size, depth, asked);
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

void Bridge::Impl::PublishStatus() {
  if (status_publisher_ == nullptr) return;
  std::span<std::byte> loan = status_publisher_->Loan();
  if (loan.empty()) {
    (void)status_publisher_->CountFailure(
        transport::PublishStatus::kNoLoan);
    return;
  }
  transport::SlotMessageBuilder builder(status_arena_.get(), loan,
                                       status_handle_->name());
  BridgeStatus::Builder st = builder.initRoot<BridgeStatus>();
  st.setTimeNs(static_cast<int64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count()));
  st.setNode(link_->node());
  st.setMaster(ros::master::getURI());
  st.setGraph(GraphName(graph_.load(std::memory_order_relaxed)));
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
