// benchmarks internal: the contention run's shared helpers and the
// msg_ring plumbing (rt_contention_board.h).
#include "benchmarks/rt_contention_board.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "loop/realtime.h"

namespace tether::bench::contention {

using loop::Duration;
using loop::MonotonicNow;

[[noreturn]] void Fail(Board* b, const char* fmt, ...) {
  if (b->failed.exchange(1) == 0) {
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(b->error, sizeof(b->error), fmt, args);
    va_end(args);
  }
  ::_exit(1);
}

void BecomeRealtimeOrFail(Board* b, int cpu, int priority, const char* who) {
  const int cpus[] = {cpu};
  absl::Status s = loop::SetThreadAffinity(cpus);
  if (s.ok() && priority > 0) {
    s = loop::SetThreadScheduling(loop::SchedPolicy::kFifo, priority);
  }
  if (!s.ok()) Fail(b, "%s: %s", who, std::string(s.message()).c_str());
}

int64_t NowNs() { return static_cast<int64_t>(loop::ToMonotonicNs(MonotonicNow())); }

timespec Relative(Duration d) {
  if (d < Duration::zero()) d = Duration::zero();
  return timespec{static_cast<time_t>(d.count() / 1'000'000'000),
                  static_cast<long>(d.count() % 1'000'000'000)};
}

void RecordDelivery(Board* b, int64_t seq, int64_t latency_ns) {
  if (seq < 0 || seq >= kMaxRt) return;
  b->delivery_ns[seq] = latency_ns;
}

// --- msg_ring plumbing -------------------------------------------------------------

int OpenRing(io_uring* ring) {
  io_uring_params p;
  std::memset(&p, 0, sizeof(p));
  p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
  int rc = io_uring_queue_init_params(256, ring, &p);
  if (rc == -EINVAL) {
    std::memset(&p, 0, sizeof(p));
    rc = io_uring_queue_init_params(256, ring, &p);
  }
  return rc;
}

// Claims `index` (or a free slot when index < 0) for this process's ring.
int PublishRing(Board* b, int index, int fd) {
  for (int i = index < 0 ? 1 : index; i < kMaxRings; ++i) {
    int expected = 0;
    if (!b->rings[i].state.compare_exchange_strong(expected, 1)) {
      if (index >= 0) return -1;
      continue;
    }
    b->rings[i].pid.store(::getpid());
    b->rings[i].fd.store(fd);
    b->rings[i].generation.fetch_add(1);
    b->rings[i].state.store(2, std::memory_order_release);
    return i;
  }
  return -1;
}

void RetractRing(Board* b, int index) {
  if (index >= 0) b->rings[index].state.store(0, std::memory_order_release);
}

// Reaps `ring`: real-time deliveries are recorded; our own failed MSG_RINGs
// (a reader that just went away) are dropped.
void ReapRing(Board* b, io_uring* ring, bool rt_reader) {
  unsigned head;
  unsigned seen = 0;
  io_uring_cqe* cqe;
  io_uring_for_each_cqe(ring, head, cqe) {
    ++seen;
    if (cqe->user_data == kSourceTag) continue;
    if (rt_reader && static_cast<uint32_t>(cqe->res) == kRtKind) {
      const int64_t seq = static_cast<int64_t>(cqe->user_data);
      if (seq >= 0 && seq < kMaxRt) {
        RecordDelivery(b, seq, NowNs() - b->send_ns[seq].load());
      }
    }
  }
  io_uring_cq_advance(ring, seen);
}

}  // namespace tether::bench::contention
