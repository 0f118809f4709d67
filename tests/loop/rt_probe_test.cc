// The rt-probe: its verdict rule, the deadline bookkeeping it measures with,
// and how its cached verdict decides a loop's deadline mode (kAuto). The
// live probe runs only where the answer is known: in ./tether rt-lab,
// which sets TETHER_LAB_EXPECT_RING_WAIT=soft|hard per kernel (6.12.107-rt:
// soft; 6.12.117-rt: hard); elsewhere it skips.
#include "loop/rt_probe.h"

#include <sys/stat.h>

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"
#include "loop/kernel_probe.h"
#include "loop/make_wake_port.h"
#include "loop/uring_futex_port.h"
#include "tests/shm/shm_test_util.h"

namespace tether::loop {
namespace {

using std::chrono::milliseconds;

DeadlineStats Stats(int64_t deadlines, int64_t missed, int p50_us = 80) {
  DeadlineStats s;
  s.deadlines = deadlines;
  s.missed = missed;
  s.wakeups = deadlines - missed;
  s.p50 = std::chrono::microseconds(p50_us);
  return s;
}

TEST(JudgeRingWait, MissesFarBeyondTheFloorMeanSoft) {
  std::string reason;
  // 6.12.107-rt in the lab: about half of the deadlines missed.
  EXPECT_EQ(JudgeRingWait(Stats(1000, 487), Stats(1000, 8), &reason),
            RingWaitTimer::kSoft);
  EXPECT_NE(reason.find("soft"), std::string::npos) << reason;
  EXPECT_NE(reason.find("487"), std::string::npos) << reason;
}

TEST(JudgeRingWait, ATypicalWakeupFarLaterThanTheFloorMeansSoft) {
  // 6.12.107-rt on a loaded emulator: both miss a lot, the medians differ.
  EXPECT_EQ(JudgeRingWait(Stats(1004, 548, 652), Stats(1001, 125, 77), nullptr),
            RingWaitTimer::kSoft);
  EXPECT_EQ(JudgeRingWait(Stats(1000, 300, 652), Stats(1000, 300, 77), nullptr),
            RingWaitTimer::kSoft);
  // Later, but not by 100 us, or not twice the floor: not that.
  EXPECT_EQ(JudgeRingWait(Stats(1000, 10, 170), Stats(1000, 10, 80), nullptr),
            RingWaitTimer::kHard);
  EXPECT_EQ(JudgeRingWait(Stats(1000, 10, 390), Stats(1000, 10, 200), nullptr),
            RingWaitTimer::kHard);
}

TEST(JudgeRingWait, MissesLikeTheFloorMeanHard) {
  // 6.12.117-rt in the lab: the same noise as clock_nanosleep.
  EXPECT_EQ(JudgeRingWait(Stats(1000, 17), Stats(1000, 12), nullptr),
            RingWaitTimer::kHard);
  EXPECT_EQ(JudgeRingWait(Stats(1000, 0), Stats(1000, 0), nullptr),
            RingWaitTimer::kHard);
  // A loaded emulator: a third of both missed, same medians.
  EXPECT_EQ(JudgeRingWait(Stats(1002, 317, 76), Stats(1004, 343, 76), nullptr),
            RingWaitTimer::kHard);
  // Within the margin: max(10, 3%) over twice the floor.
  EXPECT_EQ(JudgeRingWait(Stats(1000, 54), Stats(1000, 12), nullptr),
            RingWaitTimer::kHard);
  EXPECT_EQ(JudgeRingWait(Stats(1000, 55), Stats(1000, 12), nullptr),
            RingWaitTimer::kSoft);
}

TEST(JudgeRingWait, AStarvedFloorOrTooFewWakeupsAreInconclusive) {
  EXPECT_EQ(JudgeRingWait(Stats(1000, 700), Stats(1000, 650), nullptr),
            RingWaitTimer::kInconclusive);
  EXPECT_EQ(JudgeRingWait(Stats(150, 75), Stats(150, 0), nullptr),
            RingWaitTimer::kInconclusive);
}

TEST(DeadlineRecorder, CountsLatenessThresholdsAndMisses) {
  DeadlineRecorder r(4);
  r.Record(std::chrono::microseconds(50), 0);
  r.Record(std::chrono::microseconds(150), 0);
  r.Record(std::chrono::microseconds(350), 0);
  r.Record(std::chrono::microseconds(700), 1);
  r.Record(std::chrono::microseconds(20), 0);  // beyond capacity: counted
  const DeadlineStats s = r.Stats();
  EXPECT_EQ(s.wakeups, 5);
  EXPECT_EQ(s.deadlines, 6);
  EXPECT_EQ(s.missed, 1);
  EXPECT_EQ(s.late_100us, 3);
  EXPECT_EQ(s.late_300us, 2);
  EXPECT_EQ(s.max, std::chrono::microseconds(700));
  EXPECT_EQ(s.p50, std::chrono::microseconds(350));  // of the 4 kept
}

TEST(RunDeadlineGrid, EveryGridPointIsWokenForOrCountedMissed) {
  DeadlineRecorder r(1000);
  const MonotonicTime start = MonotonicNow();
  RunDeadlineGrid(start, milliseconds(1), start + milliseconds(20),
                  NanosleepUntil, &r);
  const DeadlineStats s = r.Stats();
  EXPECT_GE(s.deadlines, 20);
  EXPECT_EQ(s.deadlines, s.wakeups + s.missed);
}

TEST(RunDeadlineGrid, AWaiterTwoAndAHalfPeriodsLateMissesTwoPerWakeup) {
  DeadlineRecorder r(100);
  const MonotonicTime start = MonotonicNow();
  RunDeadlineGrid(start, milliseconds(2), start + milliseconds(30),
                  [](MonotonicTime t) { NanosleepUntil(t + milliseconds(5)); },
                  &r);
  const DeadlineStats s = r.Stats();
  ASSERT_GT(s.wakeups, 0);
  EXPECT_GE(s.missed, 2 * s.wakeups);
  EXPECT_GE(s.p50, milliseconds(5));
}

// --- the verdict decides kAuto --------------------------------------------------

KernelFeatures Rt(std::optional<RingWaitTimer> probed) {
  KernelFeatures f;
  f.preempt_rt = true;
  if (probed.has_value()) {
    RtProbeRecord r;
    r.ring_wait = *probed;
    r.path = "/run/tether/rt-probe";
    f.rt_probe = r;
  }
  return f;
}

TEST(ChooseDeadlineTimer, OnPreemptRtTheMeasuredVerdictDecides) {
  EXPECT_TRUE(ChooseDeadlineTimer(DeadlineTimer::kAuto, Rt(std::nullopt)).hard);
  EXPECT_FALSE(
      ChooseDeadlineTimer(DeadlineTimer::kAuto, Rt(RingWaitTimer::kHard)).hard);
  EXPECT_TRUE(
      ChooseDeadlineTimer(DeadlineTimer::kAuto, Rt(RingWaitTimer::kSoft)).hard);
  EXPECT_TRUE(ChooseDeadlineTimer(DeadlineTimer::kAuto,
                                  Rt(RingWaitTimer::kInconclusive))
                  .hard);
  const DeadlineTimerChoice none =
      ChooseDeadlineTimer(DeadlineTimer::kAuto, Rt(std::nullopt));
  EXPECT_NE(none.reason.find("tether doctor --rt-probe"), std::string::npos)
      << none.reason;
}

TEST(ChooseDeadlineTimer, ElsewhereTheRingWaitAndForcedModesStay) {
  KernelFeatures plain;
  EXPECT_FALSE(ChooseDeadlineTimer(DeadlineTimer::kAuto, plain).hard);
  EXPECT_TRUE(ChooseDeadlineTimer(DeadlineTimer::kHard, plain).hard);
  EXPECT_FALSE(
      ChooseDeadlineTimer(DeadlineTimer::kRingWait, Rt(std::nullopt)).hard);
  EXPECT_TRUE(
      ChooseDeadlineTimer(DeadlineTimer::kHard, Rt(RingWaitTimer::kHard)).hard);
}

// Writes `verdict` for this boot to a private cache file, probes the kernel
// with that file, and builds the loop's default port from what it read.
void ExpectLoopFollowsCachedVerdict(RingWaitTimer verdict,
                                    const std::string& dir) {
  KernelFeatures live = ProbeKernel(ProbeOptions{.rt_probe_cache = {}});
  ASSERT_FALSE(live.rt_probe.has_value());
  RtProbeRecord r;
  r.boot_id = ReadBootId();
  r.kernel_release = live.kernel_release;
  r.ring_wait = verdict;
  const std::string path = dir + "/rt-probe";
  ASSERT_TRUE(WriteRtProbeCache(r, {path}, nullptr).ok());
  KernelFeatures features = ProbeKernel(ProbeOptions{.rt_probe_cache = {path}});
  ASSERT_TRUE(features.rt_probe.has_value());
  EXPECT_EQ(features.rt_probe->ring_wait, verdict);
  EXPECT_EQ(features.rt_probe->path, path);
  features.preempt_rt = true;  // as on a PREEMPT_RT kernel
  WakePortOptions options;
  options.backend = WakeBackend::kUringFutex;
  auto port = MakeWakePort(options, features);
  ASSERT_TRUE(port.ok()) << port.status();
  auto* uring = dynamic_cast<UringFutexPort*>(port->get());
  ASSERT_NE(uring, nullptr);
  EXPECT_EQ(uring->hard_deadlines(), verdict != RingWaitTimer::kHard)
      << (*port)->description();
  EXPECT_NE((*port)->description().find(path), std::string::npos)
      << (*port)->description();
}

TEST(RtProbeVerdict, ALoopUsesThisBootsCachedVerdict) {
  if (!ProbeKernel(ProbeOptions{.rt_probe_cache = {}}).op_futex_wait) {
    GTEST_SKIP() << "kernel < 6.7";
  }
  shm::testing::ScopedRoot dir;
  ASSERT_EQ(::mkdir(dir.root().c_str(), 0755), 0);
  ExpectLoopFollowsCachedVerdict(RingWaitTimer::kHard, dir.root());
  ExpectLoopFollowsCachedVerdict(RingWaitTimer::kSoft, dir.root());
  ExpectLoopFollowsCachedVerdict(RingWaitTimer::kInconclusive, dir.root());
}

// --- the live probe (./tether rt-lab) --------------------------------------------

TEST(RtProbeLive, MeasuresTheExpectedVerdictAndTheLoopFollowsIt) {
  const char* expect_text = std::getenv("TETHER_LAB_EXPECT_RING_WAIT");
  if (expect_text == nullptr) {
    GTEST_SKIP() << "runs in ./tether rt-lab, where the kernel's answer is "
                    "known (TETHER_LAB_EXPECT_RING_WAIT=soft|hard)";
  }
  const std::optional<RingWaitTimer> expect = ParseRingWaitTimer(expect_text);
  ASSERT_TRUE(expect.has_value()) << expect_text;
  const KernelFeatures features = ProbeKernel(ProbeOptions{.rt_probe_cache = {}});
  ASSERT_TRUE(features.preempt_rt) << features.kernel_build;
  auto result = RunRtProbe(RtProbeOptions{}, features);
  ASSERT_TRUE(result.ok()) << result.status();
  std::printf("rt-probe on %s: %s\n", features.kernel_release.c_str(),
              result->reason.c_str());
  EXPECT_EQ(result->verdict, *expect) << result->reason;
  shm::testing::ScopedRoot dir;
  ASSERT_EQ(::mkdir(dir.root().c_str(), 0755), 0);
  ExpectLoopFollowsCachedVerdict(result->verdict, dir.root());
}

}  // namespace
}  // namespace tether::loop
