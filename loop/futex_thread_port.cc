#include "loop/futex_thread_port.h"

#include <linux/futex.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "loop/check.h"
#include "loop/uring_futex.h"
#include "shm/futex.h"

#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449
#endif

namespace tether::loop {
namespace {

// futex_waitv(2): returns the index of a woken waiter, or -errno (-EAGAIN: a
// word differed when armed; -EINTR).
long FutexWaitv(futex_waitv* waiters, unsigned count) {
  const long rc = ::syscall(SYS_futex_waitv, waiters, count, 0, nullptr,
                            CLOCK_MONOTONIC);
  return rc < 0 ? -errno : rc;
}

}  // namespace

FutexThreadPort::FutexThreadPort(const WakePortOptions& options,
                                 std::string description)
    : PortBase(options, std::move(description)),
      helper_words_(slots_.size()),
      changed_(new std::atomic<bool>[slots_.size()]) {
  for (size_t i = 0; i < slots_.size(); ++i) changed_[i].store(false);
  pollfds_.reserve(slots_.size() + 1);
  pollfd_slots_.reserve(slots_.size() + 1);
}

absl::StatusOr<std::unique_ptr<FutexThreadPort>> FutexThreadPort::Create(
    const WakePortOptions& options, const std::string& reason) {
  if (options.max_watches <= 0 || options.max_watches > (1 << 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_watches must be in [1, 2^20], not ",
                     options.max_watches));
  }
  std::unique_ptr<FutexThreadPort> port(new FutexThreadPort(
      options,
      absl::StrCat("futex_thread: ", reason,
                   "; deadlines: ppoll (hard timer on PREEMPT_RT)",
                   options.spin > Duration::zero()
                       ? absl::StrCat("; spins up to ",
                                      options.spin.count() / 1000,
                                      " us before sleeping")
                       : "")));
  port->notify_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (port->notify_fd_ < 0) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "eventfd for the futex_thread wake port: ", std::strerror(errno)));
  }
  port->RebuildPollFds();
  port->helper_ = std::thread([p = port.get()] { p->HelperMain(); });
  return port;
}

FutexThreadPort::~FutexThreadPort() {
  if (helper_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    PokeHelper();
    helper_.join();
  }
  if (notify_fd_ >= 0) ::close(notify_fd_);
}

void FutexThreadPort::SignalLoop() {
  const uint64_t one = 1;
  (void)!::write(notify_fd_, &one, sizeof(one));
}

void FutexThreadPort::PokeHelper() {
  control_.fetch_add(1, std::memory_order_seq_cst);
  shm::FutexWake(&control_);
}

void FutexThreadPort::RebuildPollFds() {
  pollfds_.clear();
  pollfd_slots_.clear();
  pollfds_.push_back(pollfd{notify_fd_, POLLIN, 0});
  pollfd_slots_.push_back(-1);
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].kind == internal::WatchSlot::Kind::kFd) {
      pollfds_.push_back(pollfd{slots_[i].fd, POLLIN, 0});
      pollfd_slots_.push_back(static_cast<int>(i));
    }
  }
}

absl::Status FutexThreadPort::Watch(const std::atomic<uint32_t>* word,
                                    uint64_t cookie) {
  TETHER_LOOP_CHECK(word != nullptr, "Watch of a null word");
  TETHER_LOOP_CHECK(reinterpret_cast<uintptr_t>(word) % 4 == 0,
                    "a futex word must be 4-byte aligned");
  CheckThread(/*bind=*/false);
  if (word_count() >= kMaxWords) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the futex_thread wake port watches at most ", kMaxWords,
        " words (futex_waitv's limit): use fewer channels per loop, or a "
        "kernel >= 6.7 for the uring_futex backend"));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    int index = -1;
    if (absl::Status s =
            AddSlot(internal::WatchSlot::Kind::kWord, cookie, &index);
        !s.ok()) {
      return s;
    }
    const uint32_t value = word->load(std::memory_order_seq_cst);
    slots_[index].word = word;
    slots_[index].observed = value;
    helper_words_[index] = HelperWord{word, value};
    changed_[index].store(false, std::memory_order_relaxed);
  }
  PokeHelper();
  return absl::OkStatus();
}

absl::Status FutexThreadPort::WatchFd(int fd, uint64_t cookie) {
  TETHER_LOOP_CHECK(fd >= 0, "WatchFd of a negative fd");
  CheckThread(/*bind=*/false);
  int index = -1;
  {
    std::lock_guard<std::mutex> lock(mu_);  // slots_ is read by no helper,
                                            // but keep one writer rule
    if (absl::Status s =
            AddSlot(internal::WatchSlot::Kind::kFd, cookie, &index);
        !s.ok()) {
      return s;
    }
    slots_[index].fd = fd;
  }
  RebuildPollFds();
  return absl::OkStatus();
}

