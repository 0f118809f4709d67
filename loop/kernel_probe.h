// loop: what the running kernel offers the io_uring event loop (probed once at
// start, without blocking) and which wake backend a loop picks from that.
#ifndef TETHER_LOOP_KERNEL_PROBE_H_
#define TETHER_LOOP_KERNEL_PROBE_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "loop/rt_probe_cache.h"

namespace tether::loop {

// A kernel version parsed from a release string such as "6.18.44-fc-v657".
struct KernelVersion {
  int major = 0;
  int minor = 0;
  int patch = 0;

  friend auto operator<=>(const KernelVersion&, const KernelVersion&) = default;
};

// What the kernel offers, as plain facts. Fields default to "absent", so a
// hand-made struct describes a bare kernel and tests fill in what they need.
struct KernelFeatures {
  // uname -r / uname -v; version parsed from the release (nullopt if odd).
  std::string kernel_release;
  std::string kernel_build;
  std::optional<KernelVersion> version;
  // /sys/kernel/realtime reads 1, or the build string names PREEMPT_RT.
  bool preempt_rt = false;

  // kernel.io_uring_disabled (0 enabled, 1 root or io_uring_group only,
  // 2 disabled); nullopt when the sysctl does not exist (kernels < 6.6).
  std::optional<int> io_uring_disabled_sysctl;
  // io_uring_setup worked. If not, the errno it failed with (ENOSYS: not
  // built in or blocked by seccomp; EPERM: sysctl or seccomp; ENOMEM:
  // RLIMIT_MEMLOCK on kernels < 5.12).
  bool io_uring = false;
  int io_uring_setup_errno = 0;
  // Ring setup flags and registration the loop wants (6.0, 6.1, 5.18).
  bool setup_single_issuer = false;
  bool setup_defer_taskrun = false;
  bool register_ring_fd = false;
  // IORING_REGISTER_PROBE answered (5.6); the op bits below come from it
  // and, for FUTEX_WAIT, from a submitted request that must fail -EAGAIN.
  bool register_probe = false;
  bool op_futex_wait = false;
  bool op_futex_wake = false;
  bool op_futex_waitv = false;
  // Kernel-side persistent futex waits (the upstream RFC). No mainline
  // kernel has them; always false until that UAPI exists.
  bool uring_persistent_futex_wait = false;

  // The futex_waitv(2) syscall (5.16), used by the fallback wake thread.
  bool futex_waitv_syscall = false;

  // This boot's measured verdict on the io_uring CQ-wait timer for
  // real-time waiters (`tether doctor --rt-probe`, rt_probe_cache.h);
  // nullopt when no probe ran since boot. Decides DeadlineTimer::kAuto on
  // PREEMPT_RT (make_wake_port.h).
  std::optional<RtProbeRecord> rt_probe;
};

// Where ProbeKernel() reads files, so tests can point it at a fake tree.
struct ProbeOptions {
  std::string proc_root = "/proc";
  std::string sys_root = "/sys";
  // Where a cached rt-probe verdict may be (rt_probe_cache.h); empty: none
  // is read.
  std::vector<std::string> rt_probe_cache = DefaultRtProbeCachePaths();
};

// Probes the running kernel: uname, /sys/kernel/realtime, the io_uring sysctl,
// test rings with each setup flag, the register-probe opcode list, one
// FUTEX_WAIT on a word that deliberately differs from `expected` (-EAGAIN =
// supported, -EINVAL = unknown) and a futex_waitv call with no waiters. Never
// blocks on a futex; each probe ring is closed before returning. Reads this
// boot's cached rt-probe verdict, if any (it does not measure: see
// rt_probe.h).
// Any thread; not RT-safe (syscalls, allocates); call once at start.
KernelFeatures ProbeKernel(const ProbeOptions& options = {});

// How a loop sleeps on channel futex words.
enum class WakeBackend {
  // Kernel persistent futex waits (proposed upstream, never available today).
  kUringPersistent,
  // One-shot IORING_OP_FUTEX_WAIT per watched word, re-armed after each
  // completion with the last seen value (Linux >= 6.7). The default today.
  kUringFutex,
  // The loop thread itself blocks in futex_waitv(2) on the watched words
  // (Linux >= 5.16; Debian 12's 6.1 kernel; io_uring disabled or refused).
  kFutexWaitv,
  // No kernel wait at all: the simulation's port (virtual_port.h), which
  // advances virtual time. Never chosen for, or forced on, a real loop.
  kVirtual,
};

// "uring_persistent", "uring_futex", "futex_waitv", "virtual". Any thread;
// RT-safe.
std::string_view WakeBackendName(WakeBackend backend);
// Inverse of WakeBackendName(); nullopt for an unknown name. Any thread.
std::optional<WakeBackend> ParseWakeBackend(std::string_view name);

struct WakeBackendChoice {
  WakeBackend backend = WakeBackend::kFutexWaitv;
  // One or two sentences a person reads in `tether doctor` or a loop's log.
  std::string reason;
};

// Picks the backend a loop would use on a kernel with `features`: the best
// available, or `forced` (tests and the loop option) if the kernel supports
// it. io_uring that is absent, disabled or refused (ENOSYS, EPERM from a
// seccomp filter or kernel.io_uring_disabled, no futex ops) selects
// futex_waitv, and the reason says why. Errors say what to change:
// FailedPrecondition when `forced` is unsupported (for an io_uring backend:
// IoUringStatus()'s cause and fix), or when the kernel has neither io_uring
// futex ops nor futex_waitv.
// Any thread; not RT-safe (allocates the reason); pure function.
absl::StatusOr<WakeBackendChoice> ChooseWakeBackend(
    const KernelFeatures& features,
    std::optional<WakeBackend> forced = std::nullopt);

// OK when io_uring is usable; otherwise FailedPrecondition naming the cause
// and the fix (e.g. "io_uring is disabled: sysctl kernel.io_uring_disabled=0").
// Any thread; not RT-safe (allocates); pure function.
absl::Status IoUringStatus(const KernelFeatures& features);

// Parses the leading "major.minor[.patch]" of a kernel release string.
// Any thread; RT-safe; does not allocate.
std::optional<KernelVersion> ParseKernelRelease(std::string_view release);

// True for a PREEMPT_RT kernel: /sys/kernel/realtime's contents are "1", or
// the uname -v build string contains "PREEMPT_RT". Any thread; RT-safe.
bool IsPreemptRt(std::string_view sys_kernel_realtime,
                 std::string_view kernel_build);

}  // namespace tether::loop

#endif  // TETHER_LOOP_KERNEL_PROBE_H_
