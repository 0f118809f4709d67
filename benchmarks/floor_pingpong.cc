// The floors every system is compared with, measured by the same protocol
// (benchmarks/harness/protocol.h) in the same run:
//
//   --variant=futex   raw shared-memory ping-pong: the sender writes the
//                     payload into a shared buffer (16 bytes or all of it,
//                     per the case's mode), bumps a 32-bit word and calls
//                     FUTEX_WAKE; the receiver sleeps in FUTEX_WAIT. In
//                     "full" mode this is the raw-shm memcpy ping-pong; in
//                     fanout one word wakes every subscriber (FUTEX_WAKE
//                     all) and each replies on its own word. The floor of a
//                     blocking wake.
//   --variant=uring   the futex floor with the receivers sleeping as tether's
//                     default backend does: a one-shot IORING_OP_FUTEX_WAIT
//                     on the word, armed in the receiver's own ring (the
//                     ring flags tether uses, SINGLE_ISSUER|DEFER_TASKRUN,
//                     where the kernel has them, and a registered ring fd)
//                     and waited for in io_uring_enter, re-armed after each
//                     completion. What the kernel's io_uring wake path costs
//                     by itself, with none of tether's work.
//   --variant=spin    the same with receivers busy-polling the word (no
//                     syscall): the floor of any handoff. Only meaningful
//                     with the two sides on different CPUs.
//   --variant=futex_pages:N
//                     the futex floor where each side, after every wake,
//                     reads one byte from each of N pages of its own
//                     memory lying 2 MiB apart (no two share a page-table
//                     page): what each distinct page a process touches
//                     after a wake costs. Where the guest hides PCID, every
//                     switch between the two processes on one CPU flushes
//                     the TLB, and each such page costs a page walk.
//   --variant=memcpy  no second process: a round is two memcpys of the
//                     payload (one per direction), so "one-way" is one
//                     memcpy of the payload, from a hot source buffer.
//
// With --shm_root the mailboxes are a file at that path + ".floor" (removed
// at once), so a floor and tether measured with the same root use the same
// kind of memory (4 KiB tmpfs pages, or huge pages on a tmpfs mounted with
// huge=within_size); without it, anonymous shared memory.
#include <fcntl.h>
#include <liburing.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>

#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmarks/harness/protocol.h"
#include "benchmarks/harness/supervisor.h"
#include "loop/uring_futex.h"
#include "shm/futex.h"

namespace tether::bench {
namespace {

using std::chrono::seconds;

// One direction: a word bumped per message and the payload it announces.
// The payload follows on the next cache line.
struct alignas(64) Mailbox {
  std::atomic<uint32_t> word{0};
  std::byte* data() { return reinterpret_cast<std::byte*>(this + 1); }
};

class Mailboxes {
 public:
  // Shared (inherited by the children): a ping mailbox and one per ponger.
  // With `dir` (the session's --shm_root) the memory is a file there,
  // unlinked at once, so the floor uses the same kind of memory as tether's
  // channels in that folder (e.g. a tmpfs mounted with huge pages);
  // otherwise anonymous shared memory.
  absl::Status Map(int pongs, uint32_t max_payload, const std::string& dir) {
    stride_ = (sizeof(Mailbox) + max_payload + 4095) & ~size_t{4095};
    const size_t bytes = stride_ * (1 + pongs);
    int fd = -1;
    if (!dir.empty()) {
      const std::string path = dir + ".floor";
      fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
      if (fd < 0) {
        return absl::UnavailableError(absl::StrCat(
            "cannot create ", path, ": ", std::strerror(errno)));
      }
      ::unlink(path.c_str());
      if (const int rc = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
          rc != 0) {
        ::close(fd);
        return absl::ResourceExhaustedError(
            absl::StrCat("cannot allocate ", bytes, " bytes of mailboxes at ",
                         path, ": ", std::strerror(rc)));
      }
    }
    void* m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_POPULATE | (fd < 0 ? MAP_ANONYMOUS : 0),
                     fd, 0);
    if (fd >= 0) ::close(fd);
    if (m == MAP_FAILED) {
      return absl::ResourceExhaustedError(
          absl::StrCat("mmap of ", bytes, " shared bytes failed"));
    }
    base_ = static_cast<std::byte*>(m);
    for (int i = 0; i <= pongs; ++i) new (base_ + i * stride_) Mailbox();
    return absl::OkStatus();
  }
  Mailbox* ping() { return reinterpret_cast<Mailbox*>(base_); }
  Mailbox* reply(int i) {
    return reinterpret_cast<Mailbox*>(base_ + (1 + i) * stride_);
  }

