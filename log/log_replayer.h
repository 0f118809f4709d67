// log: deterministic replay of a log against node code, on a
// SimulatedEventLoopFactory (virtual time). Logged messages are published on
// virtual time at their logged monotonic send times (with their logged send
// times stamped, so a node sees exactly the context it saw live), by a
// "log_replay" event loop of the factory; node code under test runs on other
// loops of the same factory and reads them as it would live.
//
// A node under test can take over a logged channel it publishes: the logged
// copy is then replayed on `original_prefix + name` (/original/robot/...),
// and the name itself is left to the node, so its new output can be
// compared with the recorded one.
//
// Determinism: the simulation is single-threaded and ordered by virtual time
// then scheduling order; the replay reads the file in a fixed order (see
// log_reader.h). The same log and the same node code give byte-identical
// outputs on every run.
//
//   auto replayer = LogReplayer::Open("run.mcap",
//                                     {.taken_over = {"/robot/state_estimate"}});
//   auto factory = (*replayer)->MakeFactory();           // channels + replay
//   auto node = EstimatorNode::Create((*factory)->MakeEventLoop("estimator"));
//   (*factory)->RunUntil((*replayer)->end_time());
//   // node before replayer: nodes go before the factory the replayer owns
//
// Threading: one thread (the simulation's). Not RT-safe (setup allocates;
// replaying reads the file).
#ifndef TETHER_LOG_LOG_REPLAYER_H_
#define TETHER_LOG_LOG_REPLAYER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "log/log_reader.h"
#include "log/replay_plan.h"
#include "loop/clock.h"
#include "loop/event_loop.h"
#include "loop/simulated_event_loop.h"
#include "transport/config.h"
#include "transport/schema_registry.h"

namespace tether::log {

struct LogReplayerOptions {
  // Logged channel names or globs to replay (empty: every replayable one).
  std::vector<std::string> channels;
  // Logged channels the code under test publishes itself (see above).
  std::vector<std::string> taken_over;
  std::string original_prefix = "/original";
  // Other renamings, logged name -> replayed name.
  std::vector<std::pair<std::string, std::string>> remaps;
  // Channels the code under test needs that the log lacks, with their shape
  // (their schemas must be in the log or registered by the caller through
  // mutable_schemas() before MakeFactory()).
  std::vector<std::pair<std::string, ChannelDescription>> extra_channels;
  // Seconds from the log's first message.
  std::optional<double> start_s;
  std::optional<double> end_s;
  // Folder for the simulation's private channel files.
  std::string shm_root = "/dev/shm";
};

struct LogReplayerStats {
  uint64_t messages = 0;         // published
  uint64_t publish_failures = 0; // should stay 0 (see publish_error())
  uint64_t late = 0;             // read later than the reorder window allowed
  std::map<std::string, uint64_t> per_channel;  // by replayed name
};

class LogReplayer {
 public:
  // Reads the log's channels and works out the replay. Errors: the log
  // cannot be read, a channel named in the options is not in it or cannot
  // be replayed.
  static absl::StatusOr<std::unique_ptr<LogReplayer>> Open(
      const std::string& path, const LogReplayerOptions& options = {});
  LogReplayer(const LogReplayer&) = delete;
  LogReplayer& operator=(const LogReplayer&) = delete;

  // The channels a simulation of this replay needs: every replayed channel
  // under its replayed name, every taken-over channel under its logged name,
  // the extra channels. Built on first use after Open().
  absl::StatusOr<const transport::StackConfig*> stack();
  // The schemas of those channels (from the log). Register compiled types
  // the code under test uses here if the log lacks them.
  transport::SchemaRegistry& mutable_schemas() { return schemas_; }
  const transport::SchemaRegistry& schemas() const { return schemas_; }
  // Virtual time starts just before the first replayed message, on the same
  // monotonic epoch as the log (so phased loops keep their logged phase),
  // and realtime follows the log's.
  loop::SimulatedOptions simulated_options() const;

  // A factory made of stack(), schemas() and simulated_options(), with the
  // replay registered on it. The replayer owns it (it dies with the
  // replayer, after the replay's own senders): nodes made on it must be
  // destroyed before the replayer.
  absl::StatusOr<loop::SimulatedEventLoopFactory*> MakeFactory();
  // Adds the replay's event loop to `factory` (made from stack()) and
  // schedules the messages. Once per replayer. `factory` must outlive the
  // replayer.
  absl::Status Register(loop::SimulatedEventLoopFactory* factory);

  // Logged send time of the first and last replayed message.
  loop::MonotonicTime start_time() const;
  loop::MonotonicTime end_time() const;
  // Where a logged channel is replayed ("" if it is not).
  std::string ReplayedName(const std::string& logged) const;

  const LogReplayerStats& stats() const { return stats_; }
  // Damage met reading the log (on open, and while replaying): chunks
  // whose messages could not be replayed.
  std::vector<McapProblem> problems() const;
  // OK, or every channel whose sends failed so far, with how many and the
  // first status (PublishFailures::Summary()).
  absl::Status publish_error() const { return failures_.Summary(); }
  // What Open() left out and why ("skipping /x: ..."): channels the default
  // selection or a glob matched that cannot be replayed.
  const std::vector<std::string>& notes() const { return notes_; }
  LogReader& reader() { return *reader_; }

 private:
  LogReplayer() = default;
  void PublishDue();

  LogReplayerOptions options_;
  std::unique_ptr<LogReader> reader_;
  std::vector<ReplayChannel> plan_;
  std::vector<std::string> taken_over_;
  transport::SchemaRegistry schemas_;
  std::optional<transport::StackConfig> stack_;
  // Declared before the senders: destroyed after them.
  std::unique_ptr<loop::SimulatedEventLoopFactory> factory_;
  int64_t range_start_ns_ = 0;
  int64_t range_end_ns_ = 0;

  loop::EventLoop* loop_ = nullptr;
  loop::TimerHandle* timer_ = nullptr;
  std::vector<std::unique_ptr<loop::RawSender>> senders_;  // one a channel
  // By MCAP channel id (several ids may share one: ReplayChannel::ids).
  std::map<uint16_t, loop::RawSender*> sender_of_;
  std::map<uint16_t, std::string> names_;
  std::unique_ptr<LogCursor> cursor_;
  LogMessage next_;
  bool has_next_ = false;
  LogReplayerStats stats_;
  PublishFailures failures_;
  std::vector<std::string> notes_;
};

}  // namespace tether::log

#endif  // TETHER_LOG_LOG_REPLAYER_H_
