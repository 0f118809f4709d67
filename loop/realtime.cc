#include "loop/realtime.h"

#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tether::loop {
namespace {

thread_local int t_realtime_depth = 0;
thread_local int t_allow_depth = 0;
std::atomic<bool> g_check_active{false};

std::string Limit(rlim_t value) {
  return value == RLIM_INFINITY ? std::string("unlimited")
                                : absl::StrCat(value);
}

std::string RlimitText(int resource) {
  rlimit limit;
  if (::getrlimit(resource, &limit) != 0) return "unknown";
  return absl::StrCat("soft ", Limit(limit.rlim_cur), ", hard ",
                      Limit(limit.rlim_max));
}

int PolicyValue(SchedPolicy policy) {
  switch (policy) {
    case SchedPolicy::kOther:
      return SCHED_OTHER;
    case SchedPolicy::kFifo:
      return SCHED_FIFO;
    case SchedPolicy::kRoundRobin:
      return SCHED_RR;
  }
  return SCHED_OTHER;
}

std::string ThreadName(pid_t tid) {
  return tid == 0 ? std::string("the calling thread")
                  : absl::StrCat("thread ", tid);
}

std::vector<int> AllowedCpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

}  // namespace

const char* SchedPolicyName(SchedPolicy policy) {
  switch (policy) {
    case SchedPolicy::kOther:
      return "SCHED_OTHER";
    case SchedPolicy::kFifo:
      return "SCHED_FIFO";
    case SchedPolicy::kRoundRobin:
      return "SCHED_RR";
  }
  return "?";
}

absl::Status SetThreadScheduling(SchedPolicy policy, int priority, pid_t tid) {
  const int value = PolicyValue(policy);
  const int min = ::sched_get_priority_min(value);
  const int max = ::sched_get_priority_max(value);
  if (priority < min || priority > max) {
    return absl::InvalidArgumentError(
        absl::StrCat(SchedPolicyName(policy), " priority ", priority,
                     " is outside [", min, ", ", max, "]"));
  }
  sched_param param;
  std::memset(&param, 0, sizeof(param));
  param.sched_priority = priority;
  // sched_setscheduler(2) takes a thread id on Linux (0: the caller).
  if (::sched_setscheduler(tid, value, &param) == 0) return absl::OkStatus();
  const int err = errno;
  const std::string what =
      absl::StrCat("setting ", ThreadName(tid), " to ",
                   SchedPolicyName(policy), " priority ", priority,
                   " failed: ", std::strerror(err));
  if (err == EPERM) {
    return absl::PermissionDeniedError(absl::StrCat(
        what,
        ". Real-time priorities need CAP_SYS_NICE or an RLIMIT_RTPRIO of at "
        "least ",
        priority, " (now ", RlimitText(RLIMIT_RTPRIO),
        "). Fix one of: run as root or grant the binary the capability "
        "(`setcap cap_sys_nice+ep <binary>`); allow the user real-time "
        "priorities in /etc/security/limits.conf (`<user> - rtprio ",
        priority,
        "`, then log in again) or LimitRTPRIO= in its systemd unit. As root, "
        "EPERM means the cgroup has no real-time runtime "
        "(CONFIG_RT_GROUP_SCHED: cpu.rt_runtime_us is 0, e.g. a container "
        "without --cpu-rt-runtime) or a user namespace without the "
        "capability in the initial namespace"));
  }
  if (err == ESRCH) {
    return absl::NotFoundError(absl::StrCat(what, ": no such thread"));
  }
  return absl::InternalError(what);
}

int HighestAllowedCpu() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return 0;
  for (int cpu = CPU_SETSIZE - 1; cpu >= 0; --cpu) {
    if (CPU_ISSET(cpu, &set)) return cpu;
  }
  return 0;
}

