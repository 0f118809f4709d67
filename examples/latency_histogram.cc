#include "examples/latency_histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace tether::examples {

// Buckets: v < 32 -> v. Else with msb = floor(log2 v) >= 5 and the next four
// bits m (v >> (msb - 4) is 16 + m): 32 + (msb - 5) * 16 + m.
int LatencyHistogram::BucketOf(uint64_t v) {
  if (v < kLinear) return static_cast<int>(v);
  const int msb = 63 - std::countl_zero(v);
  if (msb >= kMaxExponent) return kBuckets - 1;
  const int shift = msb - 4;
  const int m = static_cast<int>(v >> shift) - kSubBuckets;
  return kLinear + (msb - 5) * kSubBuckets + m;
}

int64_t LatencyHistogram::UpperEdge(int bucket) {
  if (bucket < kLinear) return bucket;
  const int msb = (bucket - kLinear) / kSubBuckets + 5;
  const int m = (bucket - kLinear) % kSubBuckets;
  const int shift = msb - 4;
  return (static_cast<int64_t>(kSubBuckets + m + 1) << shift) - 1;
}

void LatencyHistogram::Record(int64_t ns) {
  if (ns < 0) ns = 0;
  ++buckets_[BucketOf(static_cast<uint64_t>(ns))];
  ++count_;
  max_ns_ = std::max(max_ns_, ns);
}

void LatencyHistogram::Clear() {
  buckets_.fill(0);
  count_ = 0;
  max_ns_ = 0;
}

int64_t LatencyHistogram::Quantile(double q) const {
  if (count_ == 0) return 0;
  q = std::clamp(q, 0.0, 1.0);
  // The rank of the quantile, 1-based: at least one sample.
  const uint64_t rank = std::max<uint64_t>(
      1, static_cast<uint64_t>(std::ceil(q * static_cast<double>(count_))));
  uint64_t seen = 0;
  for (int b = 0; b < kBuckets; ++b) {
    seen += buckets_[b];
    if (seen >= rank) {
      // The last bucket holds everything too large to bucket.
      return b == kBuckets - 1 ? max_ns_ : std::min(UpperEdge(b), max_ns_);
    }
  }
  return max_ns_;
}

}  // namespace tether::examples
