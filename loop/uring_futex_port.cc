#include "loop/uring_futex_port.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "loop/check.h"
#include "loop/uring_futex.h"
#include "util/hot_path.h"

namespace tether::loop {
namespace {

unsigned RoundUpPow2(unsigned n) {
  unsigned p = 1;
  while (p < n) p <<= 1;
  return p;
}

constexpr int kOpShift = 56;
constexpr int kSlotShift = 32;
constexpr uint64_t kSlotMask = (uint64_t{1} << 24) - 1;

}  // namespace

uint64_t UringFutexPort::UserData(Op op, uint32_t slot, uint32_t generation) {
  return (uint64_t{static_cast<uint8_t>(op)} << kOpShift) |
         ((uint64_t{slot} & kSlotMask) << kSlotShift) | generation;
}

UringFutexPort::UringFutexPort(const WakePortOptions& options, bool hard)
    : PortBase(options, ""), hard_(hard) {
  std::memset(&ring_, 0, sizeof(ring_));
  check_period_.tv_sec = kLostWakeCheck.count() / 1'000'000'000;
  check_period_.tv_nsec = kLostWakeCheck.count() % 1'000'000'000;
  pollfds_.reserve(slots_.size() + 2);
  pollfd_slots_.reserve(slots_.size() + 2);
}

absl::StatusOr<std::unique_ptr<UringFutexPort>> UringFutexPort::Create(
    const WakePortOptions& options, bool hard_deadlines,
    const std::string& reason) {
  if (options.max_watches <= 0 || options.max_watches > (1 << 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_watches must be in [1, 2^20], not ",
                     options.max_watches));
  }
  std::unique_ptr<UringFutexPort> port(
      new UringFutexPort(options, hard_deadlines));

  // Room for a re-arm of every slot, the wake read and a few cancels.
  const unsigned entries =
      RoundUpPow2(static_cast<unsigned>(options.max_watches) + 8);
  // Hard deadlines never use DEFER_TASKRUN: they rely on the registered
  // eventfd, which a DEFER_TASKRUN ring signals from the futex wake handler
  // through a deferred path that 6.12.117 takes once and then never again
  // (see the header).
  io_uring_params params{};
  params.flags = IORING_SETUP_R_DISABLED | IORING_SETUP_CQSIZE;
  params.cq_entries = 2 * entries;
  io_uring_params got{};
  int rc = QueueInitPreferred(
      entries, &port->ring_, params,
      hard_deadlines ? IORING_SETUP_DEFER_TASKRUN : 0u, &got);
  if (rc == 0) port->setup_flags_ = got.flags;
  port->ring_check_ =
      !hard_deadlines && (got.flags & IORING_SETUP_DEFER_TASKRUN) != 0;
  if (rc != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("io_uring_setup for the loop's ring failed: ",
                     std::strerror(-rc),
                     (rc == -ENOMEM ? " (RLIMIT_MEMLOCK too low for the ring "
                                      "on this kernel: raise `ulimit -l`)"
                                    : "")));
  }
  port->ring_open_ = true;

  port->wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (port->wake_fd_ < 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("eventfd for the loop's Wake(): ", std::strerror(errno)));
  }
  if (hard_deadlines) {
    port->cq_event_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (port->cq_event_fd_ < 0) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "eventfd for hard-timer deadlines: ", std::strerror(errno)));
    }
    rc = io_uring_register_eventfd(&port->ring_, port->cq_event_fd_);
    if (rc < 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "registering the completion eventfd with the ring (hard-timer "
          "deadlines): ",
          std::strerror(-rc)));
    }
  }
  port->description_ = absl::StrCat(
      "uring_futex: ", reason, "; ring flags ",
      RingFlagNames(port->setup_flags_), "; deadlines: ",
      hard_deadlines ? "ppoll on a ring eventfd and the fds (hard timer on "
                       "PREEMPT_RT)"
                     : "io_uring wait timeout (a soft timer on PREEMPT_RT "
                       "kernels without the 6.12.115 fix)",
      internal::LostWakeCheckClause(),
      options.spin > Duration::zero()
          ? absl::StrCat("; spins up to ", options.spin.count() / 1000,
                         " us before sleeping")
          : "");
  return port;
}

