// loop: the simulation's wake port. It never sleeps: where a real port
// blocks until the next deadline, Wait() moves a VirtualClock to that
// deadline and returns, so the one driver (driver.h) runs simulated loops on
// virtual time exactly as it runs a real loop on the real clock. Messages
// need no wake: every send happens on the one simulation thread, and the
// driver re-checks every reader before each Wait() (HasPendingWork).
//
// A run is bounded by a limit (SimulatedEventLoopFactory::RunUntil's end):
// the clock never passes it, and when the next deadline lies beyond it (or
// there is none) Wait() advances the clock to the limit and reports `idle`.
//
// Thread-safety: the simulation thread only (Wake() too; it only notes the
// request).
#ifndef TETHER_LOOP_VIRTUAL_PORT_H_
#define TETHER_LOOP_VIRTUAL_PORT_H_

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "loop/clock.h"
#include "loop/wake_port.h"

namespace tether::loop {

class VirtualPort final : public WakePort {
 public:
  // `clock` must outlive the port. The limit starts at the clock's time.
  explicit VirtualPort(VirtualClock* clock);

  WakeBackend backend() const override { return WakeBackend::kVirtual; }
  const std::string& description() const override { return description_; }

  // Bookkeeping only: nothing is ever armed. RT-safe, never fail.
  absl::Status Watch(const std::atomic<uint32_t>* word,
                     uint64_t cookie) override;
  absl::Status WatchFd(int fd, uint64_t cookie) override;
  void Unwatch(uint64_t cookie) override;

  // Pending work (hooks.HasPendingWork()) or a Wake(): returns at once.
  // Else advances the clock to min(deadline, limit): timed_out when the
  // deadline was reached, idle when the limit was (or there is no
  // deadline). Never reports on_ready. RT-safe.
  WaitResult Wait(std::optional<MonotonicTime> deadline, SleepHooks& hooks,
                  absl::FunctionRef<void(uint64_t cookie)> on_ready) override;

  void Wake() override { woken_ = true; }

  // The time the current run may not pass (>= the clock's time).
  void set_limit(MonotonicTime limit) { limit_ = limit; }
  MonotonicTime limit() const { return limit_; }

 private:
  VirtualClock* const clock_;
  MonotonicTime limit_;
  bool woken_ = false;
  const std::string description_ = "virtual: simulated time, no kernel wait";
};

}  // namespace tether::loop

#endif  // TETHER_LOOP_VIRTUAL_PORT_H_