absl::Status SetThreadAffinity(std::span<const int> cpus, pid_t tid) {
  if (cpus.empty()) {
    return absl::InvalidArgumentError("an empty CPU set pins nothing");
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) {
    if (cpu < 0 || cpu >= CPU_SETSIZE) {
      return absl::InvalidArgumentError(absl::StrCat(
          "CPU ", cpu, " is not a CPU number (0..", CPU_SETSIZE - 1, ")"));
    }
    CPU_SET(cpu, &set);
  }
  if (::sched_setaffinity(tid, sizeof(set), &set) == 0) return absl::OkStatus();
  const int err = errno;
  const std::string what =
      absl::StrCat("pinning ", ThreadName(tid), " to CPUs {",
                   absl::StrJoin(cpus, ","), "} failed: ", std::strerror(err));
  if (err == EINVAL) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ". This process may run on CPUs {",
        absl::StrJoin(AllowedCpus(), ","),
        "} only (online CPUs, narrowed by a cpuset cgroup or taskset): "
        "choose CPUs from that set"));
  }
  if (err == EPERM) {
    return absl::PermissionDeniedError(absl::StrCat(
        what, ". Pinning another user's thread needs CAP_SYS_NICE"));
  }
  if (err == ESRCH) {
    return absl::NotFoundError(absl::StrCat(what, ": no such thread"));
  }
  return absl::InternalError(what);
}

absl::Status LockMemory() {
  if (::mlockall(MCL_CURRENT | MCL_FUTURE) == 0) return absl::OkStatus();
  const int err = errno;
  const std::string what = absl::StrCat(
      "mlockall(MCL_CURRENT | MCL_FUTURE) failed: ", std::strerror(err),
      ". Locking memory needs CAP_IPC_LOCK or an RLIMIT_MEMLOCK larger than "
      "the process (now ",
      RlimitText(RLIMIT_MEMLOCK),
      " bytes). Fix one of: run as root or `setcap cap_ipc_lock+ep "
      "<binary>`; `<user> - memlock unlimited` in "
      "/etc/security/limits.conf (then log in again); LimitMEMLOCK=infinity "
      "in its systemd unit; `ulimit -l unlimited` in the launching shell");
  if (err == EPERM) return absl::PermissionDeniedError(what);
  if (err == ENOMEM || err == EAGAIN) {
    return absl::ResourceExhaustedError(what);
  }
  return absl::InternalError(what);
}

absl::Status SetTimerSlack(Duration slack) {
  if (slack <= Duration::zero()) {
    return absl::InvalidArgumentError(
        "timer slack must be at least 1 ns (0 means the thread's default)");
  }
  if (::prctl(PR_SET_TIMERSLACK, static_cast<unsigned long>(slack.count()), 0,
              0, 0) == 0) {
    return absl::OkStatus();
  }
  return absl::InternalError(
      absl::StrCat("prctl(PR_SET_TIMERSLACK): ", std::strerror(errno)));
}

void PrefaultStack(size_t bytes) {
  // A volatile buffer the compiler cannot drop; one write per page.
  volatile char* buffer = static_cast<volatile char*>(__builtin_alloca(bytes));
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  for (size_t i = 0; i < bytes; i += page) buffer[i] = 0;
  if (bytes > 0) buffer[bytes - 1] = 0;
}

RealtimeScope::RealtimeScope() { ++t_realtime_depth; }
RealtimeScope::~RealtimeScope() { --t_realtime_depth; }

AllowAllocationScope::AllowAllocationScope() { ++t_allow_depth; }
AllowAllocationScope::~AllowAllocationScope() { --t_allow_depth; }

bool AllocationForbidden() {
  return t_realtime_depth > 0 && t_allow_depth == 0;
}

bool AllocationCheckActive() {
  return g_check_active.load(std::memory_order_relaxed);
}

namespace internal {
void MarkAllocationCheckActive() {
  g_check_active.store(true, std::memory_order_relaxed);
}
}  // namespace internal

}  // namespace tether::loop