 private:
  std::byte* base_ = nullptr;
  size_t stride_ = 0;
};

inline void CpuRelax() { __builtin_ia32_pause(); }

enum class Sleep { kFutex, kSpin, kUring };

// --variant=futex_pages:N: N private pages, 2 MiB apart, each read once
// per Touch(). The mapping is 2 MiB aligned, so each page has a page-table
// page of its own (a walk per page, none shared). Made after the fork
// (each process has its own).
class PageToucher {
 public:
  static constexpr size_t kStride = size_t{2} << 20;
  static constexpr int kMaxPages = 1024;

  explicit PageToucher(int pages) : pages_(pages) {
    if (pages_ == 0) return;
    map_len_ = (pages_ + 1) * kStride;  // room to align
    void* map = ::mmap(nullptr, map_len_, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (map == MAP_FAILED) {
      pages_ = 0;
      return;
    }
    map_ = static_cast<char*>(map);
    (void)::madvise(map_, map_len_, MADV_NOHUGEPAGE);
    base_ = map_ + (kStride - reinterpret_cast<uintptr_t>(map_) % kStride) % kStride;
    for (int i = 0; i < pages_; ++i) base_[At(i)] = 1;  // fault in
  }
  ~PageToucher() {
    if (map_ != nullptr) ::munmap(map_, map_len_);
  }
  PageToucher(const PageToucher&) = delete;
  PageToucher& operator=(const PageToucher&) = delete;

  bool ok(int wanted) const { return pages_ == wanted; }
  void Touch() const {
    unsigned sum = 0;
    for (int i = 0; i < pages_; ++i) {
      sum += static_cast<unsigned char>(
          reinterpret_cast<volatile const char*>(base_)[At(i)]);
    }
    asm volatile("" ::"r"(sum));
  }

 private:
  // A different cache line in each page, so the lines do not all fall in
  // one cache set.
  static size_t At(int i) { return i * kStride + (static_cast<size_t>(i) * 64) % 4096; }

  int pages_;
  char* map_ = nullptr;
  size_t map_len_ = 0;
  char* base_ = nullptr;  // map_ rounded up to kStride
};

// A receiver's io_uring ring for Sleep::kUring (one per process, made after
// the fork: a ring is not shared with a child).
class UringSleeper {
 public:
  ~UringSleeper() {
    if (ready_) io_uring_queue_exit(&ring_);
  }
  // With the ring flags tether's port asks for, in its order
  // (loop::kRingFlagPreference), so the floor sleeps as tether does here.
  absl::Status Init() {
    io_uring_params got{};
    const int rc = loop::QueueInitPreferred(8, &ring_, io_uring_params{},
                                            /*skip=*/0, &got);
    if (rc < 0) {
      return absl::UnavailableError(absl::StrCat(
          "io_uring_setup failed: ", std::strerror(-rc),
          " (io_uring absent, disabled or refused here)"));
    }
    ready_ = true;
    flags_ = got.flags;
    // As tether's ring does: io_uring_enter then skips the fd look-up.
    fd_registered_ = io_uring_register_ring_fd(&ring_) == 1;
    return absl::OkStatus();
  }
  // What the ring got, for the results' info line.
  std::string Describe() const {
    return absl::StrCat("ring flags ", loop::RingFlagNames(flags_),
                        fd_registered_ ? ", registered ring fd"
                                       : ", ring fd not registered");
  }
  // One sleep: arm a futex wait for `word` == `expected` and wait for its
  // completion (at once with -EAGAIN when the word already moved).
  absl::Status Wait(const std::atomic<uint32_t>* word, uint32_t expected) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    loop::PrepFutexWait(sqe, word, expected);
    const int rc = io_uring_submit_and_wait(&ring_, 1);
    if (rc < 0 && rc != -EINTR) {
      return absl::InternalError(
          absl::StrCat("io_uring_enter: ", std::strerror(-rc)));
    }
    io_uring_cqe* cqe = nullptr;
    while (io_uring_peek_cqe(&ring_, &cqe) == 0) {
      const int res = cqe->res;
      io_uring_cqe_seen(&ring_, cqe);
      if (res < 0 && res != -EAGAIN && res != -EINTR) {
        return absl::UnavailableError(absl::StrCat(
            "IORING_OP_FUTEX_WAIT failed: ", std::strerror(-res),
            " (a kernel without io_uring futex ops)"));
      }
    }
    return absl::OkStatus();
  }