UringFutexPort::~UringFutexPort() {
  // queue_exit cancels in-flight requests and unregisters the ring fd (which
  // only works on the thread that registered it; see the header).
  if (ring_open_) io_uring_queue_exit(&ring_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
  if (cq_event_fd_ >= 0) ::close(cq_event_fd_);
}

void UringFutexPort::SignalLoop() {
  const uint64_t one = 1;
  // EAGAIN only when the counter is near 2^64: the loop is signalled anyway.
  (void)!::write(wake_fd_, &one, sizeof(one));
}

absl::Status UringFutexPort::Watch(const std::atomic<uint32_t>* word,
                                   uint64_t cookie) {
  TETHER_LOOP_CHECK(word != nullptr, "Watch of a null word");
  TETHER_LOOP_CHECK(reinterpret_cast<uintptr_t>(word) % 4 == 0,
                    "a futex word must be 4-byte aligned");
  CheckThread(/*bind=*/false);
  int index = -1;
  if (absl::Status s = AddSlot(internal::WatchSlot::Kind::kWord, cookie,
                               &index);
      !s.ok()) {
    return s;
  }
  slots_[index].word = word;
  slots_[index].observed = word->load(std::memory_order_seq_cst);
  return absl::OkStatus();
}

absl::Status UringFutexPort::WatchFd(int fd, uint64_t cookie) {
  TETHER_LOOP_CHECK(fd >= 0, "WatchFd of a negative fd");
  CheckThread(/*bind=*/false);
  int index = -1;
  if (absl::Status s = AddSlot(internal::WatchSlot::Kind::kFd, cookie, &index);
      !s.ok()) {
    return s;
  }
  slots_[index].fd = fd;
  return absl::OkStatus();
}

void UringFutexPort::Unwatch(uint64_t cookie) {
  CheckThread(/*bind=*/false);
  const int index = SlotOf(cookie);
  internal::WatchSlot& s = slots_[index];
  if (s.armed) {
    // Cancel the in-flight request; its -ECANCELED completion carries the
    // old generation and is ignored. A queued futex wait holds the kernel's
    // key for the word, not the mapping, so unmapping after this is safe.
    const Op op = s.kind == internal::WatchSlot::Kind::kWord ? Op::kFutexWait
                                                               : Op::kPoll;
    io_uring_sqe* sqe = Sqe();
    io_uring_prep_cancel64(sqe, UserData(op, index, s.generation), 0);
    io_uring_sqe_set_data64(sqe, UserData(Op::kCancel, index, s.generation));
    const int rc = io_uring_submit(&ring_);
    TETHER_LOOP_CHECK(rc >= 0, "submitting a cancel to the loop's ring");
  }
  FreeSlot(index);
}

void UringFutexPort::Bind() {
  CheckThread(/*bind=*/true);
  const int rc =
      io_uring_register(ring_.ring_fd, IORING_REGISTER_ENABLE_RINGS, nullptr, 0);
  TETHER_LOOP_CHECK(rc == 0, "enabling the loop's io_uring ring");
  ring_fd_registered_ = io_uring_register_ring_fd(&ring_) == 1;
}

TETHER_HOT_PATH io_uring_sqe* UringFutexPort::Sqe() {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  TETHER_LOOP_CHECK(sqe != nullptr, "the loop's submission queue is full");
  return sqe;
}

TETHER_HOT_PATH void UringFutexPort::ArmAll(bool in_ring) {
  for (size_t i = 0; i < live_end(); ++i) {
    internal::WatchSlot& s = slots_[i];
    if (s.armed) continue;
    const uint32_t slot = static_cast<uint32_t>(i);
    if (s.kind == internal::WatchSlot::Kind::kWord) {
      io_uring_sqe* sqe = Sqe();
      PrepFutexWait(sqe, s.word, s.observed);
      io_uring_sqe_set_data64(sqe, UserData(Op::kFutexWait, slot, s.generation));
      s.armed = true;
    } else if (s.kind == internal::WatchSlot::Kind::kFd && !hard_) {
      io_uring_sqe* sqe = Sqe();
      io_uring_prep_poll_add(sqe, s.fd, POLLIN);
      io_uring_sqe_set_data64(sqe, UserData(Op::kPoll, slot, s.generation));
      s.armed = true;
    }
  }
  if (ring_check_ && !check_armed_) {
    io_uring_sqe* sqe = Sqe();
    io_uring_prep_timeout(sqe, &check_period_, 0,
                          kTetherIoringTimeoutMultishot);
    io_uring_sqe_set_data64(sqe, UserData(Op::kCheck, 0, 0));
    check_armed_ = true;
  }
  // The hard-timer ring's ppoll sleeps poll the eventfd itself: the read is
  // armed there only for a sleep in the ring (see the header).
  if (!wake_read_armed_ && in_ring) {
    io_uring_sqe* sqe = Sqe();
    io_uring_prep_read(sqe, wake_fd_, &wake_buffer_, sizeof(wake_buffer_),
                       static_cast<uint64_t>(-1));
    io_uring_sqe_set_data64(sqe, UserData(Op::kWakeRead, 0, 0));
    wake_read_armed_ = true;
  }
}

TETHER_HOT_PATH bool UringFutexPort::Block(
    std::optional<MonotonicTime> deadline, bool in_ring) {
  if (!in_ring) return BlockHard(deadline);
  // On the hard-timer ring, this wait's completions signal cq_event_fd_:
  // its next ppoll sleep drains that first.
  cq_event_stale_ = hard_;
  if (!deadline.has_value()) {
    const int rc = io_uring_submit_and_wait(&ring_, 1);
    TETHER_LOOP_CHECK(rc >= 0 || rc == -EINTR, "io_uring_enter (wait)");
    return true;
  }
  const timespec left = internal::TimeoutUntil(*deadline);
  __kernel_timespec ts = {.tv_sec = left.tv_sec, .tv_nsec = left.tv_nsec};
  io_uring_cqe* cqe = nullptr;
  const int rc = io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &ts, nullptr);
  TETHER_LOOP_CHECK(rc >= 0 || rc == -ETIME || rc == -EINTR,
                    "io_uring_enter (wait with timeout)");
  if (rc == -ETIME) return false;
  // An enter that submitted entries returns their count even when its
  // wait then timed out: with nothing completed, the clock says which.
  return io_uring_cq_ready(&ring_) != 0 || MonotonicNow() < *deadline;
}

