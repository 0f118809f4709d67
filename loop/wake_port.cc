#include "loop/wake_port.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "loop/check.h"
#include "util/hot_path.h"

namespace tether::loop::internal {
namespace {

pid_t CurrentTid() {
  thread_local const pid_t tid = static_cast<pid_t>(::syscall(SYS_gettid));
  return tid;
}

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

}  // namespace

PortBase::PortBase(const WakePortOptions& options, std::string description)
    : options_(options), description_(std::move(description)) {
  TETHER_LOOP_CHECK(options.max_watches > 0, "max_watches must be positive");
  TETHER_LOOP_CHECK(options.spin >= Duration::zero(), "negative spin");
  slots_.resize(static_cast<size_t>(options.max_watches));
  ready_.reserve(slots_.size());
}

TETHER_HOT_PATH bool PortBase::SleepProtocol(SleepHooks& hooks,
                                             WaitResult* result,
                                             absl::FunctionRef<void()> block) {
  bool blocked = false;
  hooks.BeginSleep();
  const bool wake_pending = wake_.EnterSleep();
  LoadObserved();
  if (hooks.HasPendingWork()) {
    result->pending_work = true;
  } else if (!wake_pending) {
    block();
    blocked = true;
  }
  wake_.ExitSleep();
  hooks.EndSleep();
  return blocked;
}

TETHER_HOT_PATH void PortBase::ReportReady(
    std::optional<MonotonicTime> deadline,
    absl::FunctionRef<void(uint64_t)> on_ready, WaitResult* result) {
  for (const Ready& r : ready_) {
    const WatchSlot& s = slots_[r.slot];
    if (s.generation != r.generation || s.kind == WatchSlot::Kind::kFree) {
      continue;  // unwatched by an earlier on_ready
    }
    ++result->ready;
    on_ready(s.cookie);
  }
  ready_.clear();
  result->woken = wake_.Take();
  if (deadline.has_value() && !result->timed_out) {
    result->timed_out = MonotonicNow() >= *deadline;
  }
}

TETHER_HOT_PATH MonotonicTime PortBase::BoundByCheck(
    std::optional<MonotonicTime> deadline, bool* is_check) {
  if (next_check_ == MonotonicTime{}) {
    next_check_ = MonotonicNow() + kLostWakeCheck;
  }
  *is_check = !deadline.has_value() || next_check_ < *deadline;
  return *is_check ? next_check_ : *deadline;
}

void PortBase::CheckCame(WaitResult* result) {
  result->checked = true;
  next_check_ = MonotonicNow() + kLostWakeCheck;
}

void PortBase::Wake() {
  if (wake_.Request()) SignalLoop();
}

TETHER_HOT_PATH void PortBase::CheckThread(bool bind) {
  const pid_t tid = CurrentTid();
  if (owner_tid_ == 0) {
    if (bind) owner_tid_ = tid;
    return;
  }
  TETHER_LOOP_CHECK(owner_tid_ == tid,
                    "a WakePort is used by the thread of its first Wait() "
                    "only (Wake() excepted)");
}

absl::Status PortBase::AddSlot(WatchSlot::Kind kind, uint64_t cookie,
                               int* index) {
  int free_slot = -1;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const WatchSlot& s = slots_[i];
    if (s.kind == WatchSlot::Kind::kFree) {
      if (free_slot < 0) free_slot = static_cast<int>(i);
      continue;
    }
    TETHER_LOOP_CHECK(s.cookie != cookie, "cookie is already watched");
  }
  if (free_slot < 0) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the wake port already watches ", slots_.size(),
        " words/fds (WakePortOptions::max_watches): raise max_watches"));
  }
  WatchSlot& s = slots_[free_slot];
  s.kind = kind;
  s.cookie = cookie;
  s.word = nullptr;
  s.fd = -1;
  s.observed = 0;
  s.armed = false;
  s.faulted = false;
  ++s.generation;
  if (kind == WatchSlot::Kind::kWord) ++word_count_;
  if (kind == WatchSlot::Kind::kFd) ++fd_count_;
  live_end_ = std::max(live_end_, static_cast<size_t>(free_slot) + 1);
  *index = free_slot;
  return absl::OkStatus();
}

int PortBase::SlotOf(uint64_t cookie) const {
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].kind != WatchSlot::Kind::kFree &&
        slots_[i].cookie == cookie) {
      return static_cast<int>(i);
    }
  }
  TETHER_LOOP_CHECK(false, "Unwatch of a cookie that is not watched");
  return -1;
}

void PortBase::FreeSlot(int index) {
  WatchSlot& s = slots_[index];
  if (s.kind == WatchSlot::Kind::kWord) --word_count_;
  if (s.kind == WatchSlot::Kind::kFd) --fd_count_;
  s.kind = WatchSlot::Kind::kFree;
  s.word = nullptr;
  s.fd = -1;
  s.armed = false;
  ++s.generation;
  while (live_end_ > 0 && slots_[live_end_ - 1].kind == WatchSlot::Kind::kFree) {
    --live_end_;
  }
}

TETHER_HOT_PATH bool PortBase::Spin(absl::FunctionRef<void(uint64_t)> on_ready,
                                    WaitResult* result) {
  if (options_.spin <= Duration::zero()) return false;
  const MonotonicTime end = MonotonicNow() + options_.spin;
  for (int round = 0;; ++round) {
    if (wake_.pending()) {
      result->woken = wake_.Take();
      result->spun = true;
      return true;
    }
    bool changed = false;
    for (size_t i = 0; i < live_end_; ++i) {
      const WatchSlot& s = slots_[i];
      if (s.kind == WatchSlot::Kind::kWord &&
          s.word->load(std::memory_order_acquire) != s.observed) {
        changed = true;
        break;
      }
    }
    if (changed) {
      // Report every word that moved; the loop drains them next.
      for (size_t i = 0; i < live_end_; ++i) {
        WatchSlot& s = slots_[i];
        if (s.kind != WatchSlot::Kind::kWord) continue;
        const uint32_t v = s.word->load(std::memory_order_acquire);
        if (v == s.observed) continue;
        s.observed = v;
        ++result->ready;
        // May unwatch other slots: they are then kFree and skipped.
        on_ready(s.cookie);
      }
      result->spun = true;
      return true;
    }
    if ((round & 31) == 31 && MonotonicNow() >= end) return false;
    CpuRelax();
  }
}

void PortBase::LoadObserved() {
  for (size_t i = 0; i < live_end_; ++i) {
    WatchSlot& s = slots_[i];
    if (s.kind == WatchSlot::Kind::kWord) {
      s.observed = s.word->load(std::memory_order_seq_cst);
    }
  }
}

std::string LostWakeCheckClause() {
  return absl::StrCat(
      "; looks for lost wakes every ",
      std::chrono::duration_cast<std::chrono::milliseconds>(kLostWakeCheck)
          .count(),
      " ms");
}

timespec TimeoutUntil(MonotonicTime deadline) {
  const Duration left = deadline - MonotonicNow();
  if (left <= Duration::zero()) return timespec{0, 0};
  return timespec{static_cast<time_t>(left.count() / 1'000'000'000),
                  static_cast<long>(left.count() % 1'000'000'000)};
}

}  // namespace tether::loop::internal