void FutexThreadPort::Unwatch(uint64_t cookie) {
  CheckThread(/*bind=*/false);
  bool was_word = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const int index = SlotOf(cookie);
    was_word = slots_[index].kind == internal::WatchSlot::Kind::kWord;
    helper_words_[index] = HelperWord{};
    changed_[index].store(false, std::memory_order_relaxed);
    FreeSlot(index);
  }
  if (was_word) {
    PokeHelper();  // drop the word from its futex_waitv set
  } else {
    RebuildPollFds();
  }
}

void FutexThreadPort::HelperMain() {
  helper_tid_.store(static_cast<pid_t>(::syscall(SYS_gettid)),
                    std::memory_order_release);
  std::vector<futex_waitv> waiters(static_cast<size_t>(kMaxWords) + 1);
  for (;;) {
    // Load the control word before scanning: a change after this load makes
    // the futex_waitv below return at once.
    const uint32_t control = control_.load(std::memory_order_seq_cst);
    unsigned count = 0;
    bool signal = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
      std::memset(waiters.data(), 0, sizeof(futex_waitv));
      waiters[0].uaddr = reinterpret_cast<uintptr_t>(&control_);
      waiters[0].val = control;
      waiters[0].flags = kTetherFutex2SharedU32;
      count = 1;
      for (size_t i = 0; i < helper_words_.size(); ++i) {
        HelperWord& w = helper_words_[i];
        if (w.word == nullptr) continue;
        const uint32_t value = w.word->load(std::memory_order_seq_cst);
        if (value != w.reported) {
          w.reported = value;
          changed_[i].store(true, std::memory_order_release);
          signal = true;
        }
        futex_waitv& v = waiters[count++];
        std::memset(&v, 0, sizeof(v));
        v.uaddr = reinterpret_cast<uintptr_t>(w.word);
        v.val = w.reported;
        v.flags = kTetherFutex2SharedU32;
      }
    }
    if (signal) SignalLoop();
    // Blocks until a word or the control word is woken, or returns -EAGAIN
    // when one already differs; either way: rescan.
    const long rc = FutexWaitv(waiters.data(), count);
    TETHER_LOOP_CHECK(rc >= 0 || rc == -EAGAIN || rc == -EINTR,
                      "futex_waitv in the wake helper failed (was a word "
                      "unmapped before Unwatch?)");
  }
}

WaitResult FutexThreadPort::Wait(std::optional<MonotonicTime> deadline,
                                 SleepHooks& hooks,
                                 absl::FunctionRef<void(uint64_t)> on_ready) {
  CheckThread(/*bind=*/true);
  WaitResult result;
  const bool may_block =
      !deadline.has_value() || *deadline > MonotonicNow();
  if (may_block && Spin(on_ready, &result)) return result;

  const bool blocked = SleepProtocol(hooks, &result, [&] {
    for (pollfd& p : pollfds_) p.revents = 0;
    timespec timeout;
    if (deadline.has_value()) timeout = internal::TimeoutUntil(*deadline);
    const int n = ::ppoll(pollfds_.data(), pollfds_.size(),
                          deadline.has_value() ? &timeout : nullptr, nullptr);
    TETHER_LOOP_CHECK(n >= 0 || errno == EINTR, "ppoll in the wake port");
    if (n == 0) result.timed_out = true;
  });

  ready_.clear();
  if (blocked && (pollfds_[0].revents & POLLIN) != 0) {
    uint64_t count = 0;
    (void)!::read(notify_fd_, &count, sizeof(count));  // reset
  }
  // Take the helper's reports whether or not we slept: they are true news.
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].kind == internal::WatchSlot::Kind::kWord &&
        changed_[i].exchange(false, std::memory_order_acq_rel)) {
      ready_.push_back(Ready{static_cast<int>(i), slots_[i].generation});
    }
  }
  if (blocked) {
    for (size_t i = 1; i < pollfds_.size(); ++i) {
      if ((pollfds_[i].revents & (POLLIN | POLLERR | POLLHUP)) != 0) {
        const int slot = pollfd_slots_[i];
        ready_.push_back(Ready{slot, slots_[slot].generation});
      }
    }
  }
  ReportReady(deadline, on_ready, &result);
  return result;
}

}  // namespace tether::loop
