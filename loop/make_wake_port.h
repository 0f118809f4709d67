// loop: picks and builds the wake port a loop sleeps in, from the kernel's
// features (kernel_probe.h) and the loop's options, so that tests can force
// each backend and a loop can report which one it runs on.
#ifndef TETHER_LOOP_MAKE_WAKE_PORT_H_
#define TETHER_LOOP_MAKE_WAKE_PORT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "loop/kernel_probe.h"
#include "loop/wake_port.h"

namespace tether::loop {

// How a port will time deadlines, and why (for its description()).
struct DeadlineTimerChoice {
  bool hard = false;  // kHard; false: kRingWait
  std::string reason;
};

// Resolves `requested`: kHard and kRingWait stay as they are; kAuto is
// kRingWait on a kernel that is not PREEMPT_RT (its io_uring wait timeout
// does not wait for other real-time work there), and on PREEMPT_RT kRingWait
// only when this boot's rt-probe (features.rt_probe, rt_probe_cache.h)
// measured the io_uring wait timeout hard for real-time waiters; kHard when
// it measured it soft or inconclusive, or no probe ran since boot (the safe
// choice). Any thread; not RT-safe (allocates the reason); pure.
DeadlineTimerChoice ChooseDeadlineTimer(DeadlineTimer requested,
                                        const KernelFeatures& features);

// Chooses a backend with ChooseWakeBackend(features, options.backend) and
// builds it; port->backend() and port->description() say which and why.
// The deadline timer is ChooseDeadlineTimer(options.deadline_timer, features).
// Errors: FailedPrecondition when the kernel cannot do what is asked (the
// message says what to change); kUringPersistent is Unimplemented (no kernel
// offers it; see uring_futex_port.h for where it plugs in).
// Any thread; not RT-safe (allocates, syscalls, may start a thread). The port
// binds to the thread of its first Wait().
absl::StatusOr<std::unique_ptr<WakePort>> MakeWakePort(
    const WakePortOptions& options, const KernelFeatures& features);

}  // namespace tether::loop

#endif  // TETHER_LOOP_MAKE_WAKE_PORT_H_
