// loop: real-time settings for a loop thread (scheduling policy and
// priority, CPU affinity, locked memory, timer slack, a prefaulted stack),
// each returning a Status that names the missing privilege and how to grant
// it; and RealtimeScope, the marker of code that must not touch the heap,
// which aborts with a stack trace on any allocation when the binary links
// //loop:rt_alloc_check (a debug plug-in; without it the scope costs a
// thread-local counter and checks nothing).
//
// Nothing here reads the environment: main() decides the settings.
#ifndef TETHER_LOOP_REALTIME_H_
#define TETHER_LOOP_REALTIME_H_

#include <sys/types.h>

#include <cstddef>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "loop/clock.h"

namespace tether::loop {

enum class SchedPolicy {
  kOther,       // SCHED_OTHER (priority must be 0)
  kFifo,        // SCHED_FIFO, priority 1..99
  kRoundRobin,  // SCHED_RR, priority 1..99
};

// "SCHED_OTHER", "SCHED_FIFO", "SCHED_RR". Any thread; RT-safe.
const char* SchedPolicyName(SchedPolicy policy);

// Sets the policy and priority of thread `tid` (0: the calling thread).
// InvalidArgument for a priority outside the policy's range; PermissionDenied
// naming CAP_SYS_NICE / RLIMIT_RTPRIO (limits.conf `rtprio`, systemd
// LimitRTPRIO=) or an RT-group cgroup without runtime, with the current
// limit. Any thread; not RT-safe (syscalls); setup.
absl::Status SetThreadScheduling(SchedPolicy policy, int priority,
                                 pid_t tid = 0);

// Pins thread `tid` (0: the calling thread) to `cpus`. InvalidArgument for
// an empty set, a negative or too large CPU number, or CPUs outside the
// process's allowed set (listed in the message: cpuset cgroup / taskset);
// PermissionDenied for another user's thread without CAP_SYS_NICE.
// Any thread; not RT-safe; setup.
absl::Status SetThreadAffinity(std::span<const int> cpus, pid_t tid = 0);

// The highest-numbered CPU the calling thread may run on (its affinity
// mask: cpuset cgroup, taskset), 0 if it cannot be read. Where a real-time
// experiment puts its load, away from CPU 0's housekeeping. Any thread; not
// RT-safe (a syscall).
int HighestAllowedCpu();

// mlockall(MCL_CURRENT | MCL_FUTURE): no page faults on memory already
// mapped or mapped later. ResourceExhausted / PermissionDenied naming
// RLIMIT_MEMLOCK (its value), CAP_IPC_LOCK, limits.conf `memlock` and systemd
// LimitMEMLOCK=. Under ASan/TSan it succeeds without locking (their
// runtimes make mlockall a no-op). Any thread (process-wide); not RT-safe;
// setup.
absl::Status LockMemory();

// The calling thread's timer slack (prctl PR_SET_TIMERSLACK): how late the
// kernel may fire its sleeps' timers to batch wakeups (50 us by default for
// SCHED_OTHER; RT threads get none). 1 ns is the tightest. Calling thread;
// not RT-safe.
absl::Status SetTimerSlack(Duration slack);

// Touches `bytes` of the calling thread's stack below the current frame so
// those pages are resident (and locked after LockMemory()). Calling thread;
// call once at thread start, before real-time work.
void PrefaultStack(size_t bytes = 256 * 1024);

// ---------------------------------------------------------------------------
// Allocation checking.

// While a RealtimeScope is alive on a thread, operator new/delete on that
// thread aborts with a message and a stack trace -- when the binary links
// //loop:rt_alloc_check (AllocationCheckActive()). Nestable. C code calling
// malloc() directly is not caught (glibc 2.34 removed malloc hooks).
// Code whose failure path allocates but whose success path must not
// (transport's checks of messages from outside, whose Cap'n Proto
// exceptions allocate) runs in a util::FailurePathAllocationScope: there
// the checker's verdict waits for the outcome (util/failure_path.h).
// Thread of construction only; RT-safe (a thread-local counter).
class RealtimeScope {
 public:
  RealtimeScope();
  ~RealtimeScope();
  RealtimeScope(const RealtimeScope&) = delete;
  RealtimeScope& operator=(const RealtimeScope&) = delete;
};

// Inside a RealtimeScope, allows allocation again while alive (an error
// path that must format a message, a one-time lazy init). Nestable.
class AllowAllocationScope {
 public:
  AllowAllocationScope();
  ~AllowAllocationScope();
  AllowAllocationScope(const AllowAllocationScope&) = delete;
  AllowAllocationScope& operator=(const AllowAllocationScope&) = delete;
};

// True on a thread inside a RealtimeScope and not inside an
// AllowAllocationScope. Any thread (answers for itself); RT-safe.
bool AllocationForbidden();

// True when //loop:rt_alloc_check is linked into this binary *and* its
// operator new is the one in effect (checked by a probe allocation at
// start). A replacement linked ahead of it wins otherwise: a sanitizer
// runtime when the checker sits in a shared library, as with cc_test's
// default dynamic linking (tests linking it set linkstatic = True).
// Any thread; RT-safe.
bool AllocationCheckActive();

namespace internal {
// Called by //loop:rt_alloc_check at static initialisation when its probe
// allocation went through its operator new.
void MarkAllocationCheckActive();
}  // namespace internal

}  // namespace tether::loop

#endif  // TETHER_LOOP_REALTIME_H_
