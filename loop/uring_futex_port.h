// loop: the default wake port (Linux >= 6.7). One io_uring ring per loop;
// one one-shot IORING_OP_FUTEX_WAIT per watched word, kept armed while the
// loop is busy and re-armed (with a value loaded inside the sleep protocol,
// wake_port.h) in the same io_uring_enter that sleeps: one syscall per sleep.
//
// Ring: SINGLE_ISSUER | DEFER_TASKRUN (not with kHard, below), falling back
// to SINGLE_ISSUER, then COOP_TASKRUN, then no flags when the kernel refuses
// one (-EINVAL); always
// created R_DISABLED and enabled by the first Wait(), because SINGLE_ISSUER
// binds the ring to the enabling thread and the registered ring fd
// (IORING_REGISTER_RING_FDS, registered then) lives in that thread's table.
// So a port may be built on any thread, and the loop thread binds it.
//
// The lost-wake check (wake_port.h): on a DEFER_TASKRUN ring, one multishot
// IORING_OP_TIMEOUT of period kLostWakeCheck, armed with the first sleep
// and kept armed; its completions only end the wait, and cost a sleep
// nothing. On any other ring (kHard, or a kernel that refused
// DEFER_TASKRUN) a completion is task work that interrupts the loop thread
// wherever it is, so a timer there would make a callback's epoll_wait or
// recv fail with EINTR every 100 ms: those bound each sleep's timeout by
// the next check instead (ppoll's or io_uring_enter's; a timer per sleep).
// The kHard ring is not poked by the process's tether-tick thread instead:
// that would make a SCHED_OTHER thread a writer of a real-time loop's
// eventfd (docs/preempt_rt.md).
//
// Wake(): an eventfd with an IORING_OP_READ kept armed in the ring. Chosen
// over IORING_OP_MSG_RING because MSG_RING needs a ring in the *waking*
// thread (or, without one, Linux 6.13+): Wake() must work from any thread
// and from a signal handler, and write(2) to an eventfd does. Wakes coalesce
// and cost no syscall while the loop is not blocked (wake_port.h).
//
// Deadlines (DeadlineTimer): kRingWait passes the timeout to io_uring_enter
// (IORING_ENTER_EXT_ARG): one syscall, but a soft hrtimer on PREEMPT_RT.
// kHard sleeps in ppoll(2), whose timeout is a hard hrtimer for RT tasks, on
// an eventfd registered with the ring (the kernel signals it when a futex
// completion is queued, also as DEFER_TASKRUN task work), the Wake() eventfd
// and the watched fds themselves; the ring then holds the futex waits and
// the Wake() read. Polling the ring fd does not work with DEFER_TASKRUN, and
// completions that an eventfd write triggers (Wake(), a stop-signal fd) do
// not signal the registered eventfd promptly (eventfd recursion guard):
// both checked on 6.18, hence fds are polled directly. Costs 3-4 syscalls
// per sleep. A kHard sleep without a deadline of the caller's (its only
// timer is the lost-wake check's, which needs no hard timer) and with no fd
// watched waits in the ring instead: one syscall and the wait's soft
// timer, 0.68x the ppoll sleep on the one-CPU ping-pong
// (docs/performance-history.md). Only such a sleep arms the Wake() read in
// the kHard ring; while it stays armed, a ppoll sleep leaves the Wake()
// eventfd to it (its completion signals cq_event_fd_), and the first ppoll
// sleep after a ring sleep drains cq_event_fd_ of the signals that sleep's
// completions left. A loop whose sleeps all have deadlines (a periodic
// real-time loop) never arms it.
//
// Interruptions on the kHard ring (no DEFER_TASKRUN): a completion there
// is task work that interrupts the loop thread wherever it is, so a
// completion that arrives while a callback runs makes that callback's
// non-restarted blocking call (epoll_wait, SO_RCVTIMEO reads...) fail
// once with EINTR. Futex waits stay armed after a wake-up, so one
// completes when a publisher's FUTEX_WAKE races the loop's wake-up, and
// when a publisher wakes another subscriber (in any process) asleep on the
// same channel word while this loop is busy with its wait armed. The
// Wake() read armed by a ring sleep completes when a Wake() races the
// loop's wake-up (a Wake() whose write lands 5 ms after the loop woke:
// every time; Wake()s 20-200 us apart: none in 10,000). DEFER_TASKRUN
// rings have none of this.
// kHard rings are made without DEFER_TASKRUN: on a DEFER_TASKRUN ring a
// futex wake queues the completion from the wake handler
// (IOU_F_TWQ_IN_WAKE), which signals the registered eventfd through a
// deferred (call_rcu) path; Debian's 6.12.117 never clears that path's
// "signal pending" bit (io_eventfd_do_signal), so the eventfd fires once
// and never again and the loop sleeps through every later message (found
// by `./tether rt-lab`; 6.12.107 and 6.18 are fine). Without DEFER_TASKRUN
// the completion runs as ordinary task work in the loop thread, which
// interrupts ppoll and signals the eventfd inline.
//
// kUringPersistent (extension point, not implemented): a kernel wait that
// stays armed across wakes would post completions flagged IORING_CQE_F_MORE.
// The reaper here already leaves a slot armed when a completion carries
// F_MORE, so that backend is this class with a different SQE preparer and
// arm-once semantics. Open question of that (unmerged) UAPI: which value the
// kernel compares after each wake. The protocol is safe with any value as
// long as the wait stays queued (stale values only cost spurious wakes).
//
// Thread-safety: see WakePort (loop thread, Wake() from anywhere).
#ifndef TETHER_LOOP_URING_FUTEX_PORT_H_
#define TETHER_LOOP_URING_FUTEX_PORT_H_