 private:
  io_uring ring_{};
  bool ready_ = false;
  unsigned flags_ = 0;
  bool fd_registered_ = false;
};

// Waits until `box->word` differs from *seen; updates *seen.
absl::Status Await(Mailbox* box, uint32_t* seen, Sleep sleep,
                   UringSleeper* ring) {
  for (;;) {
    const uint32_t v = box->word.load(std::memory_order_acquire);
    if (v != *seen) {
      *seen = v;
      return absl::OkStatus();
    }
    switch (sleep) {
      case Sleep::kSpin:
        CpuRelax();
        break;
      case Sleep::kFutex:
        (void)shm::FutexWait(&box->word, v, nullptr);
        break;
      case Sleep::kUring:
        if (absl::Status s = ring->Wait(&box->word, v); !s.ok()) return s;
        break;
    }
  }
}

void Post(Mailbox* box, Sleep sleep) {
  box->word.fetch_add(1, std::memory_order_release);
  if (sleep != Sleep::kSpin) (void)shm::FutexWake(&box->word, INT_MAX);
}

absl::Status Ping(const Session& s, Board* board, Mailboxes* boxes,
                  Sleep sleep, int pages) {
  const PageToucher toucher(pages);
  if (!toucher.ok(pages)) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot map ", pages, " pages"));
  }
  UringSleeper ring;
  if (sleep == Sleep::kUring) {
    if (absl::Status st = ring.Init(); !st.ok()) return st;
    board->SetInfo(absl::StrCat(
        "one-shot IORING_OP_FUTEX_WAIT in the receiver's ring (",
        ring.Describe(), "), FUTEX_WAKE by the sender"));
  }
  PingDriver driver(s, board);
  std::vector<uint32_t> seen(s.pongs);
  for (int i = 0; i < s.pongs; ++i) {
    seen[i] = boxes->reply(i)->word.load(std::memory_order_acquire);
  }
  if (absl::Status st = WaitForPongs(board, s.pongs, std::chrono::seconds(10));
      !st.ok()) {
    return st;
  }
  for (;;) {
    const PingDriver::Outgoing o = driver.Next();
    Mailbox* box = boxes->ping();
    driver.Write(absl::Span<std::byte>(box->data(), o.size), o);
    driver.BeforeSend();
    Post(box, sleep);
    driver.AfterSend();
    if (o.kind == PingDriver::Kind::kTerminate) return absl::OkStatus();
    for (int i = 0; i < s.pongs; ++i) {
      if (absl::Status st = Await(boxes->reply(i), &seen[i], sleep, &ring);
          !st.ok()) {
        return st;
      }
      toucher.Touch();
      (void)driver.Reply(i, ReadHeader(absl::Span<const std::byte>(
                                boxes->reply(i)->data(), sizeof(Header))));
    }
  }
}

absl::Status Pong(const Session& s, Board* board, int index, Mailboxes* boxes,
                  Sleep sleep, int pages) {
  const PageToucher toucher(pages);
  if (!toucher.ok(pages)) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot map ", pages, " pages"));
  }
  UringSleeper ring;
  if (sleep == Sleep::kUring) {
    if (absl::Status st = ring.Init(); !st.ok()) return st;
  }
  PongDriver driver(s, board, index);
  uint32_t seen = boxes->ping()->word.load(std::memory_order_acquire);
  MarkPongReady(board);
  for (;;) {
    if (absl::Status st = Await(boxes->ping(), &seen, sleep, &ring);
        !st.ok()) {
      return st;
    }
    toucher.Touch();
    const PongDriver::Action a = driver.OnMessage(
        absl::Span<const std::byte>(boxes->ping()->data(), sizeof(Header)));
    if (a.kind == PongDriver::Kind::kExit) return absl::OkStatus();
    if (a.kind != PongDriver::Kind::kReply) continue;
    Mailbox* box = boxes->reply(index);
    driver.Write(absl::Span<std::byte>(box->data(), a.size), a);
    Post(box, sleep);
  }
}

