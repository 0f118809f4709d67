// net: the bridge's per-channel accounting that needs no DDS: which frames of
// each sending bridge never arrived (sequence gaps), and latency percentiles
// over one status interval.
#ifndef TETHER_NET_CHANNEL_STATS_H_
#define TETHER_NET_CHANNEL_STATS_H_

#include <cstdint>
#include <mutex>
#include <random>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace tether::net {

// Frames carry (stream id, sequence from 1, messages lost at the sender in
// the whole stream; net/frame.idl). A stream outlives the sending bridge's
// run, so a restarted sender's frames continue its numbers. Not
// thread-safe: the bridge's receive thread owns it. Allocates only for a
// new stream.
class SequenceTracker {
 public:
  enum class Verdict {
    kNext,   // the expected next frame
    kGap,    // frames before this one never arrived (`lost` of them)
    kFirst,  // first frame seen of this stream (a late joiner counts none
             // of the frames sent before it listened as lost)
    kOld,    // not newer than one already seen (late or repeated): skip it
  };
  struct Result {
    Verdict verdict = Verdict::kNext;
    uint64_t lost = 0;
    // Messages lost at the sender since the last frame seen of the stream
    // (the growth of its lost count; 0 for kFirst and kOld, and for a count
    // that went back, which no sender writes).
    uint64_t lost_at_sender = 0;
  };
  Result Observe(uint64_t stream, uint64_t seq, uint64_t lost_total);
  size_t streams() const { return last_.size(); }

 private:
  struct Last {
    uint64_t seq;
    uint64_t lost_total;
  };
  absl::flat_hash_map<uint64_t, Last> last_;
};

struct LatencySummary {
  uint64_t samples = 0;
  double p50_us = 0, p99_us = 0, max_us = 0;
};

// Latency samples of one interval: a bounded reservoir (kCapacity samples,
// uniformly chosen when more arrive; the max is exact). Any thread: Add()
// and Take() take a short mutex (the bridge is not a real-time node).
class LatencyWindow {
 public:
  static constexpr size_t kCapacity = 8192;
  LatencyWindow();
  void Add(int64_t ns);
  // Percentiles since the last Take(), then starts a new interval.
  LatencySummary Take();

 private:
  std::mutex mu_;
  std::vector<int64_t> samples_;
  uint64_t seen_ = 0;
  int64_t max_ = 0;
  std::minstd_rand rng_;
};

}  // namespace tether::net

#endif  // TETHER_NET_CHANNEL_STATS_H_
