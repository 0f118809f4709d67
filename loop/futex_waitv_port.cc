#include "loop/futex_waitv_port.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "loop/check.h"
#include "util/hot_path.h"

#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449
#endif

namespace tether::loop {
namespace {

// FUTEX2_SIZE_U32, shared (no FUTEX2_PRIVATE: channel words live in files
// mapped by several processes).
constexpr uint32_t kFutex2SizeU32 = 0x02;
// The loop's own word is process memory, woken only from this process
// (SignalLoop): a private futex, whose key needs no page lookup.
constexpr uint32_t kFutex2Private = 128;  // FUTEX2_PRIVATE

void WakePrivate(std::atomic<uint32_t>* word) {
  (void)::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word),
                  FUTEX_WAKE | FUTEX_PRIVATE_FLAG, INT_MAX, nullptr, nullptr,
                  0);
}

}  // namespace

FutexWaitvPort::FutexWaitvPort(const WakePortOptions& options,
                               std::string description)
    : PortBase(options, std::move(description)) {
  waiters_.resize(slots_.size() + 1);
  waiter_slots_.resize(slots_.size() + 1);
  internal::LostWakeTicker::Register(this);
}

absl::StatusOr<std::unique_ptr<FutexWaitvPort>> FutexWaitvPort::Create(
    const WakePortOptions& options, const std::string& reason) {
  if (options.max_watches <= 0 || options.max_watches > kMaxWords) {
    return absl::InvalidArgumentError(
        absl::StrCat("the futex_waitv wake backend watches at most ",
                     kMaxWords, " words (futex_waitv takes 128 waiters), not ",
                     options.max_watches));
  }
  return std::unique_ptr<FutexWaitvPort>(new FutexWaitvPort(
      options,
      absl::StrCat("futex_waitv: ", reason,
                   "; the loop thread waits in futex_waitv on every watched "
                   "word (no helper thread on the wake path); deadlines: "
                   "futex_waitv's timeout (hard timer on PREEMPT_RT)",
                   internal::LostWakeCheckClause(), " (a ticker thread)",
                   options.spin > Duration::zero()
                       ? absl::StrCat("; spins up to ",
                                      options.spin.count() / 1000,
                                      " us before sleeping")
                       : "")));
}

FutexWaitvPort::~FutexWaitvPort() {
  internal::LostWakeTicker::Unregister(this);
}

void FutexWaitvPort::Poke() {
  check_requested_.store(true, std::memory_order_release);
  SignalLoop();
}

void FutexWaitvPort::SignalLoop() {
  own_word_.fetch_add(1, std::memory_order_seq_cst);
  WakePrivate(&own_word_);
}

absl::Status FutexWaitvPort::Watch(const std::atomic<uint32_t>* word,
                                   uint64_t cookie) {
  TETHER_LOOP_CHECK(word != nullptr, "Watch of a null word");
  TETHER_LOOP_CHECK(reinterpret_cast<uintptr_t>(word) % 4 == 0,
                    "a futex word must be 4-byte aligned");
  CheckThread(/*bind=*/false);
  int index = -1;
  if (absl::Status s =
          AddSlot(internal::WatchSlot::Kind::kWord, cookie, &index);
      !s.ok()) {
    return s;
  }
  slots_[index].word = word;
  slots_[index].observed = word->load(std::memory_order_seq_cst);
  return absl::OkStatus();
}

absl::Status FutexWaitvPort::WatchFd(int, uint64_t) {
  return absl::FailedPreconditionError(
      "the futex_waitv wake backend cannot wait on a file descriptor; stop "
      "a loop through StopSignals (UringEventLoopOptions::stop_signals), not "
      "a raw fd");
}

void FutexWaitvPort::Unwatch(uint64_t cookie) {
  CheckThread(/*bind=*/false);
  // Nothing is armed between waits: the word is not touched after this.
  FreeSlot(SlotOf(cookie));
}

TETHER_HOT_PATH bool FutexWaitvPort::Block(
    std::optional<MonotonicTime> deadline) {
  unsigned n = 0;
  for (size_t i = 0; i < live_end(); ++i) {
    const internal::WatchSlot& s = slots_[i];
    if (s.kind != internal::WatchSlot::Kind::kWord) continue;
    waiters_[n] = futex_waitv{
        .val = s.observed,
        .uaddr = reinterpret_cast<uint64_t>(s.word),
        .flags = kFutex2SizeU32,
        .__reserved = 0,
    };
    waiter_slots_[n] = static_cast<int>(i);
    ++n;
  }
  waiters_[n] = futex_waitv{
      .val = own_observed_,
      .uaddr = reinterpret_cast<uint64_t>(&own_word_),
      .flags = kFutex2SizeU32 | kFutex2Private,
      .__reserved = 0,
  };
  waiter_slots_[n] = -1;
  ++n;
  timespec abs;
  if (deadline.has_value()) {
    const int64_t ns = deadline->time_since_epoch().count();
    abs = timespec{static_cast<time_t>(ns / 1'000'000'000),
                   static_cast<long>(ns % 1'000'000'000)};
  }
  const long rc =
      ::syscall(SYS_futex_waitv, waiters_.data(), n, 0,
                deadline.has_value() ? &abs : nullptr, CLOCK_MONOTONIC);
  const int err = rc < 0 ? errno : 0;
  // EFAULT: a watched word's file was truncated under us. Which word is not
  // said, so every word is reported ready, once (WakePort::Watch()).
  TETHER_LOOP_CHECK(rc >= 0 || err == EAGAIN || err == ETIMEDOUT ||
                        err == EINTR || (err == EFAULT && !faulted_),
                    "futex_waitv failed (was a watched word unmapped before "
                    "Unwatch?)");
  faulted_ = err == EFAULT;
  return !(rc < 0 && err == ETIMEDOUT);
}

TETHER_HOT_PATH WaitResult
FutexWaitvPort::Wait(std::optional<MonotonicTime> deadline, SleepHooks& hooks,
                     absl::FunctionRef<void(uint64_t)> on_ready) {
  CheckThread(/*bind=*/true);
  WaitResult result;
  const bool may_block = !deadline.has_value() || *deadline > MonotonicNow();
  if (may_block && Spin(on_ready, &result)) return result;

  ready_.clear();
  // Before the protocol marks us sleeping: a Wake() after that bumps the
  // word past this value, so the wait returns at once (see WakeRequest).
  own_observed_ = own_word_.load(std::memory_order_seq_cst);
  bool timed_out = false;
  const bool blocked = SleepProtocol(hooks, &result, [&] {
    timed_out = !Block(deadline);
  });
  // A plain load first: the exchange only when the ticker poked.
  result.checked = check_requested_.load(std::memory_order_relaxed) &&
                   check_requested_.exchange(false, std::memory_order_acq_rel);
  if (blocked) {
    for (size_t i = 0; i < live_end(); ++i) {
      const internal::WatchSlot& s = slots_[i];
      if (s.kind == internal::WatchSlot::Kind::kWord &&
          (faulted_ || s.word->load(std::memory_order_acquire) != s.observed)) {
        ready_.push_back(Ready{static_cast<int>(i), s.generation});
      }
    }
  }
  result.timed_out = timed_out;
  ReportReady(deadline, on_ready, &result);
  return result;
}

}  // namespace tether::loop
