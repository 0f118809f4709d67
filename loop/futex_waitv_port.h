// loop: the fallback wake port, for kernels and containers without io_uring
// futex requests (Linux < 6.7, e.g. Debian 12's 6.1; io_uring disabled by
// sysctl; refused by a seccomp profile such as Docker's default, or by RHEL
// 9). The loop thread itself sleeps in futex_waitv(2) on every watched word
// plus a word of its own for Wake(), with the nearest deadline as the
// timeout: no helper thread, so a publisher's FUTEX_WAKE wakes the loop
// directly and a wake costs what a raw futex wake costs.
//
// The sleep protocol (wake_port.h) is the same as every port's: announce,
// load the words, re-check the readers, then futex_waitv with the loaded
// values, so a commit after the re-check makes futex_waitv return -EAGAIN or
// is woken by the publisher's FUTEX_WAKE (it saw the sleeper). After the
// wait, every word whose value moved is reported ready.
//
// The lost-wake check (wake_port.h): the process's LostWakeTicker pokes the
// port every kLostWakeCheck (a bump of its own word, as Wake() does), so a
// sleep has no timeout it does not need: a timeout on every futex_waitv
// cost an hrtimer per sleep, 1.10x on the one-CPU ping-pong.
//
// Deadlines: futex_waitv's absolute CLOCK_MONOTONIC timeout is a hard
// hrtimer for real-time tasks on PREEMPT_RT, so both DeadlineTimer modes are
// the same here. Needs Linux >= 5.16 (futex_waitv); at most 127 words
// (futex_waitv takes 128 waiters, one is the port's own). It cannot wait on
// file descriptors: WatchFd() is FailedPrecondition (loops stop through
// StopSignals' futex word instead of its fd).
//
// Thread-safety: see WakePort (loop thread, Wake() from anywhere, also a
// signal handler).
#ifndef TETHER_LOOP_FUTEX_WAITV_PORT_H_
#define TETHER_LOOP_FUTEX_WAITV_PORT_H_

#include <linux/futex.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "loop/lost_wake_ticker.h"
#include "loop/wake_port.h"

namespace tether::loop {

class FutexWaitvPort final : public internal::PortBase,
                             private internal::LostWakeTicker::Target {
 public:
  // futex_waitv takes at most 128 waiters; one is the port's own word.
  static constexpr int kMaxWords = 127;

  // `reason` (why this backend) goes into description(). InvalidArgument
  // when options.max_watches exceeds kMaxWords. Any thread; not RT-safe.
  static absl::StatusOr<std::unique_ptr<FutexWaitvPort>> Create(
      const WakePortOptions& options, const std::string& reason);

  // Leaves the ticker: never poked after this.
  ~FutexWaitvPort() override;

  WakeBackend backend() const override { return WakeBackend::kFutexWaitv; }
  // ResourceExhausted beyond kMaxWords words.
  absl::Status Watch(const std::atomic<uint32_t>* word,
                     uint64_t cookie) override;
  // Always FailedPrecondition: futex_waitv cannot wait on an fd.
  absl::Status WatchFd(int fd, uint64_t cookie) override;
  void Unwatch(uint64_t cookie) override;
  WaitResult Wait(std::optional<MonotonicTime> deadline, SleepHooks& hooks,
                  absl::FunctionRef<void(uint64_t)> on_ready) override;

 private:
  FutexWaitvPort(const WakePortOptions& options, std::string description);
  // Wake(): bump the port's own word and FUTEX_WAKE it. Async-signal-safe.
  void SignalLoop() override;
  // The ticker's lost-wake check: flag it and bump the own word.
  void Poke() override;
  // Blocks in futex_waitv on the words (values loaded by the protocol) and
  // the own word. Returns false when the deadline passed.
  bool Block(std::optional<MonotonicTime> deadline);

  alignas(64) std::atomic<uint32_t> own_word_{0};
  uint32_t own_observed_ = 0;  // own_word_ as loaded for the current sleep
  // The last futex_waitv failed with EFAULT (every word reported ready).
  bool faulted_ = false;
  // Set by Poke(), taken by the Wait() it ends.
  std::atomic<bool> check_requested_{false};
  // Filled per sleep: [watched words..., own word]; reserved at creation.
  std::vector<futex_waitv> waiters_;
  std::vector<int> waiter_slots_;  // slot of waiters_[i]
};

}  // namespace tether::loop

#endif  // TETHER_LOOP_FUTEX_WAITV_PORT_H_
