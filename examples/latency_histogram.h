// examples: a fixed-size latency histogram for the monitor node: log-linear
// buckets (16 per power of two, so a percentile is within about 6% of the
// true value), no allocation when recording or querying.
#ifndef TETHER_EXAMPLES_LATENCY_HISTOGRAM_H_
#define TETHER_EXAMPLES_LATENCY_HISTOGRAM_H_

#include <array>
#include <cstdint>

namespace tether::examples {

// Not thread-safe; every method is RT-safe (no allocation, no syscall).
class LatencyHistogram {
 public:
  // Records one latency; negative values (clock skew) count as 0.
  void Record(int64_t ns);
  void Clear();

  uint64_t count() const { return count_; }
  int64_t max_ns() const { return max_ns_; }
  // The `q`-quantile (0..1): the upper edge of the bucket holding it, but
  // never above the largest value recorded. 0 when empty.
  int64_t Quantile(double q) const;

 private:
  static constexpr int kLinear = 32;      // values 0..31 ns exactly
  static constexpr int kSubBuckets = 16;  // per power of two above
  static constexpr int kMaxExponent = 42; // ~73 minutes; larger clamp
  static constexpr int kBuckets = kLinear + (kMaxExponent - 4) * kSubBuckets;

  static int BucketOf(uint64_t v);
  static int64_t UpperEdge(int bucket);

  std::array<uint64_t, kBuckets> buckets_{};
  uint64_t count_ = 0;
  int64_t max_ns_ = 0;
};

}  // namespace tether::examples

#endif  // TETHER_EXAMPLES_LATENCY_HISTOGRAM_H_
