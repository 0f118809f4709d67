#include "loop/kernel_probe.h"

#include <liburing.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "loop/uring_futex.h"

namespace tether::loop {
namespace {

// Debian's Abseil has its own absl::string_view (not std::string_view).
absl::string_view Absl(std::string_view s) { return {s.data(), s.size()}; }

// Reads a small text file (sysfs/procfs), trimmed; nullopt if unreadable.
std::optional<std::string> ReadTrimmed(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return std::string(absl::StripAsciiWhitespace(text.str()));
}

// Owns one probe ring; closes it on scope exit.
class ProbeRing {
 public:
  ProbeRing() = default;
  ProbeRing(const ProbeRing&) = delete;
  ProbeRing& operator=(const ProbeRing&) = delete;
  ~ProbeRing() {
    if (open_) io_uring_queue_exit(&ring_);
  }

  // Returns 0 or the positive errno of io_uring_setup.
  int Init(unsigned flags) {
    io_uring_params params;
    std::memset(&params, 0, sizeof(params));
    params.flags = flags;
    const int rc = io_uring_queue_init_params(4, &ring_, &params);
    if (rc < 0) return -rc;
    open_ = true;
    return 0;
  }

  io_uring* get() { return &ring_; }

  // Submits the prepared SQE and returns its CQE's res; nullopt when no
  // completion arrived within a second (nothing we submit should block).
  std::optional<int> SubmitOne() {
    if (io_uring_submit(&ring_) != 1) return std::nullopt;
    __kernel_timespec timeout = {.tv_sec = 1, .tv_nsec = 0};
    io_uring_cqe* cqe = nullptr;
    if (io_uring_wait_cqe_timeout(&ring_, &cqe, &timeout) != 0) {
      return std::nullopt;
    }
    const int res = cqe->res;
    io_uring_cqe_seen(&ring_, cqe);
    return res;
  }

