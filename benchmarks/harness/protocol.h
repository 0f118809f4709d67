// benchmarks: the ping-pong protocol every runner follows, whatever carries
// the bytes. A runner's system code only moves payloads through its API
// (publish, take, callbacks); these drivers decide what to send, stamp and
// record it in the shared Board, so every system is measured the same way.
//
// Every payload starts with a 16-byte header {sequence, send time ns}.
// Latency/fanout sessions, per case: sequences 0..warmup+samples-1 (one
// message in flight; every ponger replies with the case's size and mode),
// then a stop message (sequence kStop) each ponger answers after saving its
// context-switch counts; after the last case the pinger sends kTerminate and
// the pongers exit. Throughput sessions: per phase the publisher sends
// sequences 0..n-1 paced at the phase's rate, then kStop (the header's time
// field carries the phase number) until the subscriber has reported what it
// got; kTerminate ends the subscriber.
//
// Threading: each driver belongs to the thread that calls it (the loop or
// receive thread of one process). Calls during a run do not allocate.
#ifndef TETHER_BENCHMARKS_HARNESS_PROTOCOL_H_
#define TETHER_BENCHMARKS_HARNESS_PROTOCOL_H_

#include <sys/resource.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include "absl/types/span.h"
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "benchmarks/harness/session.h"

namespace tether::bench {

inline constexpr uint64_t kStop = ~uint64_t{0};
inline constexpr uint64_t kTerminate = ~uint64_t{0} - 1;

struct Header {
  uint64_t sequence = 0;
  uint64_t send_ns = 0;
};
static_assert(sizeof(Header) == 16);

// CLOCK_MONOTONIC in ns (system-wide: stamps compare across processes).
uint64_t NowNs();
Header ReadHeader(absl::Span<const std::byte> payload);

// Context switches of this process so far (all threads), getrusage.
struct Switches {
  int64_t voluntary = 0;
  int64_t involuntary = 0;
};
Switches ProcessSwitches();

// What one case left in the board.
struct CaseResult {
  std::atomic<int> done{0};
  int32_t samples = 0;
  Switches ping;
  Switches pong[kMaxPongs];
};

// One throughput phase.
struct PhaseResult {
  double target_rate = 0;
  double achieved_rate = 0;  // what the publisher managed to send
  int64_t sent = 0;
  int64_t received = 0;
  int64_t lost = 0;  // sequence gaps seen by the subscriber
  int64_t send_failures = 0;
  Switches publisher;
  Switches subscriber;
  bool ok = false;
  bool retry = false;  // the second try of a rate that failed once
};

// Shared between the supervisor and its children (an anonymous MAP_SHARED
// mapping made before fork). Fixed part, then the sample arrays.
struct Board {
  std::atomic<int> pongs_ready{0};
  std::atomic<int> ping_ready{0};
  std::atomic<int> failed{0};
  // Bumped by the pinger per completed round and by the rate sender per
  // phase: the supervisor calls a session that stops moving a hang.
  std::atomic<uint64_t> progress{0};
  char error[1024] = {};
  char info[1024] = {};
  // Throughput: how many messages the subscriber side can hold (the
  // system's queue, set by the runner), for the results.
  int queue_depth = 0;
  // Fanout: each ponger's receive time of the current message.
  std::atomic<uint64_t> pong_recv_ns[kMaxPongs] = {};
  CaseResult cases[kMaxCases];
  std::atomic<int> phases_reported{0};
  int phase_count = 0;
  PhaseResult phases[kMaxPhases];
  // Offsets (in int64s, after the Board) of each case's arrays.
  size_t sample_offset[kMaxCases] = {};
  size_t total_samples = 0;

  // Per case: round trip; fanout: one-way latency of the last subscriber
  // and the publisher's send cost. ns.
  int64_t* rtt(int c) { return Samples() + sample_offset[c]; }
  int64_t* oneway(int c) { return Samples() + total_samples + sample_offset[c]; }
  int64_t* send_cost(int c) {
    return Samples() + 2 * total_samples + sample_offset[c];
  }

  // Records the first failure (later ones are dropped). Any process.
  void Fail(const std::string& message);
  void SetInfo(const std::string& message);

 private:
  int64_t* Samples() { return reinterpret_cast<int64_t*>(this + 1); }
};

// Maps a zeroed board sized for `session` (shared with forked children).
// Never unmapped: the process exits after the session.
absl::StatusOr<Board*> MapBoard(const Session& session);

// The bytes a sender copies from in kFull mode (pattern-filled, prefaulted).
class PayloadSource {
 public:
  explicit PayloadSource(uint32_t max_payload);
  // Writes a payload of out.size() bytes in `mode` with `header` first.
  // RT-safe: a memcpy (kFull) and 16 bytes.
  void Write(absl::Span<std::byte> out, WriteMode mode, const Header& header);

