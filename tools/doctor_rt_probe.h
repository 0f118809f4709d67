// tools: the deadline-mode checks of `tether doctor`. Every run reports
// which deadline mode a loop would use here and why (DeadlineTimer::kAuto,
// from this boot's cached rt-probe verdict); `--rt-probe` first runs the
// probe (loop/rt_probe.h: about a second of the deadline experiment) and
// stores its verdict for this boot, so that loops started later use it.
#ifndef TETHER_TOOLS_DOCTOR_RT_PROBE_H_
#define TETHER_TOOLS_DOCTOR_RT_PROBE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "loop/kernel_probe.h"
#include "loop/rt_probe.h"
#include "loop/rt_probe_cache.h"
#include "tools/doctor.h"

namespace tether::tools {

// "deadline_timer": what a loop's default deadline mode resolves to on
// `kernel` (make_wake_port.h ChooseDeadlineTimer); WARN on PREEMPT_RT when
// no probe ran since boot (the fix: run `tether doctor --rt-probe`).
// Pure; any thread; not RT-safe (allocates).
CheckResult CheckDeadlineTimer(const loop::KernelFeatures& kernel);

struct RtProbeCheckOptions {
  loop::RtProbeOptions probe;
  // Where the verdict is stored (the first writable one).
  std::vector<std::string> cache_paths = loop::DefaultRtProbeCachePaths();
  std::string proc_root = "/proc";  // for the boot id
};

// "rt_probe": runs the probe, stores its verdict for this boot and sets
// kernel->rt_probe to what was stored (so CheckDeadlineTimer() after it
// reports the new choice). OK when the io_uring wait timeout is hard; WARN
// when soft (loops then use hard-timer deadlines), inconclusive, or when
// the probe could not run (no SCHED_FIFO) or its verdict not be stored.
// Main thread; not RT-safe; blocks about options.probe.duration.
CheckResult RunRtProbeCheck(loop::KernelFeatures* kernel,
                            const RtProbeCheckOptions& options);

// The "rt_probe" result for a probe outcome and how storing it went
// (`stored_path` empty when it was not stored). Pure, for tests.
CheckResult RtProbeCheckResult(
    const absl::StatusOr<loop::RtProbeResult>& probe,
    const absl::Status& stored, const std::string& stored_path);

}  // namespace tether::tools

#endif  // TETHER_TOOLS_DOCTOR_RT_PROBE_H_
