// net: the net bridge itself — setup of the DDS entities, the tether
// channels and the loop; the receive thread's dispatch; the status. The
// announcements are in bridge_discovery.cc, the frames in bridge_frames.cc
// (bridge_impl.h).
#include "net/bridge.h"

#include <net/if.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "capnp/message.h"
#include "capnp/serialize.h"
#include "dds/dds.h"
#include "loop/uring_event_loop.h"
#include "net/bridge_impl.h"
#include "net/bridge_status.capnp.h"
#include "net/frame.h"
#include "net/local_channels.h"
#include "transport/channel_handle.h"
#include "transport/channel_set.h"
#include "transport/raw_endpoints.h"
#include "transport/schema_registry.h"

namespace tether::net {
namespace {

using internal::ClockNs;
using internal::DdsError;
using internal::Qos;
using internal::Truncate;

constexpr char kAnnounceTopic[] = "tether/channels";
constexpr uint32_t kStatusMaxSize = 64 * 1024;

// DDS topic names allow [A-Za-z0-9_/]: '.', '-' and '_' of channel names
// are escaped so that distinct channels never share a topic.
std::string TopicFor(const std::string& channel) {
  std::string t = "tether";
  for (char c : channel) {
    if (c == '_') {
      t += "__";
    } else if (c == '.') {
      t += "_d";
    } else if (c == '-') {
      t += "_h";
    } else {
      t += c;
    }
  }
  return t;
}

}  // namespace

const char* ToString(ChannelState state) {
  switch (state) {
    case ChannelState::kWaiting:
      return "waiting";
    case ChannelState::kActive:
      return "active";
    case ChannelState::kNoPeer:
      return "noPeer";
    case ChannelState::kRefused:
      return "refused";
    case ChannelState::kFailed:
      return "failed";
  }
  return "?";
}

std::string StatusChannelName(const std::string& name) {
  return absl::StrCat("/tether/net/", name, "/status");
}

std::string FormatSnapshot(const BridgeSnapshot& s) {
  size_t w = 7;
  for (const ChannelSnapshot& c : s.channels) w = std::max(w, c.name.size());
  std::string out = absl::StrFormat(
      "net-bridge %s on %s (id %016x): domain %u, partition %s, interface %s, "
      "up %.1f s\n",
      s.bridge, s.host, s.bridge_id, s.domain, s.partition, s.interface,
      s.uptime_seconds);
  absl::StrAppendFormat(
      &out, "%-*s  %-3s  %-8s  %5s  %9s  %8s  %8s  %7s  %8s  %8s  %8s  %8s\n",
      w, "CHANNEL", "DIR", "STATE", "PEERS", "MESSAGES", "LOST NET",
      "LOST SRC", "DROPPED", "DEADLINE", "P50 US", "P99 US", "MAX US");
  std::string details;
  for (const ChannelSnapshot& c : s.channels) {
    absl::StrAppendFormat(
        &out,
        "%-*s  %-3s  %-8s  %5u  %9u  %8u  %8u  %7u  %8u  %8.1f  %8.1f  "
        "%8.1f\n",
        w, c.name, ToString(c.direction), ToString(c.state), c.peers,
        c.messages, c.lost_network, c.lost_at_sender, c.dropped,
        c.deadline_missed, c.latency.p50_us, c.latency.p99_us,
        c.latency.max_us);
    if (!c.detail.empty()) {
      absl::StrAppend(&details, "  ", c.name, " (", ToString(c.direction),
                      "): ", c.detail, "\n");
    }
  }
  return out + details;
}

absl::Status CheckInterface(const std::string& interface) {
  if (::if_nametoindex(interface.c_str()) != 0) return absl::OkStatus();
  std::vector<std::string> there;
  if (struct if_nameindex* all = ::if_nameindex(); all != nullptr) {
    for (struct if_nameindex* i = all; i->if_index != 0; ++i) {
      there.emplace_back(i->if_name);
    }
    ::if_freenameindex(all);
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "interface ", interface, " does not exist on this host (there: ",
      there.empty() ? std::string("none") : absl::StrJoin(there, ", "),
      "): name one that `ip link` lists in the bridge config's "
      "\"interface\" (default \"lo\")"));
}

