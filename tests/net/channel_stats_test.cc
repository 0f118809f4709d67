#include "net/channel_stats.h"

#include "gtest/gtest.h"

namespace tether::net {
namespace {

using V = SequenceTracker::Verdict;

TEST(SequenceTracker, CountsEveryFrameMissingBetweenTwoThatArrived) {
  SequenceTracker t;
  EXPECT_EQ(t.Observe(7, 1, 0).verdict, V::kFirst);
  EXPECT_EQ(t.Observe(7, 2, 0).verdict, V::kNext);
  const SequenceTracker::Result r = t.Observe(7, 10, 0);
  EXPECT_EQ(r.verdict, V::kGap);
  EXPECT_EQ(r.lost, 7u);
  EXPECT_EQ(t.Observe(7, 11, 0).lost, 0u);
}

TEST(SequenceTracker, LateJoinerCountsNothingSentBeforeItListened) {
  SequenceTracker t;
  const SequenceTracker::Result r = t.Observe(1, 5000, 0);
  EXPECT_EQ(r.verdict, V::kFirst);
  EXPECT_EQ(r.lost, 0u);
}

TEST(SequenceTracker, OldOrRepeatedFramesAreSkippedNotCounted) {
  SequenceTracker t;
  t.Observe(1, 1, 0);
  t.Observe(1, 5, 0);
  EXPECT_EQ(t.Observe(1, 5, 0).verdict, V::kOld);
  EXPECT_EQ(t.Observe(1, 3, 0).verdict, V::kOld);
  EXPECT_EQ(t.Observe(1, 6, 0).verdict, V::kNext);
}

TEST(SequenceTracker, StreamsAreTrackedApart) {
  SequenceTracker t;
  t.Observe(1, 1, 0);
  t.Observe(2, 1, 0);
  EXPECT_EQ(t.Observe(1, 2, 0).verdict, V::kNext);
  EXPECT_EQ(t.Observe(2, 4, 0).lost, 2u);
  EXPECT_EQ(t.streams(), 2u);
}

// A stream's lost count (messages lost at the sender, in all) is counted
// by its growth: exact also when the frames that reported some never
// arrived, e.g. the first frames of a restarted sender written before this
// receiver's reader matched it, which carried the gap of its restart.
TEST(SequenceTracker, CountsTheLostCountsGrowthAlsoAcrossFramesThatNeverArrived) {
  SequenceTracker t;
  EXPECT_EQ(t.Observe(9, 1, 4).lost_at_sender, 0u);  // first: baseline
  EXPECT_EQ(t.Observe(9, 2, 4).lost_at_sender, 0u);
  // Frames 3..5 were lost; they (and this one) reported 7 + 2 more.
  const SequenceTracker::Result r = t.Observe(9, 6, 13);
  EXPECT_EQ(r.verdict, V::kGap);
  EXPECT_EQ(r.lost, 3u);
  EXPECT_EQ(r.lost_at_sender, 9u);
  // A late frame counts nothing; a count that went back counts nothing.
  EXPECT_EQ(t.Observe(9, 4, 8).lost_at_sender, 0u);
  EXPECT_EQ(t.Observe(9, 7, 2).lost_at_sender, 0u);
  EXPECT_EQ(t.Observe(9, 8, 14).lost_at_sender, 1u);
}

TEST(LatencyWindow, PercentilesOfTheIntervalThenStartsAgain) {
  LatencyWindow w;
  for (int i = 1; i <= 100; ++i) w.Add(i * 1000);  // 1..100 us
  LatencySummary s = w.Take();
  EXPECT_EQ(s.samples, 100u);
  EXPECT_DOUBLE_EQ(s.p50_us, 50);
  EXPECT_DOUBLE_EQ(s.p99_us, 99);
  EXPECT_DOUBLE_EQ(s.max_us, 100);
  s = w.Take();
  EXPECT_EQ(s.samples, 0u);
  EXPECT_EQ(s.max_us, 0);
}

TEST(LatencyWindow, KeepsTheExactMaxBeyondItsCapacity) {
  LatencyWindow w;
  for (size_t i = 0; i < 3 * LatencyWindow::kCapacity; ++i) w.Add(1000);
  w.Add(5000000);
  const LatencySummary s = w.Take();
  EXPECT_EQ(s.samples, 3 * LatencyWindow::kCapacity + 1);
  EXPECT_DOUBLE_EQ(s.p50_us, 1);
  EXPECT_DOUBLE_EQ(s.max_us, 5000);
}

}  // namespace
}  // namespace tether::net