 private:
  std::vector<std::byte> bytes_;
};

// The pinger (latency, fanout). A case ends after its samples, or after
// Session::case_budget_ms of recording (a slow system: at least 30 samples);
// the board then holds how many it recorded. Usage from the system's code:
//   Outgoing o = ping.Next();            // at start and after Reply()==true
//   if (o.kind == kTerminate) { send a kMinPayload message; stop; }
//   span = the system's buffer of o.size bytes; ping.Write(span, o);
//   ping.BeforeSend(); <send>; ping.AfterSend();
//   ...on each reply from ponger i: if (ping.Reply(i, header)) next message.
class PingDriver {
 public:
  enum class Kind { kData, kStop, kTerminate };
  struct Outgoing {
    Kind kind = Kind::kData;
    uint64_t sequence = 0;
    uint32_t size = kMinPayload;
    WriteMode mode = WriteMode::kTouch16;
  };

  PingDriver(const Session& session, Board* board);

  // The next message (stamps its send time). Terminate after the last case.
  Outgoing Next();
  void Write(absl::Span<std::byte> out, const Outgoing& o);
  void BeforeSend();
  void AfterSend();
  // A reply arrived from ponger `pong`. True when every ponger has answered
  // the message in flight (call Next()). Replies to other sequences: false.
  bool Reply(int pong, const Header& header);

  bool finished() const { return case_ >= static_cast<int>(cases_.size()); }
  // The case being run (valid until finished()).
  const Case& current() const { return cases_[case_]; }

 private:
  // A case cut short by its budget still has at least this many samples.
  static constexpr uint64_t kMinSamplesInBudget = 30;

  const std::vector<Case> cases_;
  const int pongs_;
  const uint64_t budget_ns_;  // 0: none
  Board* const board_;
  PayloadSource source_;
  int case_ = 0;
  uint64_t measure_start_ = 0;  // the first recorded message's send
  uint64_t next_ = 0;      // the next data sequence of the case
  uint64_t sequence_ = 0;  // of the message in flight
  bool stop_in_flight_ = false;
  Switches ping_start_;
  uint64_t t_start_ = 0;
  uint64_t t_send_ = 0;
  uint64_t send_cost_ = 0;
  int replies_ = 0;
  uint32_t replied_mask_ = 0;
};

// A ponger (latency, fanout): answers each message.
class PongDriver {
 public:
  enum class Kind { kReply, kExit, kIgnore };
  struct Action {
    Kind kind = Kind::kIgnore;
    uint64_t sequence = 0;
    uint32_t size = kMinPayload;
    WriteMode mode = WriteMode::kTouch16;
  };

  PongDriver(const Session& session, Board* board, int index);
  // Call first thing for each received payload (stamps the receive time).
  Action OnMessage(absl::Span<const std::byte> payload);
  void Write(absl::Span<std::byte> out, const Action& a);

 private:
  const std::vector<Case> cases_;
  Board* const board_;
  const int index_;
  PayloadSource source_;
  int case_ = 0;
  Switches start_;
};

// The throughput publisher: runs the phases (doubling the rate from
// start_rate while nothing is lost, then bisecting between the last good and
// the first bad rate; a rate that fails is tried once more), calling `send`
// for each message; send returns false when the system refused it (counted
// as a failure of the phase).
// Blocks the calling thread for the whole test.
class RateSender {
 public:
  RateSender(const Session& session, Board* board);
  using SendFn = absl::FunctionRef<bool(const Header& header, uint32_t size)>;
  absl::Status Run(SendFn send);

 private:
  bool RunPhase(int phase, double rate, SendFn send, PhaseResult* r);
  const Session& session_;
  Board* const board_;
};

// The throughput subscriber: counts what arrives per phase and reports it.
class RateCounter {
 public:
  explicit RateCounter(Board* board) : board_(board) {}
  // True when the subscriber should exit (kTerminate).
  bool OnMessage(absl::Span<const std::byte> payload);

 private:
  Board* const board_;
  int64_t received_ = 0;
  int64_t lost_ = 0;
  uint64_t next_ = 0;
  Switches start_;
  bool started_ = false;
};

}  // namespace tether::bench

#endif  // TETHER_BENCHMARKS_HARNESS_PROTOCOL_H_
