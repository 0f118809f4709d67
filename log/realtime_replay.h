// log: real-time replay of a log into shared memory (`tether replay`).
// Creates the logged channels that do not exist (with their logged type and
// queue shape), and refuses, naming both sides, a channel that exists with
// another type or shape. Then publishes every message at its logged send
// time (scaled by the rate) with its bytes unchanged and, unless restamping,
// its logged send times in the slot (monotonic and realtime; with --loop each
// later round is shifted by whole log durations so times keep increasing).
//
// Threading: Run() on one thread (it publishes and sleeps); the controls
// (SetPaused, Step, SetRate) and progress() on any thread. Not RT-safe; the
// publishing itself is RawPublisher::Publish (RT-safe).
#ifndef TETHER_LOG_REALTIME_REPLAY_H_
#define TETHER_LOG_REALTIME_REPLAY_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "log/log_reader.h"
#include "log/replay_plan.h"
#include "shm/channel.h"
#include "transport/channel_handle.h"
#include "transport/raw_endpoints.h"
#include "transport/schema_registry.h"

namespace tether::log {

// The rates a replay takes (options.rate, SetRate): up to a million times
// slower or faster than the log was recorded.
inline constexpr double kMinReplayRate = 1e-6;
inline constexpr double kMaxReplayRate = 1e6;

struct RealtimeReplayOptions {
  shm::ChannelOptions channels;
  // Logged channel names or globs to replay (empty: all replayable).
  std::vector<std::string> select;
  // Logged name -> name to publish on.
  std::vector<std::pair<std::string, std::string>> remaps;
  double rate = 1.0;  // 2 = twice as fast; kMinReplayRate..kMaxReplayRate
  // Seconds from the log's first message.
  std::optional<double> start_s;
  std::optional<double> end_s;
  bool loop = false;
  // Stamp the replay's own send times instead of the logged ones.
  bool restamp = false;
  // Start paused (Step() / SetPaused(false) go on).
  bool start_paused = false;
  // Sleep until this long before each message is due, then spin: sends land
  // closer to their time at the cost of CPU (0: sleep all the way).
  std::chrono::nanoseconds spin{0};
};

struct ReplayProgress {
  int64_t position_ns = 0;  // log time of the last message sent, from start
  int64_t duration_ns = 0;  // of the replayed range
  double rate = 1;
  uint64_t messages = 0;    // published so far (all rounds)
  uint64_t failed = 0;      // publishes that failed (Run() returns which)
  // Not published: not a valid Cap'n Proto message (framing or pointers
  // bad; see RealtimeReplay::malformed()). Not in `failed`.
  uint64_t malformed = 0;
  // Damaged parts of the log that held messages of the replayed channels
  // and range (chunks that could not be read, found on Create() or while
  // replaying): those messages were not replayed; notes() says where.
  uint64_t damaged = 0;
  int round = 0;
  bool paused = false;
  bool done = false;
};

// Messages of one channel that were not published because they are not
// valid messages (RawPublisher::Publish refused them: kMalformed).
struct MalformedMessages {
  std::string name;  // the channel they were for
  uint64_t count = 0;
  // The first one: seconds from the start of the log, and why (Cap'n
  // Proto's description).
  double first_s = 0;
  std::string why;
};

// What Create() did with one channel.
struct ReplayedChannel {
  std::string logged_name;
  std::string name;  // published on
  std::string type_name;
  bool created = false;  // the replay created it (it did not exist)
};

class RealtimeReplay {
 public:
  // Opens the log and prepares every channel and publisher. Errors say what
  // to do: a rate outside kMinReplayRate..kMaxReplayRate, a channel that exists
  // with another shape (remove it, or remap), a channel with no free publisher
  // slot (its publishers are running).
  static absl::StatusOr<std::unique_ptr<RealtimeReplay>> Create(
      const std::string& path, const RealtimeReplayOptions& options);
  ~RealtimeReplay();
  RealtimeReplay(const RealtimeReplay&) = delete;
  RealtimeReplay& operator=(const RealtimeReplay&) = delete;

  // Publishes until the end of the range (every round with loop) or until
  // `stop` returns true (polled at least every 50 ms). Returns OK, or the
  // sends that failed, per channel (PublishFailures::Summary; the replay
  // goes on past them). Messages that are not
  // valid (the check every typed reader makes: bad framing or pointers) are
  // not published into the live stack: they are skipped and counted
  // (progress().malformed, malformed()), not errors here.
  absl::Status Run(const std::function<bool()>& stop);

  // Controls; any thread.
  void SetPaused(bool paused);
  void TogglePause();
  // While paused: publish the next message now and stay paused.
  void Step();
  // Clamped to kMinReplayRate..kMaxReplayRate; NaN is ignored.
  void SetRate(double rate);

  ReplayProgress progress() const;
  const std::vector<ReplayedChannel>& channels() const { return channels_; }
  // Channels skipped, damage met while reading. Not while Run() runs.
  const std::vector<std::string>& notes() const { return notes_; }
  // Per channel, the messages skipped as malformed. Not while Run() runs.
  const std::vector<MalformedMessages>& malformed() const { return malformed_; }

 private:
  RealtimeReplay() = default;
  absl::Status Prepare(const std::string& path);
  // Waits until the message at log time `t` is due (or a step, or stop).
  // False when stopped. Without `take_step`, a pending step while paused
  // passes the wait without being used (a round's boundary is no message).
  bool WaitUntilDue(int64_t t, const std::function<bool()>& stop,
                    bool take_step);
  // Whether damage `p` can have held messages this replay plays: its chunk
  // (by the summary's index) has one of the replayed channels and log
  // times near the range; unknown chunks count.
  bool DamageConcernsReplay(const McapProblem& p) const;
  // Counts damage `p` that lost messages (once per offset) and notes it.
  // Under mu_ once Run() runs.
  void NoteDamage(const McapProblem& p);
  // Counts `m`, refused as malformed on `channel`, in malformed_.
  void NoteMalformed(const std::string& channel, const LogMessage& m);

  RealtimeReplayOptions options_;
  std::unique_ptr<LogReader> reader_;
  std::vector<ReplayChannel> plan_;
  transport::SchemaRegistry schemas_;
  std::vector<std::unique_ptr<transport::ChannelHandle>> handles_;
  std::vector<std::unique_ptr<transport::RawPublisher>> publishers_;
  std::map<uint16_t, transport::RawPublisher*> by_channel_;
  std::vector<ReplayedChannel> channels_;
  std::vector<std::string> notes_;
  std::vector<MalformedMessages> malformed_;
  std::set<uint64_t> damage_seen_;  // offsets of NoteDamage's problems
  int64_t range_start_ns_ = 0;
  int64_t range_end_ns_ = 0;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool paused_ = false;
  int steps_ = 0;
  double rate_ = 1;
  // Anchor: log time `anchor_log_` is due at CLOCK_MONOTONIC `anchor_wall_`.
  int64_t anchor_log_ = 0;
  int64_t anchor_wall_ = 0;
  ReplayProgress progress_;
};

}  // namespace tether::log

#endif  // TETHER_LOG_REALTIME_REPLAY_H_
