#include "net/bridge.h"

#include <net/if.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "capnp/message.h"
#include "capnp/serialize.h"
#include "dds/dds.h"
#include "loop/uring_event_loop.h"
#include "net/bridge_status.capnp.h"
#include "net/frame.h"
#include "net/local_channels.h"
#include "transport/channel_handle.h"
#include "transport/channel_set.h"
#include "transport/raw_endpoints.h"
#include "transport/schema_registry.h"

namespace tether::net {
namespace {

constexpr char kAnnounceTopic[] = "tether/channels";
constexpr uint32_t kStatusMaxSize = 64 * 1024;
constexpr size_t kDetailMax = 600;
constexpr int kTakeBatch = 64;

int64_t ClockNs(clockid_t id) {
  struct timespec ts;
  ::clock_gettime(id, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

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

std::string DdsError(const char* what, dds_return_t rc) {
  return absl::StrCat(what, ": ", dds_strretcode(rc));
}

std::string Truncate(std::string s) {
  if (s.size() > kDetailMax) {
    s.resize(kDetailMax - 3);
    s += "...";
  }
  return s;
}

// Owns a DDS QoS object.
struct Qos {
  Qos() : q(dds_create_qos()) {}
  ~Qos() { dds_delete_qos(q); }
  Qos(const Qos&) = delete;
  Qos& operator=(const Qos&) = delete;
  dds_qos_t* q;
};

struct DataQos {
  bool reliable = true;
  uint32_t depth = 1;
  double deadline_ms = 0;
};

void SetDataQos(dds_qos_t* q, const DataQos& d) {
  dds_qset_reliability(
      q, d.reliable ? DDS_RELIABILITY_RELIABLE : DDS_RELIABILITY_BEST_EFFORT,
      DDS_MSECS(100));
  dds_qset_history(q, DDS_HISTORY_KEEP_LAST, static_cast<int32_t>(d.depth));
  dds_qset_durability(q, DDS_DURABILITY_VOLATILE);
  if (d.deadline_ms > 0) {
    dds_qset_deadline(q, static_cast<dds_duration_t>(d.deadline_ms * 1e6));
  }
  // Never hear ourselves (a channel both in and out on one bridge).
  dds_qset_ignorelocal(q, DDS_IGNORELOCAL_PARTICIPANT);
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

// One configured channel and direction. Counters are atomics read by the
// status timer; the rest belongs to the thread named at each field.
struct ChannelRun {
  BridgedChannel config;
  std::string topic_name;
  dds_entity_t topic = 0;

  // out (loop thread): the writer and the description announced.
  dds_entity_t writer = 0;
  ChannelDescription described;
  uint64_t next_seq = 1;

  // in (receive thread): the accepted description, the local channel and
  // publisher, the reader once accepted, per-sender accounting.
  std::optional<ChannelDescription> accepted;
  std::unique_ptr<transport::ChannelHandle> local;
  std::unique_ptr<transport::RawPublisher> publisher;
  std::atomic<dds_entity_t> reader{0};
  dds_entity_t read_condition = 0;
  SequenceTracker sequences;
  absl::flat_hash_set<uint64_t> refused_senders;
  absl::flat_hash_map<uint64_t, bool> same_clock;  // sender -> one kernel

  // Shared.
  std::atomic<ChannelState> state{ChannelState::kWaiting};
  std::mutex mu;       // guards detail and qos
  std::string detail;  // why refused/failed, or who the peers are
  DataQos qos;
  std::atomic<uint64_t> messages{0}, bytes{0}, lost_network{0},
      lost_at_sender{0}, dropped{0}, duplicates{0};
  std::atomic<uint32_t> peers{0}, reconnects{0};
  std::atomic<bool> lost_peer{false};
  LatencyWindow latency;

  void SetDetail(std::string d) {
    std::lock_guard lock(mu);
    detail = Truncate(std::move(d));
  }
};

// DDS listener callbacks: peer counts and reconnections, per channel.
void OnMatched(ChannelRun* c, uint32_t current, int32_t change) {
  c->peers.store(current, std::memory_order_relaxed);
  if (change < 0) c->lost_peer.store(true, std::memory_order_relaxed);
  if (change > 0 && c->lost_peer.exchange(false)) {
    c->reconnects.fetch_add(1, std::memory_order_relaxed);
  }
}

extern "C" void NetOnPublicationMatched(dds_entity_t,
                                        dds_publication_matched_status_t s,
                                        void* arg) {
  OnMatched(static_cast<ChannelRun*>(arg), s.current_count,
            s.current_count_change);
}

extern "C" void NetOnSubscriptionMatched(dds_entity_t,
                                         dds_subscription_matched_status_t s,
                                         void* arg) {
  OnMatched(static_cast<ChannelRun*>(arg), s.current_count,
            s.current_count_change);
}

struct Bridge::Impl {
  BridgeOptions options;
  BridgeRuntime runtime;
  uint64_t id = 0;
  pid_t pid = 0;
  std::string where;  // "bridge <name> on host <host>"
  int64_t start_ns = 0;

  dds_entity_t domain = 0;
  dds_entity_t participant = 0;
  dds_entity_t publisher = 0;
  dds_entity_t subscriber = 0;
  dds_entity_t announce_topic = 0;
  dds_entity_t announce_writer = 0;
  dds_entity_t announce_reader = 0;
  dds_entity_t waitset = 0;
  dds_entity_t guard = 0;

  transport::SchemaRegistry schemas;
  std::unique_ptr<transport::ChannelSet> channel_set;
  std::unique_ptr<loop::UringEventLoop> loop;
  std::unique_ptr<transport::RawPublisher> status_sender;
  std::vector<std::unique_ptr<ChannelRun>> channels;
  std::atomic<bool> stopping{false};

  ~Impl() {
    // Deleting the domain deletes every entity in it (and ends Cyclone's
    // threads) before the channels the callbacks point at go away.
    if (domain > 0) dds_delete(domain);
  }

  absl::Status Setup();
  absl::Status SetUpOut(ChannelRun& c);
  absl::Status SetUpIn(ChannelRun& c);
  dds_entity_t MakeReaderFor(ChannelRun& c, const DataQos& qos);

  void Forward(ChannelRun& c, const transport::RawMessage& m);
  void ReceiveLoop();
  void TakeAnnouncements();
  void Accept(ChannelRun& c, const ChannelDescription& remote,
              uint64_t sender, const tether_net_ChannelAnnounce& a);
  void TakeFrames(ChannelRun& c);
  void Deliver(ChannelRun& c, const tether_net_Frame& f);

  BridgeSnapshot Snapshot();
  void PublishStatus(const BridgeSnapshot& s);
};

absl::Status Bridge::Impl::Setup() {
  const DdsOptions& d = options.dds;
  if (::if_nametoindex(d.interface.c_str()) == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "interface ", d.interface,
        " does not exist on this host: name one that `ip link` lists in "
        "the bridge config's \"interface\" (default \"lo\")"));
  }
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

absl::Status Bridge::Impl::SetUpOut(ChannelRun& c) {
  absl::StatusOr<transport::ChannelHandle*> h =
      channel_set->Find(c.config.name);
  if (!h.ok()) return h.status();
  c.described = Describe(**h, where);
  DataQos qos;
  qos.reliable = c.config.reliability != Reliability::kBestEffort;
  qos.depth = c.config.history_depth != 0
                  ? c.config.history_depth
                  : std::min(c.described.queue_depth, kMaxHistoryDepth);
  qos.deadline_ms = c.config.deadline_ms;
  c.qos = qos;

  Qos q;
  SetDataQos(q.q, qos);
  dds_listener_t* listener = dds_create_listener(&c);
  dds_lset_publication_matched(listener, &NetOnPublicationMatched);
  c.writer = dds_create_writer(publisher, c.topic, q.q, listener);
  dds_delete_listener(listener);
  if (c.writer < 0) {
    return absl::InternalError(absl::StrCat(
        "channel ", c.config.name, ": ",
        DdsError("cannot create its DDS writer", c.writer)));
  }
  c.state = ChannelState::kNoPeer;

  // Tell the other bridges what this channel is (kept for late joiners).
  tether_net_ChannelAnnounce a{};
  a.bridge_id = id;
  a.channel = const_cast<char*>(c.config.name.c_str());
  a.bridge_name = const_cast<char*>(options.name.c_str());
  a.host = const_cast<char*>(runtime.host.c_str());
  a.boot_id = const_cast<char*>(runtime.boot_id.c_str());
  a.type_id = c.described.type_id;
  a.type_name = const_cast<char*>(c.described.type_name.c_str());
  a.schema_hash = c.described.schema_hash;
  a.schema._buffer = reinterpret_cast<uint8_t*>(c.described.schema.data());
  a.schema._length = a.schema._maximum =
      static_cast<uint32_t>(c.described.schema.size());
  a.schema._release = false;
  a.max_size = c.described.max_size;
  a.frequency_hz = c.described.frequency_hz;
  a.queue_depth = c.described.queue_depth;
  a.max_publishers = c.described.max_publishers;
  a.max_pinned = c.described.max_pinned;
  a.reliable = qos.reliable;
  a.history_depth = qos.depth;
  a.deadline_ns = static_cast<int64_t>(qos.deadline_ms * 1e6);
  if (dds_return_t rc = dds_write(announce_writer, &a); rc < 0) {
    return absl::InternalError(absl::StrCat(
        "channel ", c.config.name, ": ",
        DdsError("cannot announce it", rc)));
  }

  ChannelRun* run = &c;
  return loop
      ->MakeRawWatcher(
          c.config.name,
          [this, run](const transport::RawMessage& m) { Forward(*run, m); })
      .status();
}

absl::Status Bridge::Impl::SetUpIn(ChannelRun& c) {
  c.state = ChannelState::kWaiting;
  c.SetDetail("no sender has announced it yet");
  return absl::OkStatus();
}

void Bridge::Impl::Forward(ChannelRun& c, const transport::RawMessage& m) {
  const transport::MessageContext& ctx = m.context;
  // Loop prevention: what this process published came from the network.
  if (ctx.publisher_pid == static_cast<uint32_t>(pid)) return;
  if (ctx.missed != 0) c.lost_at_sender.fetch_add(ctx.missed);
  tether_net_Frame f{};
  f.bridge_id = id;
  f.seq = c.next_seq++;
  f.type_id = c.described.type_id;
  f.schema_hash = c.described.schema_hash;
  f.upstream_missed = ctx.missed;
  f.monotonic_send_ns = ctx.monotonic_send_ns;
  f.realtime_send_ns = ctx.realtime_send_ns;
  f.publisher_pid = ctx.publisher_pid;
  f.publisher_sequence = ctx.publisher_sequence;
  f.queue_index = ctx.queue_index;
  f.payload._buffer =
      const_cast<uint8_t*>(reinterpret_cast<const uint8_t*>(m.bytes.data()));
  f.payload._length = f.payload._maximum =
      static_cast<uint32_t>(m.bytes.size());
  f.payload._release = false;
  if (dds_return_t rc = dds_write(c.writer, &f); rc < 0) {
    c.dropped.fetch_add(1);
    c.SetDetail(DdsError("DDS write failed", rc));
    return;
  }
  c.messages.fetch_add(1, std::memory_order_relaxed);
  c.bytes.fetch_add(m.bytes.size(), std::memory_order_relaxed);
  c.latency.Add(ClockNs(CLOCK_MONOTONIC) - ctx.monotonic_send_ns);
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

void Bridge::Impl::TakeAnnouncements() {
  void* samples[kTakeBatch] = {};
  dds_sample_info_t infos[kTakeBatch];
  const int n =
      dds_take(announce_reader, samples, infos, kTakeBatch, kTakeBatch);
  if (n <= 0) return;
  for (int i = 0; i < n; ++i) {
    if (!infos[i].valid_data) continue;
    const auto& a = *static_cast<const tether_net_ChannelAnnounce*>(samples[i]);
    if (a.bridge_id == id || a.channel == nullptr) continue;
    for (auto& c : channels) {
      if (c->config.direction != Direction::kIn || c->config.name != a.channel) {
        continue;
      }
      ChannelDescription remote;
      remote.name = a.channel;
      remote.where = absl::StrCat("bridge ", a.bridge_name ? a.bridge_name : "?",
                                  " on host ", a.host ? a.host : "?");
      remote.type_id = a.type_id;
      remote.type_name = a.type_name ? a.type_name : "";
      remote.schema_hash = a.schema_hash;
      remote.schema.assign(
          reinterpret_cast<const std::byte*>(a.schema._buffer),
          reinterpret_cast<const std::byte*>(a.schema._buffer) +
              a.schema._length);
      remote.max_size = a.max_size;
      remote.frequency_hz = a.frequency_hz;
      remote.queue_depth = a.queue_depth;
      remote.max_publishers = a.max_publishers;
      remote.max_pinned = a.max_pinned;
      Accept(*c, remote, a.bridge_id, a);
    }
  }
  dds_return_loan(announce_reader, samples, n);
}

void Bridge::Impl::Accept(ChannelRun& c, const ChannelDescription& remote,
                          uint64_t sender,
                          const tether_net_ChannelAnnounce& a) {
  c.same_clock[sender] = a.boot_id != nullptr && runtime.boot_id == a.boot_id;
  if (SchemaHash(remote.schema) != remote.schema_hash) {
    c.refused_senders.insert(sender);
    c.SetDetail(absl::StrCat(remote.where,
                             " announced a schema that does not match its "
                             "hash; ignoring that sender"));
    if (!c.accepted) c.state = ChannelState::kRefused;
    return;
  }
  if (c.accepted) {
    // Another sender (or the same one after a restart): it must match.
    absl::Status s = CheckCompatible(remote, *c.accepted);
    if (!s.ok()) {
      c.refused_senders.insert(sender);
      c.SetDetail(std::string(s.message()));
      std::fprintf(stderr, "net-bridge %s: %s\n", options.name.c_str(),
                   std::string(s.message()).c_str());
    } else {
      c.refused_senders.erase(sender);
    }
    return;
  }
  absl::StatusOr<std::unique_ptr<transport::ChannelHandle>> local =
      OpenOrCreateFor(runtime.channels, remote, where);
  if (!local.ok()) {
    const bool refused = absl::IsFailedPrecondition(local.status());
    c.state = refused ? ChannelState::kRefused : ChannelState::kFailed;
    c.refused_senders.insert(sender);
    c.SetDetail(std::string(local.status().message()));
    std::fprintf(stderr, "net-bridge %s: %s\n", options.name.c_str(),
                 std::string(local.status().message()).c_str());
    return;
  }
  absl::StatusOr<std::unique_ptr<transport::RawPublisher>> pub =
      transport::RawPublisher::Create(local->get());
  if (!pub.ok()) {
    c.state = ChannelState::kFailed;
    c.SetDetail(absl::StrCat("cannot publish on ", c.config.name, ": ",
                             pub.status().message()));
    return;
  }
  DataQos qos;
  switch (c.config.reliability) {
    case Reliability::kDefault:
      qos.reliable = a.reliable;
      break;
    case Reliability::kReliable:
      qos.reliable = true;
      break;
    case Reliability::kBestEffort:
      qos.reliable = false;
      break;
  }
  qos.depth = c.config.history_depth != 0
                  ? c.config.history_depth
                  : std::clamp<uint32_t>(a.history_depth, 1, kMaxHistoryDepth);
  qos.deadline_ms = c.config.deadline_ms != 0 ? c.config.deadline_ms
                                              : a.deadline_ns / 1e6;
  const dds_entity_t reader = MakeReaderFor(c, qos);
  if (reader < 0) {
    c.state = ChannelState::kFailed;
    c.SetDetail(DdsError("cannot create the DDS reader", reader));
    return;
  }
  {
    std::lock_guard lock(c.mu);
    c.qos = qos;
    c.detail = Truncate(absl::StrCat("from ", remote.where));
  }
  c.accepted = remote;
  c.accepted->where = where;  // checks of later senders name this side
  c.accepted->max_size = (*local)->max_size();
  c.local = std::move(*local);
  c.publisher = std::move(*pub);
  c.refused_senders.erase(sender);
  c.state = ChannelState::kNoPeer;
  c.reader = reader;
}

dds_entity_t Bridge::Impl::MakeReaderFor(ChannelRun& c, const DataQos& qos) {
  Qos q;
  SetDataQos(q.q, qos);
  dds_listener_t* listener = dds_create_listener(&c);
  dds_lset_subscription_matched(listener, &NetOnSubscriptionMatched);
  const dds_entity_t reader =
      dds_create_reader(subscriber, c.topic, q.q, listener);
  dds_delete_listener(listener);
  if (reader < 0) return reader;
  c.read_condition = dds_create_readcondition(reader, DDS_ANY_STATE);
  size_t index = 0;
  while (channels[index].get() != &c) ++index;
  const dds_return_t rc = dds_waitset_attach(
      waitset, c.read_condition, static_cast<dds_attach_t>(index + 2));
  if (c.read_condition < 0 || rc < 0) {
    dds_delete(reader);
    return rc < 0 ? rc : c.read_condition;
  }
  return reader;
}

void Bridge::Impl::TakeFrames(ChannelRun& c) {
  const dds_entity_t reader = c.reader.load();
  if (reader <= 0) return;
  for (;;) {
    void* samples[kTakeBatch] = {};
    dds_sample_info_t infos[kTakeBatch];
    const int n = dds_take(reader, samples, infos, kTakeBatch, kTakeBatch);
    if (n <= 0) return;
    for (int i = 0; i < n; ++i) {
      if (infos[i].valid_data) {
        Deliver(c, *static_cast<const tether_net_Frame*>(samples[i]));
      }
    }
    dds_return_loan(reader, samples, n);
    if (n < kTakeBatch) return;
  }
}

void Bridge::Impl::Deliver(ChannelRun& c, const tether_net_Frame& f) {
  if (f.bridge_id == id) return;  // our own (ignorelocal should stop these)
  if (c.refused_senders.contains(f.bridge_id) ||
      f.type_id != c.accepted->type_id ||
      f.schema_hash != c.accepted->schema_hash) {
    c.dropped.fetch_add(1);
    return;
  }
  const SequenceTracker::Result r = c.sequences.Observe(f.bridge_id, f.seq);
  if (r.verdict == SequenceTracker::Verdict::kOld) {
    c.duplicates.fetch_add(1);
    return;
  }
  if (r.lost != 0) c.lost_network.fetch_add(r.lost);
  if (f.upstream_missed != 0) c.lost_at_sender.fetch_add(f.upstream_missed);

  // Send times in this host's clocks: one kernel keeps CLOCK_MONOTONIC;
  // across machines the realtime send time is mapped onto this host's
  // monotonic clock (as good as the hosts' clock sync).
  const int64_t mono_now = ClockNs(CLOCK_MONOTONIC);
  auto same = c.same_clock.find(f.bridge_id);
  int64_t mono_send = f.monotonic_send_ns;
  if (same == c.same_clock.end() || !same->second) {
    mono_send = f.realtime_send_ns - (ClockNs(CLOCK_REALTIME) - mono_now);
  }
  transport::SendTimes times;
  times.monotonic_ns = static_cast<uint64_t>(std::max<int64_t>(mono_send, 1));
  times.realtime_ns =
      static_cast<uint64_t>(std::max<int64_t>(f.realtime_send_ns, 1));
  const std::span<const std::byte> payload(
      reinterpret_cast<const std::byte*>(f.payload._buffer),
      f.payload._length);
  const transport::PublishResult p = c.publisher->Publish(payload, &times);
  if (p.status != transport::PublishStatus::kOk) {
    c.dropped.fetch_add(1);
    c.SetDetail(absl::StrCat("publishing a received message failed: ",
                             transport::ToString(p.status)));
    return;
  }
  c.messages.fetch_add(1, std::memory_order_relaxed);
  c.bytes.fetch_add(payload.size(), std::memory_order_relaxed);
  c.latency.Add(mono_now - mono_send);
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