// memcpy floor: the pinger alone; a round is two copies of the payload.
absl::Status Memcpy(const Session& s, Board* board) {
  std::vector<std::byte> src(s.max_payload(), std::byte{1});
  std::vector<std::byte> dst(s.max_payload(), std::byte{2});
  for (size_t c = 0; c < s.cases.size(); ++c) {
    const Case& k = s.cases[c];
    CaseResult& r = board->cases[c];
    const Switches before = ProcessSwitches();
    for (int i = 0; i < k.warmup + k.samples; ++i) {
      const uint64_t t0 = NowNs();
      std::memcpy(dst.data(), src.data(), k.payload);
      asm volatile("" ::"r"(dst.data()) : "memory");
      std::memcpy(src.data(), dst.data(), k.payload);
      asm volatile("" ::"r"(src.data()) : "memory");
      const uint64_t t1 = NowNs();
      if (i >= k.warmup) board->rtt(c)[i - k.warmup] = t1 - t0;
    }
    const Switches after = ProcessSwitches();
    r.ping = Switches{after.voluntary - before.voluntary,
                      after.involuntary - before.involuntary};
    r.samples = k.samples;
    r.done.store(1, std::memory_order_release);
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace tether::bench

int main(int argc, char** argv) {
  using namespace tether::bench;
  auto boxes = std::make_unique<Mailboxes>();
  return RunnerMain(argc, argv, "floor", [&](const Session& s) {
    Roles roles;
    std::string variant = s.variant.empty() ? "futex" : s.variant;
    int pages = 0;
    if (variant.rfind("futex_pages:", 0) == 0) {
      const std::string n = variant.substr(12);
      char* end = nullptr;
      const long v = std::strtol(n.c_str(), &end, 10);
      if (n.empty() || *end != '\0' || v < 0 || v > PageToucher::kMaxPages) {
        roles.prepare = [variant] {
          return absl::InvalidArgumentError(absl::StrCat(
              "--variant=", variant, ": futex_pages:N takes N from 0 to ",
              PageToucher::kMaxPages));
        };
        return roles;
      }
      pages = static_cast<int>(v);
      variant = "futex";
    }
    if (variant == "memcpy") {
      roles.ping = [&s](Board* b) { return Memcpy(s, b); };
      roles.pong = [](Board* b, int) {
        MarkPongReady(b);
        return absl::OkStatus();
      };
      return roles;
    }
    if (variant != "futex" && variant != "spin" && variant != "uring") {
      roles.prepare = [variant] {
        return absl::InvalidArgumentError(absl::StrCat(
            "--variant=", variant,
            ": use futex, uring, spin, memcpy or futex_pages:N"));
      };
      return roles;
    }
    const Sleep sleep = variant == "spin"    ? Sleep::kSpin
                        : variant == "uring" ? Sleep::kUring
                                             : Sleep::kFutex;
    roles.prepare = [&s, &boxes] {
      if (s.test == Test::kThroughput) {
        return absl::InvalidArgumentError(
            "the floors measure latency and fanout only");
      }
      return boxes->Map(s.pongs, s.max_payload(), s.shm_root);
    };
    roles.ping = [&s, &boxes, sleep, pages](Board* b) {
      if (sleep != Sleep::kUring) {  // Ping() says what the ring got
        b->SetInfo(sleep == Sleep::kSpin
                       ? std::string("receivers busy-poll a shared word")
                       : absl::StrCat("FUTEX_WAIT / FUTEX_WAKE on a shared word",
                                      pages == 0 ? "" : absl::StrCat(
                                          "; each side reads ", pages,
                                          " pages 2 MiB apart after each wake")));
      }
      return Ping(s, b, boxes.get(), sleep, pages);
    };
    roles.pong = [&s, &boxes, sleep, pages](Board* b, int i) {
      return Pong(s, b, i, boxes.get(), sleep, pages);
    };
    return roles;
  });
}
