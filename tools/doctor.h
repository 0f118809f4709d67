// tools: `tether doctor` as a library. Gathers machine facts (kernel features,
// limits, capabilities, /dev/shm, CPUs) from injectable paths, judges each as
// OK/WARN/FAIL with a fix, and renders the report as text or JSON.
#ifndef TETHER_TOOLS_DOCTOR_H_
#define TETHER_TOOLS_DOCTOR_H_

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "loop/kernel_probe.h"
#include "tools/capabilities.h"

namespace tether::tools {

// Where the facts come from. Tests point these at a fake tree.
struct DoctorOptions {
  // Reads <proc_root>/self/status (CapEff), <proc_root>/self/limits and
  // <proc_root>/sys/kernel/io_uring_disabled.
  std::string proc_root = "/proc";
  // Reads <sys_root>/kernel/realtime and <sys_root>/devices/system/cpu/
  // {online,isolated,cpuN/cpufreq/scaling_governor}.
  std::string sys_root = "/sys";
  // The directory channels live under (statvfs, access).
  std::string shm_path = "/dev/shm";
};

inline constexpr uint64_t kUnlimited = std::numeric_limits<uint64_t>::max();

// A soft/hard resource limit as /proc/self/limits shows it.
struct ResourceLimit {
  uint64_t soft = 0;  // kUnlimited for "unlimited".
  uint64_t hard = 0;
};

// A locked-memory limit at least this large counts as enough for mlockall()
// in a node with its channels mapped.
inline constexpr uint64_t kMinMemlockBytes = uint64_t{1} << 30;
// Less free space than this under shm_path is a warning.
inline constexpr uint64_t kMinShmFreeBytes = uint64_t{64} << 20;

struct ShmFacts {
  std::string path;
  bool exists = false;  // A directory.
  bool writable = false;
  bool tmpfs = false;
  uint64_t size_bytes = 0;
  uint64_t free_bytes = 0;  // Available to this (unprivileged) user.
};

// Everything the checks judge. Plain data: tests build it by hand.
struct DoctorInputs {
  loop::KernelFeatures kernel;
  std::optional<ResourceLimit> rtprio;
  std::optional<ResourceLimit> memlock;
  std::optional<uint64_t> cap_effective;  // nullopt if unreadable.
  std::string user;                       // For the limits.conf fix.
  ShmFacts shm;
  int online_cpus = 0;             // 0 if unknown.
  std::vector<int> isolated_cpus;  // From .../cpu/isolated; empty if none.
  // "cpuN: governor" for each online CPU with cpufreq; empty without cpufreq.
  std::vector<std::pair<int, std::string>> governors;
};

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

// Reads the facts: probes the kernel (loop::ProbeKernel), reads the files
// and statvfs's the shm path under `options`. Missing files become absent
// facts, never errors. Main thread; not RT-safe; makes syscalls, allocates.
DoctorInputs GatherDoctorInputs(const DoctorOptions& options);

// Judges `inputs`, one result per check, in a fixed order: io_uring,
// io_uring_futex, ring_setup, wake_backend, preempt_rt, rtprio, memlock,
// dev_shm, cpus, cpu_governor. Pure; any thread; not RT-safe (allocates).
std::vector<CheckResult> RunDoctorChecks(const DoctorInputs& inputs);

// True if any result is a FAIL (the doctor then exits 1). Any thread.
bool AnyFailed(const std::vector<CheckResult>& results);

// The report for people: one block per check (verdict, title, detail, fix)
// and a closing count. Any thread; not RT-safe (allocates).
std::string FormatDoctorText(const DoctorInputs& inputs,
                             const std::vector<CheckResult>& results);

// The report as one JSON object: "ok", "counts", "kernel", "wake_backend"
// and "checks" (an array of {id, title, verdict, detail, fix}).
// Any thread; not RT-safe (allocates).
std::string FormatDoctorJson(const DoctorInputs& inputs,
                             const std::vector<CheckResult>& results);

// Parses a CPU list such as "0-3,8,10-11" ("" is empty); nullopt if
// malformed. Any thread; not RT-safe (allocates).
std::optional<std::vector<int>> ParseCpuList(std::string_view text);

}  // namespace tether::tools

#endif  // TETHER_TOOLS_DOCTOR_H_