absl::Status CheckPeers(const std::vector<std::string>& peers) {
  for (size_t i = 0; i < peers.size(); ++i) {
    std::string host = peers[i];
    // host:port (one colon; more would be an IPv6 address).
    if (const size_t colon = host.find(':');
        colon != std::string::npos && host.find(':', colon + 1) == std::string::npos) {
      host = host.substr(0, colon);
    }
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_DGRAM;
    // Digits and dots only: meant as an IPv4 address, never a name to ask
    // DNS about (10.0.0.300 would wait on the resolver to fail).
    if (host.find_first_not_of("0123456789.") == std::string::npos) {
      hints.ai_flags = AI_NUMERICHOST;
    }
    addrinfo* found = nullptr;
    const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
    if (found != nullptr) ::freeaddrinfo(found);
    if (rc != 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "peers[", i, "] \"", peers[i], "\" is not an address and does not "
          "resolve (", ::gai_strerror(rc), "): give the peer host's IP "
          "address, or a name this host resolves (getent hosts NAME)"));
    }
  }
  return absl::OkStatus();
}

absl::Status Bridge::Impl::Setup() {
  const DdsOptions& d = options.dds;
  if (absl::Status s = CheckInterface(d.interface); !s.ok()) return s;
  const std::string xml = CycloneConfigXml(d);
  domain = dds_create_domain(d.domain, xml.c_str());
  if (domain < 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        DdsError("cannot start DDS domain", domain), " (domain ", d.domain,
        " on ", d.interface, "; Cyclone's own message is above)"));
  }
  participant = dds_create_participant(d.domain, nullptr, nullptr);
  if (participant < 0) {
    return absl::FailedPreconditionError(
        DdsError("cannot create the DDS participant", participant));
  }
  {
    Qos q;
    const char* partition = options.dds.partition.c_str();
    dds_qset_partition(q.q, 1, &partition);
    publisher = dds_create_publisher(participant, q.q, nullptr);
    subscriber = dds_create_subscriber(participant, q.q, nullptr);
    if (publisher < 0 || subscriber < 0) {
      return absl::InternalError("cannot create the DDS publisher/subscriber");
    }
  }
  {
    Qos q;
    dds_qset_reliability(q.q, DDS_RELIABILITY_RELIABLE, DDS_SECS(1));
    dds_qset_durability(q.q, DDS_DURABILITY_TRANSIENT_LOCAL);
    dds_qset_history(q.q, DDS_HISTORY_KEEP_LAST, 1);
    dds_qset_ignorelocal(q.q, DDS_IGNORELOCAL_PARTICIPANT);
    announce_topic = dds_create_topic(participant,
                                      &tether_net_ChannelAnnounce_desc,
                                      kAnnounceTopic, q.q, nullptr);
    if (announce_topic < 0) {
      return absl::InternalError(
          DdsError("cannot create the announcement topic", announce_topic));
    }
    announce_writer =
        dds_create_writer(publisher, announce_topic, q.q, nullptr);
    announce_reader =
        dds_create_reader(subscriber, announce_topic, q.q, nullptr);
    if (announce_writer < 0 || announce_reader < 0) {
      return absl::InternalError("cannot create the announcement endpoints");
    }
  }
  waitset = dds_create_waitset(participant);
  guard = dds_create_guardcondition(participant);
  if (waitset < 0 || guard < 0 ||
      dds_waitset_attach(waitset, guard, 0) < 0) {
    return absl::InternalError("cannot create the DDS waitset");
  }
  const dds_entity_t announce_condition =
      dds_create_readcondition(announce_reader, DDS_ANY_STATE);
  if (announce_condition < 0 ||
      dds_waitset_attach(waitset, announce_condition, 1) < 0) {
    return absl::InternalError("cannot wait for announcements");
  }

  // The tether side: the out channels as they are, plus the status channel.
  std::vector<std::string> out_names;
  for (const BridgedChannel& b : options.channels) {
    if (b.direction == Direction::kOut) out_names.push_back(b.name);
  }
  schemas.Register<status::BridgeStatus>();
  OwnChannel status_channel{
      .name = StatusChannelName(options.name),
      .type_id = capnp::typeId<status::BridgeStatus>(),
      .max_size = kStatusMaxSize,
      .frequency_hz = 1000.0 / std::max<int64_t>(
                                   1, runtime.status_interval.count()),
      .queue_depth = 16,
  };
  absl::StatusOr<std::unique_ptr<transport::ChannelSet>> set =
      OpenChannelSet(runtime.channels, out_names, {status_channel}, schemas);
  if (!set.ok()) return set.status();
  channel_set = std::move(*set);
  loop::UringEventLoopOptions loop_options;
  loop_options.stop_fd = runtime.stop_fd;
  // The watcher callbacks call into Cyclone DDS, which allocates.
  loop_options.check_allocations = false;
  absl::StatusOr<std::unique_ptr<loop::UringEventLoop>> l =
      loop::UringEventLoop::Create(absl::StrCat("net-bridge ", options.name),
                                   channel_set.get(), loop_options);
  if (!l.ok()) return l.status();
  loop = std::move(*l);
  absl::StatusOr<std::unique_ptr<loop::RawSender>> status =
      loop->MakeRawSender(status_channel.name);
  if (!status.ok()) {
    return absl::Status(
        status.status().code(),
        absl::StrCat(status.status().message(),
                     " (is another bridge named ", options.name,
                     " running in this instance? give each its own name)"));
  }
  status_sender = std::move(*status);

  // Listeners point at the ChannelRun: it is owned by `channels` before
  // any DDS entity refers to it, and outlives the domain.
  for (const BridgedChannel& b : options.channels) {
    channels.push_back(std::make_unique<ChannelRun>());
    ChannelRun& c = *channels.back();
    c.config = b;
    c.topic_name = TopicFor(b.name);
    c.topic = dds_create_topic(participant, &tether_net_Frame_desc,
                               c.topic_name.c_str(), nullptr, nullptr);
    if (c.topic < 0) {
      return absl::InternalError(absl::StrCat(
          "channel ", b.name, ": ",
          DdsError("cannot create its DDS topic", c.topic)));
    }
    absl::Status s = b.direction == Direction::kOut ? SetUpOut(c)
                                                    : SetUpIn(c);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

void Bridge::Impl::ReceiveLoop() {
  dds_attach_t triggered[16];
  while (!stopping.load()) {
    const dds_return_t n =
        dds_waitset_wait(waitset, triggered, 16, DDS_MSECS(500));
    if (n < 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    for (dds_return_t i = 0; i < n; ++i) {
      const dds_attach_t what = triggered[i];
      if (what == 1) {
        TakeAnnouncements();
      } else if (what >= 2 && static_cast<size_t>(what - 2) < channels.size()) {
        TakeFrames(*channels[what - 2]);
      }
    }
  }
}

BridgeSnapshot Bridge::Impl::Snapshot() {
  BridgeSnapshot s;
  s.bridge = options.name;
  s.host = runtime.host;
  s.bridge_id = id;
  s.domain = options.dds.domain;
  s.partition = options.dds.partition;
  s.interface = options.dds.interface;
  s.uptime_seconds = (ClockNs(CLOCK_MONOTONIC) - start_ns) / 1e9;
  for (const auto& c : channels) {
    ChannelSnapshot r;
    r.name = c->config.name;
    r.direction = c->config.direction;
    ChannelState state = c->state.load();
    r.peers = c->peers.load();
    if (state == ChannelState::kNoPeer || state == ChannelState::kActive) {
      state = r.peers > 0 ? ChannelState::kActive : ChannelState::kNoPeer;
    }
    r.state = state;
    {
      std::lock_guard lock(c->mu);
      r.detail = c->detail;
      r.reliable = c->qos.reliable;
      r.history_depth = c->qos.depth;
      r.deadline_ms = c->qos.deadline_ms;
    }
    r.reconnects = c->reconnects.load();
    r.messages = c->messages.load();
    r.bytes = c->bytes.load();
    r.lost_network = c->lost_network.load();
    r.lost_at_sender = c->lost_at_sender.load();
    r.dropped = c->dropped.load();
    r.duplicates = c->duplicates.load();
    if (c->config.direction == Direction::kOut && c->writer > 0) {
      dds_offered_deadline_missed_status_t d;
      if (dds_get_offered_deadline_missed_status(c->writer, &d) == 0) {
        r.deadline_missed = d.total_count;
      }
    } else if (const dds_entity_t reader = c->reader.load(); reader > 0) {
      dds_requested_deadline_missed_status_t d;
      if (dds_get_requested_deadline_missed_status(reader, &d) == 0) {
        r.deadline_missed = d.total_count;
      }
      dds_requested_incompatible_qos_status_t q;
      if (dds_get_requested_incompatible_qos_status(reader, &q) == 0 &&
          q.total_count > 0 && r.peers == 0) {
        r.detail = Truncate(absl::StrCat(
            r.detail, "; the sender's QoS is incompatible with this side's "
                      "(e.g. reliable asked of a best-effort writer)"));
      }
    }
    r.latency = c->latency.Take();
    s.channels.push_back(std::move(r));
  }
  return s;
}

void Bridge::Impl::PublishStatus(const BridgeSnapshot& s) {
  capnp::MallocMessageBuilder message;
  auto root = message.initRoot<status::BridgeStatus>();
  root.setBridge(s.bridge);
  root.setHost(s.host);
  root.setBridgeId(s.bridge_id);
  root.setDomain(s.domain);
  root.setPartition(s.partition);
  root.setInterface(s.interface);
  root.setUptimeSeconds(s.uptime_seconds);
  auto list = root.initChannels(static_cast<unsigned>(s.channels.size()));
  for (size_t i = 0; i < s.channels.size(); ++i) {
    const ChannelSnapshot& c = s.channels[i];
    auto e = list[static_cast<unsigned>(i)];
    e.setName(c.name);
    e.setDirection(c.direction == Direction::kOut ? status::Direction::OUT
                                                  : status::Direction::IN);
    e.setState(static_cast<status::State>(c.state));
    e.setDetail(c.detail);
    e.setReliable(c.reliable);
    e.setHistoryDepth(c.history_depth);
    e.setDeadlineMs(c.deadline_ms);
    e.setPeers(c.peers);
    e.setReconnects(c.reconnects);
    e.setMessages(c.messages);
    e.setBytes(c.bytes);
    e.setLostNetwork(c.lost_network);
    e.setLostAtSender(c.lost_at_sender);
    e.setDropped(c.dropped);
    e.setDuplicates(c.duplicates);
    e.setDeadlineMissed(c.deadline_missed);
    e.setLatencyP50Us(c.latency.p50_us);
    e.setLatencyP99Us(c.latency.p99_us);
    e.setLatencyMaxUs(c.latency.max_us);
  }
  kj::Array<capnp::word> flat = capnp::messageToFlatArray(message);
  const transport::PublishResult r = status_sender->Publish(
      {reinterpret_cast<const std::byte*>(flat.begin()),
       flat.size() * sizeof(capnp::word)});
  if (r.status != transport::PublishStatus::kOk) {
    std::fprintf(stderr, "net-bridge %s: status not published: %s\n",
                 options.name.c_str(), transport::ToString(r.status));
  }
}

Bridge::Bridge(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Bridge::~Bridge() = default;

absl::StatusOr<std::unique_ptr<Bridge>> Bridge::Create(
    const BridgeOptions& options, const BridgeRuntime& runtime) {
  if (absl::Status s = ValidateBridgeOptions(options, "net bridge options");
      !s.ok()) {
    return s;
  }
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->runtime = runtime;
  impl->pid = ::getpid();
  std::random_device rd;
  impl->id = (uint64_t{rd()} << 32) ^ rd() ^ static_cast<uint64_t>(impl->pid);
  {
    const std::string folder = absl::StrCat(runtime.channels.root, "/",
                                            runtime.channels.instance);
    char* resolved = ::realpath(folder.c_str(), nullptr);
    impl->instance = resolved != nullptr ? resolved : folder;
    std::free(resolved);
  }
  impl->where = absl::StrCat("bridge ", options.name, " on host ",
                             runtime.host);
  impl->start_ns = ClockNs(CLOCK_MONOTONIC);
  if (absl::Status s = impl->Setup(); !s.ok()) return s;
  return std::unique_ptr<Bridge>(new Bridge(std::move(impl)));
}

void Bridge::Run(absl::AnyInvocable<void(const BridgeSnapshot&)> on_status) {
  Impl& b = *impl_;
  std::thread receiver([&b] { b.ReceiveLoop(); });
  loop::TimerHandle* timer = b.loop->AddTimer([&b, &on_status] {
    for (auto& c : b.channels) b.CheckCursor(*c);
    const BridgeSnapshot s = b.Snapshot();
    b.PublishStatus(s);
    if (on_status) on_status(s);
  });
  b.loop->OnRun([&b, timer] {
    timer->Schedule(b.loop->monotonic_now() + b.runtime.status_interval,
                    b.runtime.status_interval);
  });
  b.loop->Run();
  b.stopping = true;
  dds_set_guardcondition(b.guard, true);
  receiver.join();
}

void Bridge::Exit() { impl_->loop->Exit(); }

BridgeSnapshot Bridge::Snapshot() { return impl_->Snapshot(); }

uint64_t Bridge::id() const { return impl_->id; }

}  // namespace tether::net
