#include "loop/make_wake_port.h"

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "loop/futex_waitv_port.h"
#include "loop/uring_futex_port.h"

namespace tether::loop {

absl::StatusOr<std::unique_ptr<WakePort>> MakeWakePort(
    const WakePortOptions& options, const KernelFeatures& features) {
  absl::StatusOr<WakeBackendChoice> choice =
      ChooseWakeBackend(features, options.backend);
  if (!choice.ok()) return choice.status();
  const bool hard =
      options.deadline_timer == DeadlineTimer::kHard ||
      (options.deadline_timer == DeadlineTimer::kAuto && features.preempt_rt);
  switch (choice->backend) {
    case WakeBackend::kUringPersistent:
      return absl::UnimplementedError(
          "the uring_persistent wake backend has no implementation yet (no "
          "kernel offers persistent futex waits): use uring_futex");
    case WakeBackend::kUringFutex: {
      auto port = UringFutexPort::Create(options, hard, choice->reason);
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
