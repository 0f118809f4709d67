// net: the net bridge — forwards chosen tether channels between hosts over
// Cyclone DDS. Per configured channel and direction:
//   out: a watcher on the local channel writes each message, as opaque
//        framed bytes in a Frame (frame.idl), to the DDS topic
//        "tether/<channel>" with the channel's QoS, and the channel's
//        description (type, schema, max size, rate, depth, QoS) is announced
//        on the discovery topic "tether/channels";
//   in:  the first compatible announcement makes (or checks) the local
//        channel; frames are published on it with their original send
//        times, so `tether stat` shows end-to-end latency.
// Loss is counted exactly from per-sender sequence numbers; a message this
// bridge published into its host is never forwarded back out (loop
// prevention); peers lost with the link are found again when it returns.
//
// Threads: the caller's thread runs the tether event loop (out watchers and
// the status timer); one receive thread waits on a DDS waitset (in frames
// and announcements). The bridge is not a real-time node: both paths call
// into Cyclone DDS, which allocates and locks.
#ifndef TETHER_NET_BRIDGE_H_
#define TETHER_NET_BRIDGE_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "net/bridge_config.h"
#include "net/channel_stats.h"
#include "shm/channel.h"

namespace tether::net {

// What main() knows about this process and host.
struct BridgeRuntime {
  shm::ChannelOptions channels;  // root and instance of this host's stack
  std::string host;              // host name, for peers' messages
  std::string boot_id;           // /proc/sys/kernel/random/boot_id
  // Readable when the bridge must stop (loop::StopSignals::fd()); -1: none.
  int stop_fd = -1;
  std::chrono::milliseconds status_interval{1000};
};

enum class ChannelState { kWaiting, kActive, kNoPeer, kRefused, kFailed };
const char* ToString(ChannelState state);

// One channel's line of the bridge's status. Counters are totals since
// start; latency covers the last status interval.
struct ChannelSnapshot {
  std::string name;
  Direction direction = Direction::kOut;
  ChannelState state = ChannelState::kWaiting;
  std::string detail;
  bool reliable = true;
  uint32_t history_depth = 0;
  double deadline_ms = 0;
  uint32_t peers = 0;
  uint32_t reconnects = 0;
  uint64_t messages = 0;
  uint64_t bytes = 0;
  uint64_t lost_network = 0;
  uint64_t lost_at_sender = 0;
  uint64_t dropped = 0;
  uint64_t duplicates = 0;
  uint64_t deadline_missed = 0;
  LatencySummary latency;
};

struct BridgeSnapshot {
  std::string bridge;
  std::string host;
  uint64_t bridge_id = 0;
  uint32_t domain = 0;
  std::string partition;
  std::string interface;
  double uptime_seconds = 0;
  std::vector<ChannelSnapshot> channels;
};

// The status as a table for people (one line per channel, details below).
std::string FormatSnapshot(const BridgeSnapshot& snapshot);

// The status channel of bridge `name`: /tether/net/<name>/status.
std::string StatusChannelName(const std::string& name);

// OK if `interface` exists on this host; else FailedPrecondition naming
// the interfaces there and the config field to fix. Create() and --check
// call it. Setup.
absl::Status CheckInterface(const std::string& interface);

// OK if every peer ("host" or "host:port") is an address or a name that
// resolves now; else FailedPrecondition naming the first that does not
// (peers[i], what the resolver said). --check fails on it; a run only
// warns (a name may resolve once the network is up). Setup; may block on
// the resolver (DNS).
absl::Status CheckPeers(const std::vector<std::string>& peers);

class Bridge {
 public:
  // Joins the DDS domain on the one configured interface (FailedPrecondition
  // when it does not exist here), opens the out channels (NotFound naming a
  // missing one), creates the status channel and every DDS entity, and
  // announces the out channels. Errors say what to fix. Setup; allocates.
  static absl::StatusOr<std::unique_ptr<Bridge>> Create(
      const BridgeOptions& options, const BridgeRuntime& runtime);
  ~Bridge();
  Bridge(const Bridge&) = delete;
  Bridge& operator=(const Bridge&) = delete;

  // Forwards until Exit() or the stop fd. Every status interval it
  // publishes the status on its channel and calls `on_status` (on the
  // calling thread). Call once.
  void Run(absl::AnyInvocable<void(const BridgeSnapshot&)> on_status);
  // Makes Run() return. Any thread, async-signal-safe.
  void Exit();

  // The current status (takes the latency window: meant for the status
  // timer and the end of Run()). Any thread.
  BridgeSnapshot Snapshot();
  uint64_t id() const;

 private:
  struct Impl;
  explicit Bridge(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tether::net

#endif  // TETHER_NET_BRIDGE_H_
