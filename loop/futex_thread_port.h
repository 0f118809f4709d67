// loop: the fallback wake port for kernels without io_uring futex requests
// (< 6.7, e.g. Debian 12's 6.1). A helper thread blocks in futex_waitv(2) on
// every watched word plus a private control word, reports each word whose
// value moved since it last looked, and signals the loop through an eventfd;
// the loop sleeps in ppoll(2) on that eventfd and its watched fds.
//
// The helper is an independent change detector: it re-arms each word with
// the value it last *reported* (loaded before it signals), so it needs no
// values from the loop and stays armed while the loop is busy. No lost
// wakeup: a commit after the loop's re-check (wake_port.h step 4) happens
// while the loop counts as a sleeper, so the publisher's FUTEX_WAKE finds
// the helper queued, or the helper is scanning and sees the new value, or
// its futex_waitv compares against the old value and returns -EAGAIN. Costs
// one thread hop more than uring_futex per wake (helper, then loop).
//
// Deadlines: ppoll's timeout, a hard hrtimer for RT tasks on PREEMPT_RT
// (both DeadlineTimer modes behave the same here). The helper inherits the
// scheduling policy and affinity of the thread that creates the port: create
// it on the loop thread after its RT settings, or set them on helper_tid().
//
// Thread-safety: see WakePort (loop thread, Wake() from anywhere). The helper
// touches watched words only under a mutex that Watch()/Unwatch() also
// take, so after Unwatch() returns no thread reads the word.
#ifndef TETHER_LOOP_FUTEX_THREAD_PORT_H_
#define TETHER_LOOP_FUTEX_THREAD_PORT_H_

#include <poll.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "loop/wake_port.h"

namespace tether::loop {

class FutexThreadPort final : public internal::PortBase {
 public:
  // futex_waitv takes at most 128 waiters; one is the control word.
  static constexpr int kMaxWords = 127;

  // Starts the helper thread. `reason` goes into description().
  // Any thread; not RT-safe (allocates, creates a thread).
  static absl::StatusOr<std::unique_ptr<FutexThreadPort>> Create(
      const WakePortOptions& options, const std::string& reason);
  // Stops and joins the helper. Any thread.
  ~FutexThreadPort() override;

  WakeBackend backend() const override { return WakeBackend::kFutexThread; }
  // ResourceExhausted beyond kMaxWords words.
  absl::Status Watch(const std::atomic<uint32_t>* word,
                     uint64_t cookie) override;
  absl::Status WatchFd(int fd, uint64_t cookie) override;
  void Unwatch(uint64_t cookie) override;
  WaitResult Wait(std::optional<MonotonicTime> deadline, SleepHooks& hooks,
                  absl::FunctionRef<void(uint64_t)> on_ready) override;

  // The helper's Linux thread id (for sched_setscheduler/affinity), 0 until
  // it started. Any thread.
  pid_t helper_tid() const { return helper_tid_.load(std::memory_order_acquire); }

 private:
  struct HelperWord {
    const std::atomic<uint32_t>* word = nullptr;  // null: slot unused
    uint32_t reported = 0;  // the value the helper last reported / armed
  };

  FutexThreadPort(const WakePortOptions& options, std::string description);
  void SignalLoop() override;
  // Makes the helper re-read its table (after a change, or to stop).
  void PokeHelper();
  void RebuildPollFds();
  void HelperMain();

  int notify_fd_ = -1;  // helper and Wake() write, the loop reads
  // Bumped (and FUTEX_WAKEd) to make the helper rescan. Shared futex ops,
  // like every tether futex (no FUTEX2_PRIVATE).
  alignas(64) std::atomic<uint32_t> control_{0};

  std::mutex mu_;
  std::vector<HelperWord> helper_words_;  // by slot; guarded by mu_
  bool stop_ = false;                     // guarded by mu_

  // By slot: set by the helper when the word moved; taken by the loop.
  std::unique_ptr<std::atomic<bool>[]> changed_;
  std::vector<pollfd> pollfds_;  // [notify_fd_, watched fds...]; loop only
  std::vector<int> pollfd_slots_;  // slot of pollfds_[i], -1 for notify
  std::atomic<pid_t> helper_tid_{0};
  std::thread helper_;
};

}  // namespace tether::loop

#endif  // TETHER_LOOP_FUTEX_THREAD_PORT_H_
