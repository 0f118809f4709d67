#include "loop/virtual_port.h"

namespace tether::loop {

VirtualPort::VirtualPort(VirtualClock* clock)
    : clock_(clock), limit_(clock->Now()) {}

absl::Status VirtualPort::Watch(const std::atomic<uint32_t>*, uint64_t) {
  return absl::OkStatus();
}

absl::Status VirtualPort::WatchFd(int, uint64_t) { return absl::OkStatus(); }

void VirtualPort::Unwatch(uint64_t) {}

WaitResult VirtualPort::Wait(std::optional<MonotonicTime> deadline,
                             SleepHooks& hooks,
                             absl::FunctionRef<void(uint64_t)>) {
  WaitResult result;
  if (woken_) {
    woken_ = false;
    result.woken = true;
    return result;
  }
  if (hooks.HasPendingWork()) {
    result.pending_work = true;
    return result;
  }
  if (deadline.has_value() && *deadline <= limit_) {
    if (*deadline > clock_->Now()) clock_->AdvanceTo(*deadline);
    result.timed_out = true;
    return result;
  }
  if (limit_ > clock_->Now()) clock_->AdvanceTo(limit_);
  result.idle = true;
  return result;
}

}  // namespace tether::loop
