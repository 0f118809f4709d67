#include "examples/latency_histogram.h"

#include "gtest/gtest.h"

namespace tether::examples {
namespace {

TEST(LatencyHistogram, QuantilesAreWithinABucketOfTheTruth) {
  LatencyHistogram h;
  for (int64_t v = 1; v <= 100000; ++v) h.Record(v);
  EXPECT_EQ(h.count(), 100000u);
  EXPECT_EQ(h.max_ns(), 100000);
  // 16 buckets per power of two: at most 1/16 above the true value.
  EXPECT_GE(h.Quantile(0.5), 50000);
  EXPECT_LE(h.Quantile(0.5), 50000 * 17 / 16);
  EXPECT_GE(h.Quantile(0.99), 99000);
  EXPECT_LE(h.Quantile(0.99), 100000);  // never above the max
  EXPECT_EQ(h.Quantile(1.0), 100000);
  EXPECT_EQ(h.Quantile(0.0), 1);
}

TEST(LatencyHistogram, SmallValuesAreExactAndNegativesCountAsZero) {
  LatencyHistogram h;
  EXPECT_EQ(h.Quantile(0.5), 0);  // empty
  h.Record(-5);
  h.Record(7);
  h.Record(7);
  EXPECT_EQ(h.Quantile(0.2), 0);
  EXPECT_EQ(h.Quantile(0.5), 7);
  EXPECT_EQ(h.max_ns(), 7);
  h.Clear();
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.Quantile(0.5), 0);
}

TEST(LatencyHistogram, HugeValuesLandInTheLastBucket) {
  LatencyHistogram h;
  h.Record(int64_t{1} << 60);
  h.Record(1000);
  EXPECT_EQ(h.Quantile(1.0), int64_t{1} << 60);
  EXPECT_LE(h.Quantile(0.5), 1000 * 17 / 16);
}

}  // namespace
}  // namespace tether::examples
