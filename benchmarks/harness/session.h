// benchmarks: what one bench session measures, as every ping-pong runner
// (tether, the floors, iceoryx, ROS 1, Cyclone DDS) reads it from its
// command line. The `./tether bench` driver (benchmarks/bench.py) starts one
// runner process per session; the runner forks the pinger and the pongers
// (supervisor.h), which follow the protocol in protocol.h over the system's
// own API and leave their samples in a shared Board; the runner prints them
// as JSON lines.
//
// A session is one system, one placement and a list of cases run in order:
//   latency     ping-pong between one pinger and one ponger; per case a
//               payload size and a write mode; the pinger records each round
//               trip (one-way = round trip / 2).
//   fanout      one publisher, N subscribers, each replying on its own
//               channel; per round the pinger records the latency of the
//               last subscriber to get the message (receive stamp minus send
//               stamp, CLOCK_MONOTONIC is system-wide) and its send cost.
//   throughput  one publisher paced at rising rates, one subscriber counting
//               what arrives; the highest rate with nothing lost.
#ifndef TETHER_BENCHMARKS_HARNESS_SESSION_H_
#define TETHER_BENCHMARKS_HARNESS_SESSION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tether::bench {

// How much of a payload the sender writes per message.
enum class WriteMode {
  // 16 bytes (sequence and send time): what a zero-copy user writes when
  // only a header changes; a copying transport still moves every byte.
  kTouch16,
  // Every byte (a memcpy from the sender's own buffer).
  kFull,
};
const char* WriteModeName(WriteMode mode);  // "touch16", "full"

enum class Test { kLatency, kFanout, kThroughput };
const char* TestName(Test test);  // "latency", "fanout", "throughput"

struct Case {
  uint32_t payload = 64;  // bytes, >= kMinPayload
  WriteMode mode = WriteMode::kTouch16;
  int samples = 1000;     // recorded rounds
  int warmup = 100;       // rounds before those, discarded
};

// Smallest payload: the 16-byte header, rounded up to a cache line.
inline constexpr uint32_t kMinPayload = 64;
inline constexpr int kMaxPongs = 16;
inline constexpr int kMaxCases = 32;
inline constexpr int kMaxSamples = 200000;
inline constexpr int kMaxPhases = 64;

struct Session {
  Test test = Test::kLatency;
  // System-specific (the tether wake backend, "net" or "shm" for Cyclone,
  // "futex" / "spin" for the floors). Empty: the system's default.
  std::string variant;
  int spin_us = 0;          // tether: WakePortOptions::spin
  // tether, latency/fanout: the channels' queueDepth (a power of two >= 2).
  // A channel cycles through queueDepth + 1 slots or more, which for large
  // payloads sets the memory (and TLB) footprint of a ping-pong.
  int queue_depth = 4;
  // tether: shm::ChannelOptions::huge_pages (0: the channels keep 4 KiB
  // pages, for comparison).
  int huge_pages = 1;
  // tether, latency/fanout: --api=raw pings through the raw sender and
  // watcher (the payload's bytes as they are, no Cap'n Proto framing, no
  // message check): the transport and loop without the typed layer, for
  // comparison with the typed ping-pong (the default, --api=typed).
  bool raw_api = false;
  int ping_cpu = -1;        // -1: not pinned
  int pong_cpu = -1;        // every ponger
  int pongs = 1;            // fanout: subscribers (1 otherwise)
  std::vector<Case> cases;  // latency, fanout
  // throughput: phase length, the first rate and the ceiling (messages/s).
  int phase_ms = 300;
  double start_rate = 1000;
  double max_rate = 4e6;
  uint32_t throughput_payload = 64;
  // Where a shared-memory system keeps its files (tether: the channel root;
  // removed when the session ends). The driver passes a unique path.
  std::string shm_root;
  int timeout_s = 300;       // the whole session; then every child is killed
  // Latency/fanout: a case stops recording after this long (0: never), so
  // a system at 100 ms per round trip does not decide the run's length.
  int case_budget_ms = 0;
  std::string out;           // results file (JSON lines); empty: stdout
  std::string name;          // system name in the output and errors
  // Unique per session (the supervisor's pid, set by RunnerMain): systems
  // with a global namespace (DDS topics) add it to their names.
  int run_id = 0;

  // Largest payload of the session (sizes channels and buffers).
  uint32_t max_payload() const;
};

// Parses `argv` (see UsageText()); InvalidArgument naming the bad flag and
// what would be valid. Setup; allocates.
absl::StatusOr<Session> ParseSession(int argc, char** argv);
// The flags every runner takes, for --help. `system` names the runner.
std::string UsageText(const std::string& system);

// "64:touch16:1000:100,4096:full:500:50" <-> cases. A case may omit the
// sample and warm-up counts (then 1000 and 100).
absl::StatusOr<std::vector<Case>> ParseCases(const std::string& text);

}  // namespace tether::bench

#endif  // TETHER_BENCHMARKS_HARNESS_SESSION_H_
