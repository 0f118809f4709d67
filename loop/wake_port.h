// loop: the event loop's port — how one loop thread sleeps until a watched
// 32-bit shared futex word changes (a channel's wake word), a watched fd
// becomes readable, a deadline passes, or another thread calls Wake(). The
// dispatch core (dispatch.h) decides what runs when Wait() returns; the
// backends are uring_futex_port.h (io_uring FUTEX_WAIT, the default) and
// futex_waitv_port.h (the loop thread in futex_waitv, for kernels < 6.7 and
// wherever io_uring is disabled or refused);
// make_wake_port.h picks one.
//
// The no-lost-wakeup protocol (shm/layout.h, "Wake") is split between the
// port and the loop. Wait() does, in this order:
//   1. optionally spins (WakePortOptions::spin) comparing each watched word
//      with the value it last observed; a change returns at once;
//   2. hooks.BeginSleep()        the loop: Channel::BeginSleep() on every
//                                watched channel (publishers now FUTEX_WAKE);
//   3. loads every watched word (seq_cst): the values it will wait on;
//   4. hooks.HasPendingWork()    the loop: re-check every reader; true means
//                                a message slipped in, so the port does not
//                                block (WaitResult::pending_work);
//   5. arms a wait on each word whose previous wait completed, with the
//      value from step 3, and blocks until a wait completes, Wake() or the
//      deadline;
//   6. hooks.EndSleep()          the loop: Channel::EndSleep() on each;
//   7. calls on_ready(cookie) for every watch that may have changed.
// A message committed after step 4's re-check bumps the word after step 3's
// load, so the wait armed with that value returns (-EAGAIN) or is woken by
// the publisher's FUTEX_WAKE (it saw sleepers != 0 because step 2 came
// first). Waits that did not complete stay armed while the loop is busy;
// their stale value is harmless: the next FUTEX_WAKE completes them, and a
// spurious completion only makes the loop re-check a reader.
//
// Spin exactness: a word's "observed" value is the one step 3 loaded before
// the loop's last drain of that channel, so a spin sees every later commit.
// Call Wait() only when the loop has drained what it was told about.
//
// The lost-wake check: a wake can fail to come although this process
// follows the protocol: a publisher killed between its commit and its
// FUTEX_WAKE, a process with write access to a reader-state file clearing
// the sleeper announcements, a kernel that drops a completion. So a real
// port's Wait() also returns about every kLostWakeCheck, with
// WaitResult::checked set, and the loop then looks at every reader, as
// after any return: a lost wake delays a message by at most that much
// instead of leaving a node asleep for good. (A cleared announcement is
// also found then, by Channel::EndSleep, and the loop says so.)
// uring_futex keeps one multishot IORING_OP_TIMEOUT armed in its ring
// when the ring has DEFER_TASKRUN (its completions then never interrupt
// the thread outside io_uring_enter) and otherwise (kHard, older rings)
// bounds each sleep's timeout by the next check (BoundByCheck);
// futex_waitv is poked by a thread of the process (lost_wake_ticker.h),
// because a timeout on each futex_waitv costs an hrtimer per sleep.
#ifndef TETHER_LOOP_WAKE_PORT_H_
#define TETHER_LOOP_WAKE_PORT_H_

#include <sys/types.h>
#include <time.h>

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "loop/clock.h"
#include "loop/kernel_probe.h"

