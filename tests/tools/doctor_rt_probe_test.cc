// `tether doctor`'s deadline-mode check and the --rt-probe report: verdicts,
// fixes, and that a stored verdict changes the mode the doctor reports.
#include "tools/doctor_rt_probe.h"

#include <string>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace tether::tools {
namespace {

loop::RtProbeResult Probed(loop::RingWaitTimer verdict) {
  loop::RtProbeResult r;
  r.verdict = verdict;
  r.reason = "the numbers";
  r.cpu = 1;
  r.preempt_rt = true;
  r.kernel_release = "6.12.107+deb13-rt-amd64";
  return r;
}

TEST(DeadlineTimerCheck, WarnsOnPreemptRtUntilAProbeRan) {
  loop::KernelFeatures rt;
  rt.preempt_rt = true;
  CheckResult c = CheckDeadlineTimer(rt);
  EXPECT_EQ(c.id, "deadline_timer");
  EXPECT_EQ(c.verdict, Verdict::kWarn);
  EXPECT_NE(c.fix.find("--rt-probe"), std::string::npos) << c.fix;
  EXPECT_NE(c.detail.find("hard-timer"), std::string::npos) << c.detail;

  loop::RtProbeRecord hard;
  hard.ring_wait = loop::RingWaitTimer::kHard;
  hard.path = "/run/tether/rt-probe";
  rt.rt_probe = hard;
  c = CheckDeadlineTimer(rt);
  EXPECT_EQ(c.verdict, Verdict::kOk);
  EXPECT_NE(c.detail.find("io_uring wait timeouts"), std::string::npos)
      << c.detail;
  EXPECT_NE(c.detail.find("/run/tether/rt-probe"), std::string::npos);
}

TEST(DeadlineTimerCheck, IsOkAndRingWaitOffPreemptRt) {
  const CheckResult c = CheckDeadlineTimer(loop::KernelFeatures{});
  EXPECT_EQ(c.verdict, Verdict::kOk);
  EXPECT_TRUE(c.fix.empty());
  EXPECT_NE(c.detail.find("not PREEMPT_RT"), std::string::npos) << c.detail;
}

TEST(RtProbeCheck, HardIsOkSoftAndInconclusiveWarnWithAFix) {
  const absl::Status ok = absl::OkStatus();
  CheckResult c =
      RtProbeCheckResult(Probed(loop::RingWaitTimer::kHard), ok, "/run/x");
  EXPECT_EQ(c.id, "rt_probe");
  EXPECT_EQ(c.verdict, Verdict::kOk);
  EXPECT_NE(c.detail.find("hard"), std::string::npos);
  EXPECT_NE(c.detail.find("stored in /run/x"), std::string::npos) << c.detail;

  c = RtProbeCheckResult(Probed(loop::RingWaitTimer::kSoft), ok, "/run/x");
  EXPECT_EQ(c.verdict, Verdict::kWarn);
  EXPECT_NE(c.fix.find("6.12.115"), std::string::npos) << c.fix;

  c = RtProbeCheckResult(Probed(loop::RingWaitTimer::kInconclusive), ok, "");
  EXPECT_EQ(c.verdict, Verdict::kWarn);
  EXPECT_NE(c.fix.find("quiet"), std::string::npos) << c.fix;
}

TEST(RtProbeCheck, AProbeThatCouldNotRunOrBeStoredWarns) {
  CheckResult c = RtProbeCheckResult(
      absl::PermissionDeniedError("SCHED_FIFO needs CAP_SYS_NICE"),
      absl::OkStatus(), "");
  EXPECT_EQ(c.verdict, Verdict::kWarn);
  EXPECT_NE(c.detail.find("CAP_SYS_NICE"), std::string::npos) << c.detail;
  EXPECT_FALSE(c.fix.empty());

  c = RtProbeCheckResult(Probed(loop::RingWaitTimer::kHard),
                         absl::PermissionDeniedError("/run/tether: denied"), "");
  EXPECT_EQ(c.verdict, Verdict::kWarn);
  EXPECT_NE(c.detail.find("not stored"), std::string::npos) << c.detail;
}

}  // namespace
}  // namespace tether::tools
