// net: the net bridge's announcements — an out channel's writer and its
// description announced on "tether/channels"; an in channel accepted (or
// its sender refused) from an announcement, then its reader; DDS peer
// matching (bridge_impl.h).
#include <algorithm>
#include <cstdio>
#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"
#include "dds/dds.h"
#include "net/bridge_impl.h"
#include "net/frame.h"
#include "net/local_channels.h"
#include "transport/channel_handle.h"
#include "transport/raw_endpoints.h"

namespace tether::net {
namespace {

using internal::ChannelRun;
using internal::DataQos;
using internal::DdsError;
using internal::kTakeBatch;
using internal::Qos;
using internal::Truncate;

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
  a.instance = const_cast<char*>(instance.c_str());
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
  absl::StatusOr<loop::WatcherHandle*> watcher = loop->MakeRawWatcher(
      c.config.name,
      [this, run](const transport::RawMessage& m) { Forward(*run, m); });
  if (!watcher.ok()) return watcher.status();
  c.incarnation = (*h)->incarnation();
  c.stream = {.id = id};  // this run's own unless the cursor keeps one
  OpenCursor(c, (*watcher)->start_index(), /*again=*/false);
  return absl::OkStatus();
}

void Bridge::Impl::OpenCursor(ChannelRun& c, uint64_t start, bool again,
                              const ForwardCursor::Stream* keep) {
  // `start` is where the run's watcher starts: it delivers (or counts as
  // missed) every message from there on, so a first run that dies before it
  // forwards one leaves exactly that position, and nothing sent between
  // the watcher's start and this call goes uncounted. Without its cursor
  // the bridge still runs; what it would have counted across a restart is
  // said to be uncounted instead.
  const auto say = [&](const std::string& why) {
    c.SetDetail(why);
    std::fprintf(stderr, "net-bridge %s: %s: %s\n", options.name.c_str(),
                 c.config.name.c_str(), why.c_str());
  };
  absl::StatusOr<std::unique_ptr<ForwardCursor>> cursor = ForwardCursor::Open(
      runtime.channels, c.config.name, options.name, c.incarnation, start,
      keep);
  if (!cursor.ok()) {
    say(absl::StrCat(
        "messages sent while this bridge is not running will not be counted: ",
        cursor.status().message()));
    return;
  }
  c.cursor = std::move(*cursor);
  // The frames go on with the stream the cursor keeps (net/frame.idl).
  c.stream = c.cursor->stream();
  // Made again under a running bridge, the file's old contents are moot.
  if (!again && !c.cursor->started_afresh().empty()) {
    say(absl::StrCat("the forwarding cursor ", c.cursor->path(),
                     " was not used (", c.cursor->started_afresh(),
                     "): messages sent since its last run got there are not "
                     "counted"));
  }
  // The gap since the last run is known now: counted at once, not only
  // when the next message comes.
  ResumeCursor(c, start);
}

absl::Status Bridge::Impl::SetUpIn(ChannelRun& c) {
  c.state = ChannelState::kWaiting;
  c.SetDetail("no sender has announced it yet");
  return absl::OkStatus();
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
  const bool same_kernel = a.boot_id != nullptr && runtime.boot_id == a.boot_id;
  c.same_clock[sender] = same_kernel;
  if (same_kernel && a.instance != nullptr && instance == a.instance) {
    // Each would publish the other's frames into the instance and send
    // them again: one message would circle for ever.
    const bool first = c.refused_senders.insert(sender).second;
    const std::string why = absl::StrCat(
        remote.where, " bridges this same instance (", instance,
        "): its frames are dropped here, and ours there, or they would echo "
        "between the two bridges for ever; run one bridge per host and "
        "instance, with every channel in its config");
    c.SetDetail(why);
    if (first) std::fprintf(stderr, "net-bridge %s: %s\n", options.name.c_str(), why.c_str());
    if (!c.accepted) c.state = ChannelState::kRefused;
    return;
  }
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
      // A sender that fits (the accepted one again, after a restart):
      // what an earlier refused one left in the detail is over.
      c.SetDetail(absl::StrCat("from ", remote.where));
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

}  // namespace tether::net