bool UringFutexPort::BlockHard(std::optional<MonotonicTime> deadline) {
  uint64_t count = 0;
  if (cq_event_stale_) {
    // Signals of completions already reaped in the ring: without this read
    // the ppoll below would return at once. Anything completing after it
    // signals again.
    (void)!::read(cq_event_fd_, &count, sizeof(count));
    cq_event_stale_ = false;
  }
  // Submit the re-arms and run pending task work; a futex completion queued
  // after this signals cq_event_fd_.
  int rc = io_uring_submit_and_get_events(&ring_);
  TETHER_LOOP_CHECK(rc >= 0 || rc == -EINTR, "io_uring_enter (submit)");
  if (io_uring_cq_ready(&ring_) != 0) return true;
  pollfds_.clear();
  pollfd_slots_.clear();
  pollfds_.push_back(pollfd{cq_event_fd_, POLLIN, 0});
  pollfd_slots_.push_back(-1);
  // While a ring sleep's read is still armed on the Wake() eventfd, its
  // completion ends this sleep (through cq_event_fd_): polling the eventfd
  // too would end it twice, the second time spuriously. (-1: ignored.)
  pollfds_.push_back(pollfd{wake_read_armed_ ? -1 : wake_fd_, POLLIN, 0});
  pollfd_slots_.push_back(-1);
  for (size_t i = 0; i < live_end(); ++i) {
    if (slots_[i].kind == internal::WatchSlot::Kind::kFd) {
      pollfds_.push_back(pollfd{slots_[i].fd, POLLIN, 0});
      pollfd_slots_.push_back(static_cast<int>(i));
    }
  }
  timespec left;
  if (deadline.has_value()) left = internal::TimeoutUntil(*deadline);
  const int n = ::ppoll(pollfds_.data(), pollfds_.size(),
                        deadline.has_value() ? &left : nullptr, nullptr);
  TETHER_LOOP_CHECK(n >= 0 || errno == EINTR, "ppoll in the wake port");
  if (n > 0 && (pollfds_[0].revents & POLLIN) != 0) {
    (void)!::read(cq_event_fd_, &count, sizeof(count));  // reset
  }
  if (n > 0 && (pollfds_[1].revents & POLLIN) != 0) {
    (void)!::read(wake_fd_, &count, sizeof(count));  // reset
  }
  for (size_t i = 2; n > 0 && i < pollfds_.size(); ++i) {
    if ((pollfds_[i].revents & (POLLIN | POLLERR | POLLHUP)) != 0) {
      const int slot = pollfd_slots_[i];
      ready_.push_back(Ready{slot, slots_[slot].generation});
    }
  }
  rc = io_uring_get_events(&ring_);
  TETHER_LOOP_CHECK(rc >= 0 || rc == -EINTR, "io_uring_enter (get events)");
  return n != 0 || io_uring_cq_ready(&ring_) != 0;
}

