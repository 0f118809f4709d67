// net (internal): the net bridge's state, shared by the files that
// implement Bridge (bridge.h says what the bridge does). Only bridge*.cc
// include this.
//   bridge.cc            setup (DDS entities, the tether channels, the
//                        loop), the receive thread's dispatch, the status
//                        (snapshot, status channel, table), Run/Exit;
//   bridge_discovery.cc  announcements: out channels described and
//                        announced with their writers; in channels accepted
//                        (or refused) from announcements, with their readers;
//                        DDS peer matching;
//   bridge_frames.cc     frames: a tether message out as a Frame, a received
//                        Frame into the local channel, with loss, duplicate
//                        and latency accounting.
#ifndef TETHER_NET_BRIDGE_IMPL_H_
#define TETHER_NET_BRIDGE_IMPL_H_

#include <time.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dds/dds.h"
#include "loop/uring_event_loop.h"
#include "net/bridge.h"
#include "net/bridge_config.h"
#include "net/channel_stats.h"
#include "net/forward_cursor.h"
#include "net/frame.h"
#include "net/local_channels.h"
#include "transport/channel_handle.h"
#include "transport/channel_set.h"
#include "transport/raw_endpoints.h"
#include "transport/schema_registry.h"

namespace tether::net {
namespace internal {

inline constexpr size_t kDetailMax = 600;
inline constexpr int kTakeBatch = 64;  // samples per dds_take

inline int64_t ClockNs(clockid_t id) {
  struct timespec ts;
  ::clock_gettime(id, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

inline std::string DdsError(const char* what, dds_return_t rc) {
  return absl::StrCat(what, ": ", dds_strretcode(rc));
}

// A status detail, cut to kDetailMax bytes.
inline std::string Truncate(std::string s) {
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

// The QoS of one channel's DDS topic (bridge_discovery.cc sets it).
struct DataQos {
  bool reliable = true;
  uint32_t depth = 1;
  double deadline_ms = 0;
};

// One configured channel and direction. Counters are atomics read by the
// status timer; the rest belongs to the thread named at each field.
struct ChannelRun {
  BridgedChannel config;
  std::string topic_name;
  dds_entity_t topic = 0;

  // out (set up on the setup thread, then the loop thread's): the writer
  // and the description announced.
  dds_entity_t writer = 0;
  ChannelDescription described;
  // The stream of this channel's frames (net/frame.idl): taken from the
  // cursor, which keeps it across restarts, or this run's own without one
  // (the bridge's id, nothing written, nothing lost).
  ForwardCursor::Stream stream;
  // Across restarts (forward_cursor.h); null if it could not be opened.
  std::unique_ptr<ForwardCursor> cursor;
  uint64_t incarnation = 0;  // the local channel's, for the cursor
  bool resumed = false;  // this run's gap was counted (ResumeCursor)
  // Messages sent while no bridge ran, not yet told to a peer (they ride on
  // the next frame written with a peer matched, as upstream_missed).
  uint64_t untold_lost = 0;

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

}  // namespace internal

struct Bridge::Impl {
  using ChannelRun = internal::ChannelRun;
  using DataQos = internal::DataQos;

  BridgeOptions options;
  BridgeRuntime runtime;
  uint64_t id = 0;
  pid_t pid = 0;
  std::string where;  // "bridge <name> on host <host>"
  // This bridge's instance folder, symbolic links resolved (announced).
  std::string instance;
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

  // --- bridge.cc ---

  // Bridge::Create's work: the DDS domain on the configured interface, the
  // participant, publisher/subscriber, announcement topic and waitset; the
  // tether channels and loop; then SetUpOut / SetUpIn per channel. Errors
  // say what to fix. Setup thread, once; allocates.
  absl::Status Setup();
  // The receive thread: waits on the waitset (500 ms at most, so
  // `stopping` is seen) and hands announcements to TakeAnnouncements and
  // frames to TakeFrames. Blocks; allocates (Cyclone).
  void ReceiveLoop();
  // The status of every channel (takes each latency window). Any thread.
  BridgeSnapshot Snapshot();
  // `s` on the status channel; a failed publish is said on stderr. Loop
  // thread (the status timer); allocates.
  void PublishStatus(const BridgeSnapshot& s);

  // --- bridge_discovery.cc ---

  // An out channel: its writer (with a peer-matching listener), its
  // description announced (kept for late joiners), its loop watcher
  // (Forward). Errors name the channel. Setup thread; allocates.
  absl::Status SetUpOut(ChannelRun& c);
  // Opens `c`'s forwarding cursor (forward_cursor.h) once its watcher
  // exists; on failure says so in its detail and on stderr, and runs on.
  // `start`: where the run's watcher starts (or, `again`, the position of
  // a cursor made again under the running bridge). Counts the gap since the
  // cursor's position at once (ResumeCursor, once a run), and says why when
  // the file's position could not be used (forward_cursor.h
  // started_afresh). The run's frames go on with the cursor's stream
  // (`keep` for the file made again). Setup thread, or the loop thread when
  // `again`.
  void OpenCursor(ChannelRun& c, uint64_t start, bool again,
                  const ForwardCursor::Stream* keep = nullptr);
  // The message at `index` was handled: the cursor moves past it. A cursor
  // file truncated under the bridge is made again at this position (said
  // on stderr and in the detail). Loop thread.
  void AdvanceCursor(ChannelRun& c, uint64_t index);
  // The cursor file removed, replaced or cut short under the running
  // bridge (ForwardCursor::Gone) is made again at its position, said on
  // stderr and in the detail. Loop thread (the status timer).
  void CheckCursor(ChannelRun& c);
  // AdvanceCursor's and CheckCursor's remedy: says `what` happened to the
  // file and opens the cursor again at its position with the run's stream.
  // Loop thread.
  void RemakeCursor(ChannelRun& c, const std::string& what);
  // An in channel: waits for an announcement (state kWaiting). Setup thread.
  absl::Status SetUpIn(ChannelRun& c);
  // Takes every pending announcement and offers those of our in channels
  // to Accept. Receive thread; allocates.
  void TakeAnnouncements();
  // Checks a sender's announcement: a schema that does not match its hash,
  // or a description incompatible with the accepted one or with the local
  // channel, refuses that sender (the status says why); the first good one
  // makes (or opens) the local channel, its publisher and the DDS reader.
  // Receive thread; allocates.
  void Accept(ChannelRun& c, const ChannelDescription& remote,
              uint64_t sender, const tether_net_ChannelAnnounce& a);
  // The reader of an accepted in channel, attached to the waitset (the
  // channel's index + 2). A negative DDS code on failure. Receive thread.
  dds_entity_t MakeReaderFor(ChannelRun& c, const DataQos& qos);

  // --- bridge_frames.cc ---

  // One local message out as a Frame (payload borrowed, not copied);
  // skipped if this process published it (it came from the network); a
  // failed write is counted as dropped. Loop thread (out watcher); Cyclone
  // allocates and locks.
  void Forward(ChannelRun& c, const transport::RawMessage& m);
  // Once per run, when the cursor opens (`first`: where the watcher
  // starts): counts what was sent while no run of this bridge forwarded it
  // (its cursor), in LOST SRC, the detail and stderr. Setup thread.
  void ResumeCursor(ChannelRun& c, uint64_t first);
  // Takes every pending frame of an accepted in channel and Delivers it.
  // Receive thread.
  void TakeFrames(ChannelRun& c);
  // One frame into the local channel with its send times (mapped onto
  // this host's clock across machines); frames of refused senders or
  // another type are dropped, old sequence numbers counted as duplicates,
  // gaps as network loss, per stream (across the sender's restarts).
  // Receive thread; never waits for readers.
  void Deliver(ChannelRun& c, const tether_net_Frame& f);
};

}  // namespace tether::net

#endif  // TETHER_NET_BRIDGE_IMPL_H_