 private:
  io_uring ring_;
  bool open_ = false;
};

bool TryRingFlags(unsigned flags) {
  ProbeRing ring;
  return ring.Init(flags) == 0;
}

// The word a FUTEX_WAIT probe arms against: it always differs from the
// expected value, so the kernel answers -EAGAIN without queueing a waiter.
// Static so that a kernel which did queue (it must not) never refers to a
// dead stack frame.
std::atomic<uint32_t> g_probe_word{1};
constexpr uint32_t kProbeExpected = 0;

void ProbeIoUring(KernelFeatures& features) {
  {
    ProbeRing plain;
    const int err = plain.Init(0);
    if (err != 0) {
      features.io_uring = false;
      features.io_uring_setup_errno = err;
      return;
    }
  }
  features.io_uring = true;
  features.setup_single_issuer = TryRingFlags(IORING_SETUP_SINGLE_ISSUER);
  features.setup_defer_taskrun =
      features.setup_single_issuer &&
      TryRingFlags(IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN);

  // Probe on the ring a loop would build.
  unsigned flags = 0;
  if (features.setup_single_issuer) flags |= IORING_SETUP_SINGLE_ISSUER;
  if (features.setup_defer_taskrun) flags |= IORING_SETUP_DEFER_TASKRUN;
  ProbeRing ring;
  if (ring.Init(flags) != 0) return;  // Worked a moment ago; keep the rest off.

  if (io_uring_probe* probe = io_uring_get_probe_ring(ring.get())) {
    features.register_probe = true;
    features.op_futex_waitv =
        io_uring_opcode_supported(probe, kTetherIoringOpFutexWaitv);
    io_uring_free_probe(probe);
  }

  // Ground truth by submission: -EAGAIN = the kernel knows FUTEX_WAIT and
  // compared the word; -EINVAL = unknown opcode (or flags).
  if (io_uring_sqe* sqe = io_uring_get_sqe(ring.get())) {
    PrepFutexWait(sqe, &g_probe_word, kProbeExpected);
    const std::optional<int> res = ring.SubmitOne();
    features.op_futex_wait = res.has_value() && *res == -EAGAIN;
  }
  // FUTEX_WAKE with nobody waiting completes with 0 woken.
  if (io_uring_sqe* sqe = io_uring_get_sqe(ring.get())) {
    PrepFutexWake(sqe, &g_probe_word, 1);
    const std::optional<int> res = ring.SubmitOne();
    features.op_futex_wake = res.has_value() && *res >= 0;
  }

  features.register_ring_fd = io_uring_register_ring_fd(ring.get()) == 1;
}

bool ProbeFutexWaitvSyscall() {
#ifdef SYS_futex_waitv
  // No waiters: EINVAL where the syscall exists, ENOSYS where it does not.
  const long rc =
      syscall(SYS_futex_waitv, nullptr, 0, 0, nullptr, CLOCK_MONOTONIC);
  return !(rc == -1 && errno == ENOSYS);
#else
  return false;
#endif
}

std::string ReleaseOrUnknown(const KernelFeatures& features) {
  return features.kernel_release.empty() ? std::string("(unknown)")
                                         : features.kernel_release;
}

}  // namespace

std::optional<KernelVersion> ParseKernelRelease(std::string_view release) {
  KernelVersion version;
  int* parts[] = {&version.major, &version.minor, &version.patch};
  size_t pos = 0;
  int parsed = 0;
  for (int* part : parts) {
    size_t end = pos;
    while (end < release.size() && absl::ascii_isdigit(release[end])) ++end;
    if (end == pos || end - pos > 6) break;
    int value = 0;
    if (!absl::SimpleAtoi(Absl(release.substr(pos, end - pos)), &value)) {
      break;
    }
    *part = value;
    ++parsed;
    if (end >= release.size() || release[end] != '.') break;
    pos = end + 1;
  }
  if (parsed < 2) return std::nullopt;
  return version;
}

bool IsPreemptRt(std::string_view sys_kernel_realtime,
                 std::string_view kernel_build) {
  return absl::StripAsciiWhitespace(Absl(sys_kernel_realtime)) == "1" ||
         absl::StrContains(Absl(kernel_build), "PREEMPT_RT");
}

KernelFeatures ProbeKernel(const ProbeOptions& options) {
  KernelFeatures features;
  utsname names;
  if (uname(&names) == 0) {
    features.kernel_release = names.release;
    features.kernel_build = names.version;
    features.version = ParseKernelRelease(features.kernel_release);
  }
  features.preempt_rt =
      IsPreemptRt(ReadTrimmed(options.sys_root + "/kernel/realtime")
                      .value_or(std::string()),
                  features.kernel_build);

  if (std::optional<std::string> text =
          ReadTrimmed(options.proc_root + "/sys/kernel/io_uring_disabled")) {
    int value = 0;
    if (absl::SimpleAtoi(*text, &value)) {
      features.io_uring_disabled_sysctl = value;
    }
  }
  ProbeIoUring(features);
  features.futex_waitv_syscall = ProbeFutexWaitvSyscall();
  features.rt_probe =
      ReadRtProbeCache(options.rt_probe_cache, ReadBootId(options.proc_root),
                       features.kernel_release);
  return features;
}

std::string_view WakeBackendName(WakeBackend backend) {
  switch (backend) {
    case WakeBackend::kUringPersistent:
      return "uring_persistent";
    case WakeBackend::kUringFutex:
      return "uring_futex";
    case WakeBackend::kFutexWaitv:
      return "futex_waitv";
    case WakeBackend::kVirtual:
      return "virtual";
  }
  return "unknown";
}

std::optional<WakeBackend> ParseWakeBackend(std::string_view name) {
  for (WakeBackend backend :
       {WakeBackend::kUringPersistent, WakeBackend::kUringFutex,
        WakeBackend::kFutexWaitv}) {
    if (WakeBackendName(backend) == name) return backend;
  }
  return std::nullopt;
}

absl::Status IoUringStatus(const KernelFeatures& features) {
  if (features.io_uring) return absl::OkStatus();
  const int sysctl = features.io_uring_disabled_sysctl.value_or(0);
  const int err = features.io_uring_setup_errno;
  if (sysctl == 2) {
    return absl::FailedPreconditionError(
        "io_uring is disabled (kernel.io_uring_disabled=2): enable it with "
        "`sysctl -w kernel.io_uring_disabled=0` and persist that in "
        "/etc/sysctl.d/");
  }
  if (sysctl == 1 && err == EPERM) {
    return absl::FailedPreconditionError(
        "io_uring is restricted to root and the group kernel.io_uring_group "
        "(kernel.io_uring_disabled=1): add this user to that group, or run "
        "`sysctl -w kernel.io_uring_disabled=0`");
  }
  switch (err) {
    case ENOSYS:
      return absl::FailedPreconditionError(
          "io_uring_setup does not exist here (ENOSYS): the kernel was built "
          "without CONFIG_IO_URING, or a seccomp filter (container runtime) "
          "hides it; use a kernel with io_uring, or allow io_uring_setup, "
          "io_uring_enter and io_uring_register in the seccomp profile");
    case EPERM:
      return absl::FailedPreconditionError(
          "io_uring_setup was refused (EPERM) although "
          "kernel.io_uring_disabled=0: a seccomp filter or LSM blocks it (e.g. "
          "a container runtime's default profile); allow io_uring_setup, "
          "io_uring_enter and io_uring_register (docker: --security-opt "
          "seccomp=<profile>)");
    case ENOMEM:
      return absl::FailedPreconditionError(
          "io_uring_setup failed with ENOMEM: kernels before 5.12 charge rings "
          "to RLIMIT_MEMLOCK; raise it (`ulimit -l`, or memlock in "
          "/etc/security/limits.conf)");
    default:
      return absl::FailedPreconditionError(
          absl::StrCat("io_uring_setup failed (", std::strerror(err),
                       "): io_uring is not usable on this machine"));
  }
}

absl::StatusOr<WakeBackendChoice> ChooseWakeBackend(
    const KernelFeatures& features, std::optional<WakeBackend> forced) {
  const std::string release = ReleaseOrUnknown(features);
  const absl::Status uring = IoUringStatus(features);
  if (!uring.ok()) {
    // No io_uring at all: the fallback, or the cause when an io_uring
    // backend was asked for.
    const bool wants_uring = forced.has_value() &&
                             (*forced == WakeBackend::kUringFutex ||
                              *forced == WakeBackend::kUringPersistent);
    if (wants_uring) return uring;
    if (forced == WakeBackend::kVirtual) {
      return absl::FailedPreconditionError(
          "wake backend virtual is the simulation's (virtual time); a real "
          "loop sleeps in the kernel: use uring_futex or futex_waitv");
    }
    if (!features.futex_waitv_syscall) {
      return absl::FailedPreconditionError(absl::StrCat(
          uring.message(), "; and kernel ", release,
          " lacks futex_waitv (Linux >= 5.16) for the fallback: boot a newer "
          "kernel"));
    }
    return WakeBackendChoice{
        WakeBackend::kFutexWaitv,
        absl::StrCat(forced.has_value() ? "forced; " : "",
                     "io_uring is not usable here, so the loop thread waits "
                     "in futex_waitv instead (",
                     uring.message(), ")")};
  }
  const std::string persistent_reason =
      "the kernel offers persistent io_uring futex waits: each watched word "
      "stays armed in the ring across wakes";
  const std::string uring_futex_reason = absl::StrCat(
      "kernel ", release,
      " supports IORING_OP_FUTEX_WAIT: each watched word has a one-shot "
      "futex wait in the ring, re-armed after each completion");
  const std::string futex_waitv_reason = absl::StrCat(
      "kernel ", release,
      " lacks IORING_OP_FUTEX_WAIT (Linux >= 6.7): the loop thread waits in "
      "futex_waitv on the watched words");

  if (forced.has_value()) {
    const absl::string_view name = Absl(WakeBackendName(*forced));
    switch (*forced) {
      case WakeBackend::kUringPersistent:
        if (!features.uring_persistent_futex_wait) {
          return absl::FailedPreconditionError(absl::StrCat(
              "wake backend ", name,
              " was requested, but no kernel offers persistent io_uring "
              "futex waits yet (an upstream proposal, not merged): use "
              "uring_futex or futex_waitv"));
        }
        return WakeBackendChoice{*forced,
                                 absl::StrCat("forced; ", persistent_reason)};
      case WakeBackend::kUringFutex:
        if (!features.op_futex_wait) {
          return absl::FailedPreconditionError(absl::StrCat(
              "wake backend ", name, " was requested, but kernel ", release,
              " lacks IORING_OP_FUTEX_WAIT (needs Linux >= 6.7): use "
              "futex_waitv, or boot a newer kernel (Debian 12: "
              "linux-image-amd64 from bookworm-backports)"));
        }
        return WakeBackendChoice{*forced,
                                 absl::StrCat("forced; ", uring_futex_reason)};
      case WakeBackend::kFutexWaitv:
        if (!features.futex_waitv_syscall) {
          return absl::FailedPreconditionError(absl::StrCat(
              "wake backend ", name, " was requested, but kernel ", release,
              " lacks the futex_waitv syscall (needs Linux >= 5.16): boot a "
              "newer kernel"));
        }
        return WakeBackendChoice{
            *forced, absl::StrCat("forced; kernel ", release,
                                  " has futex_waitv: the loop thread waits "
                                  "in it on the watched words")};
      case WakeBackend::kVirtual:
        return absl::FailedPreconditionError(
            "wake backend virtual is the simulation's (virtual time); a real "
            "loop sleeps in the kernel: use uring_futex or futex_waitv");
    }
  }

  if (features.uring_persistent_futex_wait) {
    return WakeBackendChoice{WakeBackend::kUringPersistent, persistent_reason};
  }
  if (features.op_futex_wait) {
    return WakeBackendChoice{
        WakeBackend::kUringFutex,
        absl::StrCat(uring_futex_reason,
                     " (kernel persistent futex waits are not available)")};
  }
  if (features.futex_waitv_syscall) {
    return WakeBackendChoice{WakeBackend::kFutexWaitv, futex_waitv_reason};
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "kernel ", release,
      " has neither IORING_OP_FUTEX_WAIT (Linux >= 6.7) nor the futex_waitv "
      "syscall (Linux >= 5.16), so a loop cannot wait on channels: boot "
      "Linux >= 6.7 (Debian 12: linux-image-amd64 from bookworm-backports)"));
}

}  // namespace tether::loop