namespace tether::loop {

// About how often a real port's Wait() returns at the latest (see above;
// later when the machine is loaded).
inline constexpr Duration kLostWakeCheck = std::chrono::milliseconds(100);

// How a port times a deadline.
enum class DeadlineTimer {
  // Measured: kRingWait unless the kernel is PREEMPT_RT and this boot's
  // rt-probe (`tether doctor --rt-probe`, rt_probe.h) did not find the
  // io_uring wait timeout hard for real-time waiters; kHard then, and when
  // no probe ran (ChooseDeadlineTimer() in make_wake_port.h).
  kAuto,
  // uring_futex: the io_uring CQ-wait timeout (one io_uring_enter per
  // sleep). On PREEMPT_RT before Linux 6.12.115 that hrtimer is *soft*: it
  // expires in the ktimers thread (SCHED_FIFO 1), so an RT loop's deadline
  // is late while other RT work runs; 6.12.115 ("io_uring/wait: wake
  // real-time waiters from hard interrupt context") made it hard for RT
  // waiters.
  kRingWait,
  // A path whose timeout is a hard hrtimer for RT tasks: uring_futex waits
  // in ppoll(2) on an eventfd registered with the ring (the kernel signals
  // it when a completion is queued) and then reaps the ring: 3-4 syscalls
  // per sleep instead of 1, for a sleep with a deadline or a watched fd (a
  // sleep with neither waits in the ring; its ring has no DEFER_TASKRUN,
  // see uring_futex_port.h). futex_waitv's own timeout is hard on RT, so
  // both modes are the same there. (timerfd and IORING_OP_TIMEOUT are soft
  // on RT too: not used.)
  kHard,
};

struct WakePortOptions {
  // Use this backend or fail (tests, the loop option); nullopt picks the
  // best the kernel offers (ChooseWakeBackend).
  std::optional<WakeBackend> backend;
  // Before announcing itself as a sleeper, Wait() busy-polls the watched
  // words (and Wake()) for up to this long. Zero: never. A spinning loop
  // costs publishers nothing (no FUTEX_WAKE) but burns its CPU.
  Duration spin = Duration::zero();
  DeadlineTimer deadline_timer = DeadlineTimer::kAuto;
  // Watched words plus fds. Fixed at creation so that Wait() never
  // allocates. futex_waitv allows at most 127 words (futex_waitv's 128
  // waiters, one kept for its control word).
  int max_watches = 64;
};

// The loop's half of the sleep protocol, called by Wait() on the loop
// thread (see the steps above). Must not block; must not call the port.
class SleepHooks {
 public:
  virtual ~SleepHooks() = default;
  // Step 2: Channel::BeginSleep() on every watched channel.
  virtual void BeginSleep() = 0;
  // Step 4: true if any watched reader has a message (or the loop has other
  // work): Wait() then returns without blocking.
  virtual bool HasPendingWork() = 0;
  // Step 6: Channel::EndSleep() on every watched channel. Called exactly
  // once after every BeginSleep().
  virtual void EndSleep() = 0;
};

// Hooks for a port that watches only fds or plain words with no sleep
// protocol (tests, the stop signal): nothing to announce, nothing pending.
class NoSleepHooks final : public SleepHooks {
 public:
  void BeginSleep() override {}
  bool HasPendingWork() override { return false; }
  void EndSleep() override {}
};

// What one Wait() saw. Several may be set at once; all false is a spurious
// return (e.g. a wake request already consumed): just call Wait() again.
struct WaitResult {
  int ready = 0;              // on_ready calls made
  bool woken = false;         // Wake() was called since the last Wait()
  bool timed_out = false;     // the deadline has passed
  bool pending_work = false;  // HasPendingWork() was true: did not block
  bool spun = false;          // the spin phase found the change (no syscall)
  // The lost-wake check ended this Wait() (about kLostWakeCheck apart;
  // never on a VirtualPort). The loop looks at every reader after any
  // return, so it needs nothing more; tests read it.
  bool checked = false;
  // The port has nothing left to wait for: a VirtualPort reached the time
  // limit of the current run. Real ports never set it.
  bool idle = false;
};

class WakePort {
 public:
  virtual ~WakePort() = default;

  // Which backend this is. Any thread; RT-safe.
  virtual WakeBackend backend() const = 0;
  // One line for logs and `tether doctor`: backend, why, ring flags,
  // deadline timer, spin. Fixed at creation. Any thread; RT-safe.
  virtual const std::string& description() const = 0;

