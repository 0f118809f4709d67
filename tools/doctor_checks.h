// tools: the checks of `tether doctor`. Each judges the gathered facts
// (tools/doctor_inputs.h) as OK, WARN or FAIL and says what to do; pure
// functions of their inputs, so tests feed hand-made machines.
#ifndef TETHER_TOOLS_DOCTOR_CHECKS_H_
#define TETHER_TOOLS_DOCTOR_CHECKS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tools/capabilities.h"  // The bits cap_effective is tested for.
#include "tools/doctor_inputs.h"

namespace tether::tools {

// A locked-memory limit at least this large counts as enough for mlockall()
// in a node with its channels mapped.
inline constexpr uint64_t kMinMemlockBytes = uint64_t{1} << 30;
// Less free space than this under shm_path is a warning.
inline constexpr uint64_t kMinShmFreeBytes = uint64_t{64} << 20;

enum class Verdict { kOk, kWarn, kFail };

// "OK", "WARN", "FAIL". Any thread; RT-safe.
std::string_view VerdictName(Verdict verdict);

struct CheckResult {
  std::string id;     // Stable key for scripts, e.g. "io_uring".
  std::string title;  // What is checked, for people.
  Verdict verdict = Verdict::kOk;
  std::string detail;  // What was found.
  std::string fix;     // What to do; empty when there is nothing to do.
};

// Judges `inputs`, one result per check, in a fixed order: io_uring,
// io_uring_futex, ring_setup, wake_backend, preempt_rt, rtprio, memlock,
// dev_shm, huge_pages, cpus, cpu_governor, logind_remove_ipc,
// channel_folders. Pure; any thread; not RT-safe (allocates).
std::vector<CheckResult> RunDoctorChecks(const DoctorInputs& inputs);

// True if any result is a FAIL (the doctor then exits 1). Any thread.
bool AnyFailed(const std::vector<CheckResult>& results);

}  // namespace tether::tools

#endif  // TETHER_TOOLS_DOCTOR_CHECKS_H_