[[gnu::cold]] void UringFutexPort::CheckRefused(int res) {
  // Multishot timeouts came with Linux 6.4, io_uring futex waits with 6.7:
  // not expected. Each sleep's timeout carries the check from now on.
  ring_check_ = false;
  std::fprintf(stderr,
               "tether: the loop's io_uring refused its lost-wake check "
               "timeout (%s): each sleep is bounded by the check instead\n",
               std::strerror(-res));
}

TETHER_HOT_PATH void UringFutexPort::Reap() {
  unsigned head;
  unsigned seen = 0;
  io_uring_cqe* cqe;
  io_uring_for_each_cqe(&ring_, head, cqe) {
    ++seen;
    const uint64_t data = io_uring_cqe_get_data64(cqe);
    const Op op = static_cast<Op>(data >> kOpShift);
    if (op == Op::kWakeRead) {
      wake_read_armed_ = false;
      continue;
    }
    if (op == Op::kCheck) {
      // -ETIME each period. Without F_MORE it ended: the next sleep re-arms
      // it, unless the kernel refused it (then never again).
      if (cqe->res != -ETIME && cqe->res != -ECANCELED) {
        CheckRefused(cqe->res);
      } else if ((cqe->flags & IORING_CQE_F_MORE) == 0) {
        check_armed_ = false;
      }
      check_due_ |= cqe->res == -ETIME;
      continue;
    }
    if (op != Op::kFutexWait && op != Op::kPoll) continue;  // cancels
    const uint32_t slot = static_cast<uint32_t>((data >> kSlotShift) & kSlotMask);
    const uint32_t generation = static_cast<uint32_t>(data);
    if (slot >= slots_.size()) continue;
    internal::WatchSlot& s = slots_[slot];
    if (s.generation != generation || s.kind == internal::WatchSlot::Kind::kFree) {
      continue;  // a completion of an unwatched request
    }
    // A persistent (multishot) request stays armed while F_MORE is set.
    if ((cqe->flags & IORING_CQE_F_MORE) == 0) s.armed = false;
    const int res = cqe->res;
    if (op == Op::kFutexWait) {
      // 0 woken, -EAGAIN changed before arming, -ECANCELED ring teardown,
      // -EFAULT the word's file was truncated (reported ready once: the
      // owner's read finds the damage; WakePort::Watch()).
      TETHER_LOOP_CHECK(res == 0 || res == -EAGAIN || res == -ECANCELED ||
                            res == -EINTR || (res == -EFAULT && !s.faulted),
                        "futex wait failed (was the word unmapped before "
                        "Unwatch?)");
      if (res == -ECANCELED) continue;
      s.faulted = res == -EFAULT;
    } else {
      TETHER_LOOP_CHECK(res >= 0 || res == -ECANCELED,
                        "poll on a watched fd failed (was it closed before "
                        "Unwatch?)");
      if (res == -ECANCELED) continue;
    }
    ready_.push_back(Ready{static_cast<int>(slot), generation});
  }
  io_uring_cq_advance(&ring_, seen);
}

TETHER_HOT_PATH WaitResult
UringFutexPort::Wait(std::optional<MonotonicTime> deadline, SleepHooks& hooks,
                     absl::FunctionRef<void(uint64_t)> on_ready) {
  if (!bound()) Bind();
  CheckThread(/*bind=*/false);
  WaitResult result;
  const bool may_block =
      !deadline.has_value() || *deadline > MonotonicNow();

  if (may_block && Spin(on_ready, &result)) return result;

  ready_.clear();
  bool is_check = false;
  const std::optional<MonotonicTime> until =
      ring_check_ ? deadline
                  : std::optional<MonotonicTime>(
                        BoundByCheck(deadline, &is_check));
  // The hard-timer ring sleeps in the ring too when no deadline of the
  // caller's needs its hard timer and no fd needs ppoll.
  const bool in_ring = !hard_ || (!deadline.has_value() && fd_count() == 0);
  const bool blocked = SleepProtocol(hooks, &result, [&] {
    ArmAll(in_ring);
    if (!Block(until, in_ring)) result.timed_out = true;
  });
  if (blocked) Reap();
  if (result.timed_out && is_check) {
    result.timed_out = false;
    CheckCame(&result);
  }
  result.checked |= check_due_;
  check_due_ = false;
  ReportReady(deadline, on_ready, &result);
  return result;
}

}  // namespace tether::loop
