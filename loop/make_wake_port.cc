#include "loop/make_wake_port.h"

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "loop/futex_waitv_port.h"
#include "loop/uring_futex_port.h"

namespace tether::loop {

DeadlineTimerChoice ChooseDeadlineTimer(DeadlineTimer requested,
                                        const KernelFeatures& features) {
  switch (requested) {
    case DeadlineTimer::kHard:
      return {true, "hard-timer deadlines forced"};
    case DeadlineTimer::kRingWait:
      return {false, "io_uring wait timeouts forced"};
    case DeadlineTimer::kAuto:
      break;
  }
  if (!features.preempt_rt) {
    return {false, "not PREEMPT_RT: io_uring wait timeouts are on time"};
  }
  if (!features.rt_probe.has_value()) {
    return {true,
            "PREEMPT_RT and no rt-probe since boot (`tether doctor "
            "--rt-probe` measures whether io_uring wait timeouts are hard): "
            "hard-timer deadlines, the safe choice"};
  }
  const RtProbeRecord& probe = *features.rt_probe;
  const bool hard_ring = probe.ring_wait == RingWaitTimer::kHard;
  return {!hard_ring,
          absl::StrCat("PREEMPT_RT; this boot's rt-probe (", probe.path,
                       ") measured io_uring wait timeouts ",
                       std::string(RingWaitTimerName(probe.ring_wait)),
                       " for real-time waiters",
                       hard_ring ? "" : ": hard-timer deadlines")};
}

absl::StatusOr<std::unique_ptr<WakePort>> MakeWakePort(
    const WakePortOptions& options, const KernelFeatures& features) {
  absl::StatusOr<WakeBackendChoice> choice =
      ChooseWakeBackend(features, options.backend);
  if (!choice.ok()) return choice.status();
  const DeadlineTimerChoice deadlines =
      ChooseDeadlineTimer(options.deadline_timer, features);
  switch (choice->backend) {
    case WakeBackend::kUringPersistent:
      return absl::UnimplementedError(
          "the uring_persistent wake backend has no implementation yet (no "
          "kernel offers persistent futex waits): use uring_futex");
    case WakeBackend::kUringFutex: {
      auto port = UringFutexPort::Create(
          options, deadlines.hard,
          absl::StrCat(choice->reason, "; ", deadlines.reason));
      if (!port.ok()) return port.status();
      return std::unique_ptr<WakePort>(std::move(*port));
    }
    case WakeBackend::kFutexWaitv: {
      auto port = FutexWaitvPort::Create(options, choice->reason);
      if (!port.ok()) return port.status();
      return std::unique_ptr<WakePort>(std::move(*port));
    }
    case WakeBackend::kVirtual:
      break;  // ChooseWakeBackend never picks it
  }
  return absl::InternalError("unknown wake backend");
}

}  // namespace tether::loop
