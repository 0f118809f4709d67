#include "tools/doctor_rt_probe.h"

#include <utility>

#include "loop/make_wake_port.h"

namespace tether::tools {
namespace {

constexpr char kProbeTitle[] =
    "rt-probe: io_uring wait timeouts for real-time waiters";

std::string Describe(const loop::RtProbeResult& r) {
  return "CPU " + std::to_string(r.cpu) + ", kernel " + r.kernel_release +
         (r.preempt_rt ? " (PREEMPT_RT)" : " (not PREEMPT_RT)") + ": " +
         std::string(loop::RingWaitTimerName(r.verdict)) + "; " + r.reason;
}

}  // namespace

CheckResult CheckDeadlineTimer(const loop::KernelFeatures& kernel) {
  const loop::DeadlineTimerChoice choice =
      loop::ChooseDeadlineTimer(loop::DeadlineTimer::kAuto, kernel);
  CheckResult r;
  r.id = "deadline_timer";
  r.title = "deadline mode of loops";
  r.detail = std::string(choice.hard ? "hard-timer deadlines (ppoll)"
                                     : "io_uring wait timeouts") +
             ": " + choice.reason;
  if (kernel.preempt_rt && !kernel.rt_probe.has_value()) {
    r.verdict = Verdict::kWarn;
    r.fix =
        "run `tether doctor --rt-probe` once per boot (e.g. from the unit "
        "that starts the stack) so loops use the mode measured on this "
        "kernel";
  }
  return r;
}

CheckResult RtProbeCheckResult(
    const absl::StatusOr<loop::RtProbeResult>& probe,
    const absl::Status& stored, const std::string& stored_path) {
  CheckResult r;
  r.id = "rt_probe";
  r.title = kProbeTitle;
  if (!probe.ok()) {
    r.verdict = Verdict::kWarn;
    r.detail = "could not run: " + std::string(probe.status().message());
    r.fix =
        "run it as root (or with CAP_SYS_NICE / RLIMIT_RTPRIO >= 40) on a "
        "kernel with io_uring; until then loops on PREEMPT_RT use "
        "hard-timer deadlines";
    return r;
  }
  r.detail = Describe(*probe);
  switch (probe->verdict) {
    case loop::RingWaitTimer::kHard:
      r.verdict = Verdict::kOk;
      break;
    case loop::RingWaitTimer::kSoft:
      r.verdict = Verdict::kWarn;
      r.fix =
          "loops time deadlines with ppoll (a hard timer) instead, 3-4 "
          "syscalls per sleep instead of 1; a kernel with \"io_uring/wait: "
          "wake real-time waiters from hard interrupt context\" (stable "
          "6.12.115 and later) lets them wait in io_uring";
      break;
    case loop::RingWaitTimer::kInconclusive:
      r.verdict = Verdict::kWarn;
      r.fix =
          "run it again with the machine quiet (no real-time stack "
          "running); until then loops use hard-timer deadlines";
      break;
  }
  if (!stored.ok()) {
    r.verdict = Verdict::kWarn;
    r.detail += "; not stored: " + std::string(stored.message());
    if (r.fix.empty()) r.fix = "run it as root so loops can use the verdict";
  } else if (!stored_path.empty()) {
    r.detail += "; stored in " + stored_path + " for this boot";
  }
  return r;
}

CheckResult RunRtProbeCheck(loop::KernelFeatures* kernel,
                            const RtProbeCheckOptions& options) {
  const absl::StatusOr<loop::RtProbeResult> probe =
      loop::RunRtProbe(options.probe, *kernel);
  absl::Status stored = absl::OkStatus();
  std::string path;
  if (probe.ok()) {
    loop::RtProbeRecord record =
        loop::MakeRtProbeRecord(*probe, loop::ReadBootId(options.proc_root));
    stored = loop::WriteRtProbeCache(record, options.cache_paths, &path);
    if (stored.ok()) {
      record.path = path;
      kernel->rt_probe = std::move(record);
    }
  }
  return RtProbeCheckResult(probe, stored, path);
}

}  // namespace tether::tools
