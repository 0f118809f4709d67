// loop: picks and builds the wake port a loop sleeps in, from the kernel's
// features (kernel_probe.h) and the loop's options, so that tests can force
// each backend and a loop can report which one it runs on.
#ifndef TETHER_LOOP_MAKE_WAKE_PORT_H_
#define TETHER_LOOP_MAKE_WAKE_PORT_H_

#include <memory>

#include "absl/status/statusor.h"
#include "loop/kernel_probe.h"
#include "loop/wake_port.h"

namespace tether::loop {

// Chooses a backend with ChooseWakeBackend(features, options.backend) and
// builds it; port->backend() and port->description() say which and why.
// DeadlineTimer::kAuto becomes kHard on a PREEMPT_RT kernel, else kRingWait.
// Errors: FailedPrecondition when the kernel cannot do what is asked (the
// message says what to change); kUringPersistent is Unimplemented (no kernel
// offers it; see uring_futex_port.h for where it plugs in).
// Any thread; not RT-safe (allocates, syscalls, may start a thread). The port
// binds to the thread of its first Wait().
absl::StatusOr<std::unique_ptr<WakePort>> MakeWakePort(
    const WakePortOptions& options, const KernelFeatures& features);

}  // namespace tether::loop

#endif  // TETHER_LOOP_MAKE_WAKE_PORT_H_
