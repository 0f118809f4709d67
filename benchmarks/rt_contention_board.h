// benchmarks internal: what the processes of one contention run share (the
// Board, mapped before the forks), the mechanisms, and the msg_ring
// experiment's plumbing; rt_contention.cc runs them. Only
// rt_contention*.cc include this.
//
// Threads: every process of a run maps one Board; its atomics are the only
// state two processes touch. Fail() ends the calling process.
#ifndef TETHER_BENCHMARKS_RT_CONTENTION_BOARD_H_
#define TETHER_BENCHMARKS_RT_CONTENTION_BOARD_H_

#include <liburing.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

#include "benchmarks/rt_contention.h"
#include "loop/clock.h"
#include "shm/channel.h"
#include "transport/channel_set.h"

namespace tether::bench::contention {

constexpr int kMaxRt = 1 << 15;
constexpr int kMaxRings = 32;
constexpr int64_t kChurnSeq = -1;
constexpr int64_t kStopSeq = -2;
constexpr uint32_t kRtKind = 1;
constexpr uint32_t kChurnKind = 2;
constexpr uint64_t kSourceTag = ~uint64_t{0};

enum class Mechanism {
  kTetherUring,
  kTetherWaitv,
  kRawFutex,
  kRawSplit,
  kRawRtWakes,
  kMsgRing,
};

// One reader ring that publishers may post to (msg_ring).
struct RingSlot {
  std::atomic<int> state{0};  // 0 free, 1 claimed, 2 live
  std::atomic<uint32_t> generation{0};
  std::atomic<int> pid{0};
  std::atomic<int> fd{-1};
};

// Shared by every process of one run (MAP_SHARED, made before the forks).
struct Board {
  std::atomic<int> rt_ready{0};
  std::atomic<int> stop_rt{0};
  std::atomic<int> stop_churn{0};
  std::atomic<int> failed{0};
  char error[512] = {};
  char note[512] = {};
  alignas(64) std::atomic<uint32_t> word{0};     // raw: everyone (split: RT)
  alignas(64) std::atomic<uint32_t> word_lo{0};  // raw split: the others
  alignas(64) std::atomic<int64_t> rt_published{0};  // raw, msg_ring
  std::atomic<int64_t> rt_sent{0};
  std::atomic<int64_t> churn_sent{0};
  RingSlot rings[kMaxRings];  // slot 0: the real-time reader
  std::atomic<int64_t> send_ns[kMaxRt];
  int64_t delivery_ns[kMaxRt];
  int64_t send_cost_ns[kMaxRt];
};

struct Ctx {
  Board* board;
  Mechanism m;
  const ContentionOptions* o;
  transport::ChannelSet* set;  // tether only
  shm::ChannelOptions channel_options;
};

// Records the error (the first process's wins) and _exit(1)s.
[[noreturn]] void Fail(Board* b, const char* fmt, ...);
// Pins the calling thread to `cpu`, SCHED_FIFO `priority` when > 0; Fail
// naming `who` if not allowed.
void BecomeRealtimeOrFail(Board* b, int cpu, int priority, const char* who);
int64_t NowNs();
// `d` (clamped at zero) as a relative timespec.
timespec Relative(loop::Duration d);
// The real-time message `seq` arrived `latency_ns` after it was sent.
void RecordDelivery(Board* b, int64_t seq, int64_t latency_ns);

// --- msg_ring plumbing (the msg_ring mechanism) ------------------------------

// A ring of the run's flags (SINGLE_ISSUER|DEFER_TASKRUN where the kernel
// has them); io_uring_queue_init's result.
int OpenRing(io_uring* ring);
// Claims `index` (or a free slot when index < 0) for this process's ring;
// the slot, or -1.
int PublishRing(Board* b, int index, int fd);
void RetractRing(Board* b, int index);
// Reaps `ring`: real-time deliveries are recorded; our own failed
// MSG_RINGs (a reader that just went away) are dropped.
void ReapRing(Board* b, io_uring* ring, bool rt_reader);

// Posts one CQE into every live reader ring, slot 0 (real time) first.
class MsgRingSender {
 public:
  explicit MsgRingSender(io_uring* source) : source_(source) {
    for (int i = 0; i < kMaxRings; ++i) fds_[i] = -1;
  }
  ~MsgRingSender() {
    for (int fd : fds_) {
      if (fd >= 0) ::close(fd);
    }
  }
  // Picks up rings that came or went (pidfd_getfd: setup, not the RT path).
  void Refresh(Board* b) {
    for (int i = 0; i < kMaxRings; ++i) {
      RingSlot& s = b->rings[i];
      const bool live = s.state.load(std::memory_order_acquire) == 2;
      const uint32_t gen = s.generation.load(std::memory_order_acquire);
      if (live && fds_[i] >= 0 && gens_[i] == gen) continue;
      if (fds_[i] >= 0) {
        ::close(fds_[i]);
        fds_[i] = -1;
      }
      if (!live) continue;
      const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, s.pid.load(), 0));
      if (pidfd < 0) continue;
      fds_[i] = static_cast<int>(::syscall(SYS_pidfd_getfd, pidfd, s.fd.load(), 0));
      ::close(pidfd);
      gens_[i] = gen;
    }
  }
  void Send(uint32_t kind, uint64_t data) {
    int n = 0;
    for (int i = 0; i < kMaxRings; ++i) {
      if (fds_[i] < 0) continue;
      io_uring_sqe* sqe = io_uring_get_sqe(source_);
      if (sqe == nullptr) break;
      io_uring_prep_msg_ring(sqe, fds_[i], kind, data, 0);
      sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
      io_uring_sqe_set_data64(sqe, kSourceTag);
      ++n;
    }
    if (n > 0) (void)io_uring_submit(source_);
  }

 private:
  io_uring* source_;
  int fds_[kMaxRings];
  uint32_t gens_[kMaxRings] = {};
};

}  // namespace tether::bench::contention

#endif  // TETHER_BENCHMARKS_RT_CONTENTION_BOARD_H_