#include <liburing.h>
#include <poll.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "loop/wake_port.h"

namespace tether::loop {

class UringFutexPort final : public internal::PortBase {
 public:
  // Builds the (disabled) ring and its eventfds. `hard_deadlines` selects
  // the kHard path (the factory resolves kAuto). `reason` (why this backend)
  // goes into description(). Errors name the failing call and errno.
  // Any thread; not RT-safe (allocates, syscalls).
  static absl::StatusOr<std::unique_ptr<UringFutexPort>> Create(
      const WakePortOptions& options, bool hard_deadlines,
      const std::string& reason);

  // Cancels every request and closes the ring. Destroy it on the loop
  // thread (or after that thread exited): the registered ring fd lives in
  // the loop thread's table and keeps the ring open until that thread ends.
  ~UringFutexPort() override;

  WakeBackend backend() const override { return WakeBackend::kUringFutex; }
  absl::Status Watch(const std::atomic<uint32_t>* word,
                     uint64_t cookie) override;
  absl::Status WatchFd(int fd, uint64_t cookie) override;
  void Unwatch(uint64_t cookie) override;
  WaitResult Wait(std::optional<MonotonicTime> deadline, SleepHooks& hooks,
                  absl::FunctionRef<void(uint64_t)> on_ready) override;

  // The IORING_SETUP_* flags the ring was created with (R_DISABLED
  // included). Any thread.
  unsigned setup_flags() const { return setup_flags_; }
  // Whether the ring fd is registered (known after the first Wait()).
  // Loop thread.
  bool ring_fd_registered() const { return ring_fd_registered_; }
  bool hard_deadlines() const { return hard_; }

 private:
  enum class Op : uint8_t {
    kFutexWait = 1,
    kPoll = 2,
    kWakeRead = 3,
    kCancel = 4,
    kCheck = 5,
  };
  UringFutexPort(const WakePortOptions& options, bool hard);
  static uint64_t UserData(Op op, uint32_t slot, uint32_t generation);
  void SignalLoop() override;
  void Bind();
  io_uring_sqe* Sqe();
  // Preps a wait/poll for every unarmed slot, and the wake read if needed
  // for a sleep in the ring (`in_ring`; false: a hard-timer ppoll sleep).
  void ArmAll(bool in_ring);
  // Blocks in the ring (`in_ring`) or in ppoll. Returns false when it
  // timed out.
  bool Block(std::optional<MonotonicTime> deadline, bool in_ring);
  bool BlockHard(std::optional<MonotonicTime> deadline);
  // Consumes every CQE, collecting ready slots into ready_.
  void Reap();
  void CheckRefused(int res);

  io_uring ring_;
  bool ring_open_ = false;
  unsigned setup_flags_ = 0;
  bool ring_fd_registered_ = false;
  int wake_fd_ = -1;      // Wake() writes; an armed READ consumes
  const bool hard_;       // kHard: block in ppoll (see above)
  int cq_event_fd_ = -1;  // kHard only: registered with the ring
  // kHard: a ring sleep ran since the last ppoll sleep, so cq_event_fd_ may
  // hold signals of completions already reaped (BlockHard drains it).
  bool cq_event_stale_ = false;
  std::vector<pollfd> pollfds_;     // kHard: [cq eventfd, wake fd, fds...]
  std::vector<int> pollfd_slots_;   // slot of each pollfds_ entry (-1: ours)
  uint64_t wake_buffer_ = 0;
  bool wake_read_armed_ = false;
  __kernel_timespec check_period_{};
  bool ring_check_ = false;   // the check is a timeout in the ring (above)
  bool check_armed_ = false;  // the multishot check timeout is in the ring
  bool check_due_ = false;    // it completed since the last Wait() returned
};

}  // namespace tether::loop

#endif  // TETHER_LOOP_URING_FUTEX_PORT_H_
