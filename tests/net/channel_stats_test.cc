#include "net/channel_stats.h"

#include "gtest/gtest.h"

namespace tether::net {
namespace {

using V = SequenceTracker::Verdict;

TEST(SequenceTracker, CountsEveryFrameMissingBetweenTwoThatArrived) {
  SequenceTracker t;
  EXPECT_EQ(t.Observe(7, 1).verdict, V::kFirst);
  EXPECT_EQ(t.Observe(7, 2).verdict, V::kNext);
  const SequenceTracker::Result r = t.Observe(7, 10);
  EXPECT_EQ(r.verdict, V::kGap);
  EXPECT_EQ(r.lost, 7u);
  EXPECT_EQ(t.Observe(7, 11).lost, 0u);
}

TEST(SequenceTracker, LateJoinerCountsNothingSentBeforeItListened) {
  SequenceTracker t;
  const SequenceTracker::Result r = t.Observe(1, 5000);
  EXPECT_EQ(r.verdict, V::kFirst);
  EXPECT_EQ(r.lost, 0u);
}

TEST(SequenceTracker, OldOrRepeatedFramesAreSkippedNotCounted) {
  SequenceTracker t;
  t.Observe(1, 1);
  t.Observe(1, 5);
  EXPECT_EQ(t.Observe(1, 5).verdict, V::kOld);
  EXPECT_EQ(t.Observe(1, 3).verdict, V::kOld);
  EXPECT_EQ(t.Observe(1, 6).verdict, V::kNext);
}

TEST(SequenceTracker, SendersAreTrackedApart) {
  SequenceTracker t;
  t.Observe(1, 1);
  t.Observe(2, 1);
  EXPECT_EQ(t.Observe(1, 2).verdict, V::kNext);
  EXPECT_EQ(t.Observe(2, 4).lost, 2u);
  EXPECT_EQ(t.senders(), 2u);
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