  // Watches the 32-bit shared futex word `word` (4-byte aligned; in shared
  // or private memory; it must stay mapped until Unwatch() returns) under
  // `cookie`, which on_ready() reports. Duplicate cookies abort. A word
  // the kernel cannot reach (EFAULT: its channel file was truncated under
  // us, another process's doing) is reported ready, once, so that its
  // owner reads the channel, which finds the damage (shm's SIGBUS guard
  // maps zero pages there; the word is reachable again). EFAULT again with
  // no good wait between aborts: a word unmapped before Unwatch().
  // ResourceExhausted beyond max_watches. Loop thread (or any thread before
  // the first Wait()); not RT-safe; may make a syscall, never blocks long.
  virtual absl::Status Watch(const std::atomic<uint32_t>* word,
                             uint64_t cookie) = 0;
  // Watches `fd` for readability (level-triggered: while it stays readable
  // every Wait() reports it). `fd` must stay open until Unwatch() returns.
  // Same threading as Watch().
  virtual absl::Status WatchFd(int fd, uint64_t cookie) = 0;
  // Stops watching `cookie`; aborts on an unknown cookie. After it returns
  // the port never touches the word or fd again and on_ready never reports
  // `cookie`. Loop thread; not RT-safe (may make a syscall).
  virtual void Unwatch(uint64_t cookie) = 0;

  // One sleep (see the protocol above): blocks until a watch may have
  // changed, Wake(), `deadline` (absolute CLOCK_MONOTONIC; nullopt = none;
  // a past deadline polls without blocking) or a signal. Calls `on_ready`
  // once per watch that may have changed (spurious reports happen; a watch
  // may not be reported twice in one Wait()). on_ready may Unwatch().
  // Real ports also return, with checked set, about every
  // kLostWakeCheck. The first Wait() binds the port to the calling thread:
  // every later call but Wake() must come from it (aborts otherwise).
  // Loop thread; RT-safe: no allocation, blocks only as asked, one syscall
  // per sleep on uring_futex (kRingWait).
  virtual WaitResult Wait(std::optional<MonotonicTime> deadline,
                          SleepHooks& hooks,
                          absl::FunctionRef<void(uint64_t cookie)> on_ready) = 0;

  // Makes the current or next Wait() return with woken = true. Requests
  // coalesce. Any thread, also a signal handler (async-signal-safe): two
  // atomics, and one write(2) only when the loop is blocked. RT-safe.
  virtual void Wake() = 0;
};

namespace internal {

// A cross-thread wake request and the loop's "I am blocked" flag, so that
// Wake() makes a syscall only when the loop needs one. Dekker style, all
// seq_cst: the loop stores sleeping then loads pending; Wake() sets pending
// then loads sleeping; at least one of them sees the other.
class WakeRequest {
 public:
  // Any thread, async-signal-safe. True: the caller must signal the loop's
  // fd (the loop is, or is about to be, blocked).
  bool Request() {
    if (pending_.exchange(true, std::memory_order_seq_cst)) return false;
    return sleeping_.load(std::memory_order_seq_cst);
  }
  // Loop thread, before blocking. True: a request is pending, do not block.
  bool EnterSleep() {
    sleeping_.store(true, std::memory_order_seq_cst);
    return pending_.load(std::memory_order_seq_cst);
  }
  void ExitSleep() { sleeping_.store(false, std::memory_order_seq_cst); }
  // Loop thread: consumes a pending request.
  bool Take() { return pending_.exchange(false, std::memory_order_acq_rel); }
  bool pending() const { return pending_.load(std::memory_order_acquire); }

 private:
  std::atomic<bool> pending_{false};
  std::atomic<bool> sleeping_{false};
};

// One watch: a futex word or an fd, and the bookkeeping both backends keep.
struct WatchSlot {
  enum class Kind : uint8_t { kFree, kWord, kFd };
  Kind kind = Kind::kFree;
  uint64_t cookie = 0;
  const std::atomic<uint32_t>* word = nullptr;
  int fd = -1;
  // The value loaded in the last sleep protocol (step 3), or at Watch().
  uint32_t observed = 0;
  // Bumped whenever the slot is (re)used: tags in-flight requests.
  uint32_t generation = 0;
  // A wait/poll request for this slot is in flight (backend-specific).
  bool armed = false;
  // The last wait on the word failed with EFAULT and was reported ready
  // (see Watch()); cleared by a wait that did not fail.
  bool faulted = false;
};

// Watch table, thread binding, spin phase and wake request shared by the
// backends. Not an interface; see WakePort for the contracts.
class PortBase : public WakePort {
 public:
  explicit PortBase(const WakePortOptions& options, std::string description);

  const std::string& description() const override { return description_; }
  void Wake() override;

 protected:
  // The backend's way to interrupt its blocking wait: write(2) to an fd.
  // Async-signal-safe.
  virtual void SignalLoop() = 0;

  // Aborts unless called on the bound thread (or before binding). Binds on
  // `bind`. RT-safe (gettid is cached per thread).
  void CheckThread(bool bind);
  bool bound() const { return owner_tid_ != 0; }

  // Index of a free slot for `cookie`, or ResourceExhausted; aborts on a
  // duplicate cookie.
  absl::Status AddSlot(WatchSlot::Kind kind, uint64_t cookie, int* index);
  // The slot of `cookie`; aborts when unknown.
  int SlotOf(uint64_t cookie) const;
  // Marks slot `index` free (its generation moves on).
  void FreeSlot(int index);
  int word_count() const { return word_count_; }
  int fd_count() const { return fd_count_; }
  // One past the highest slot in use: every per-wait scan of the watch table
  // (arming, loading, spinning) stops here, so a sleep costs the watches a
  // loop has, not max_watches. Slots from here on are all free; holes below
  // (an unwatch in the middle) are skipped by their kind, and AddSlot fills
  // them first (it takes the lowest free slot). RT-safe.
  size_t live_end() const { return live_end_; }

  // Step 1. Spins until a watched word differs from its observed value or a
  // wake is requested, at most options_.spin. Reports changed words through
  // on_ready (updating observed) and fills *result. True if it found
  // something (Wait() then returns without sleeping).
  bool Spin(absl::FunctionRef<void(uint64_t)> on_ready, WaitResult* result);
  // Step 3: observed = word (seq_cst) for every watched word.
  void LoadObserved();

  // Steps 2-6 of the sleep protocol, the same for every backend: announce
  // (hooks.BeginSleep, the wake request's sleeping flag), load the words,
  // re-check (hooks.HasPendingWork), and only if nothing is pending or
  // requested run `block` (the backend's arm-and-block); then leave sleep
  // (flag, hooks.EndSleep). Returns true if `block` ran. RT-safe.
  bool SleepProtocol(SleepHooks& hooks, WaitResult* result,
                     absl::FunctionRef<void()> block);

  // For a port whose blocking call carries the lost-wake check as its
  // timeout: the nearer of `deadline` and the next check (*is_check says
  // which). After a call that timed out there with *is_check, CheckCame()
  // sets result->checked and schedules the next. RT-safe (a clock read on
  // the first call and per check).
  MonotonicTime BoundByCheck(std::optional<MonotonicTime> deadline,
                             bool* is_check);
  void CheckCame(WaitResult* result);

  // A watch the backend found ready, tagged with the slot's generation.
  struct Ready {
    int slot;
    uint32_t generation;
  };
  // Step 7: reports every ready_ entry whose slot is still the same watch
  // (an earlier on_ready may have unwatched it), clears ready_, consumes
  // the wake request and settles timed_out. RT-safe.
  void ReportReady(std::optional<MonotonicTime> deadline,
                   absl::FunctionRef<void(uint64_t)> on_ready,
                   WaitResult* result);

  WakePortOptions options_;
  std::string description_;
  std::vector<WatchSlot> slots_;  // fixed size: options_.max_watches
  std::vector<Ready> ready_;      // reserved: options_.max_watches
  int word_count_ = 0;
  int fd_count_ = 0;
  WakeRequest wake_;

 private:
  MonotonicTime next_check_{};  // see BoundByCheck (zero: not yet set)
  pid_t owner_tid_ = 0;
  size_t live_end_ = 0;  // see live_end()
};

// Relative timeout from now to `deadline` (zero when passed). RT-safe.
timespec TimeoutUntil(MonotonicTime deadline);

// "; looks for lost wakes every 100 ms", for the ports' descriptions.
std::string LostWakeCheckClause();

}  // namespace internal
}  // namespace tether::loop

#endif  // TETHER_LOOP_WAKE_PORT_H_
