#include "benchmarks/rt_contention.h"

#include <liburing.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <utility>

#include "absl/status/status.h"
#include "benchmarks/rt_contention_board.h"
#include "loop/kernel_probe.h"
#include "loop/realtime.h"
#include "loop/rt_probe.h"
#include "loop/uring_event_loop.h"
#include "shm/futex.h"
#include "tests/shm/shm_test_util.h"
#include "tests/transport/framing_test.capnp.h"
#include "transport/channel_set.h"
#include "transport/config.h"
#include "transport/schema_registry.h"

namespace tether::bench {
namespace {

// What the processes of a run share (rt_contention_board.h).
using contention::kMaxRt;
using contention::kChurnSeq;
using contention::kStopSeq;
using contention::kRtKind;
using contention::kChurnKind;
using contention::Mechanism;
using contention::RingSlot;
using contention::Board;
using contention::Ctx;
using contention::Fail;
using contention::BecomeRealtimeOrFail;
using contention::NowNs;
using contention::Relative;
using contention::RecordDelivery;
using contention::OpenRing;
using contention::PublishRing;
using contention::RetractRing;
using contention::ReapRing;
using contention::MsgRingSender;

using loop::Duration;
using loop::MonotonicNow;
using loop::MonotonicTime;
using std::chrono::milliseconds;
using std::chrono::seconds;

struct MechanismInfo {
  Mechanism m;
  const char* key;
  const char* label;
};

constexpr MechanismInfo kMechanisms[] = {
    {Mechanism::kTetherUring, "tether_uring_futex", "tether, uring_futex"},
    {Mechanism::kTetherWaitv, "tether_futex_waitv", "tether, futex_waitv"},
    {Mechanism::kRawFutex, "raw_futex", "raw futex, one word (floor)"},
    {Mechanism::kRawSplit, "raw_futex_split",
     "raw futex, RT readers on their own word, woken first (experiment)"},
    {Mechanism::kRawRtWakes, "raw_futex_rt_wakes",
     "raw futex, RT readers' word woken only by RT publishers (experiment)"},
    {Mechanism::kMsgRing, "msg_ring",
     "IORING_OP_MSG_RING to each reader's ring, RT first (experiment)"},
};

bool IsTether(Mechanism m) {
  return m == Mechanism::kTetherUring || m == Mechanism::kTetherWaitv;
}

// --- the real-time reader ---------------------------------------------------------

// The loop of a tether mechanism's process (its backend, the options'
// deadline mode); fails the run if it cannot be made.
std::unique_ptr<loop::UringEventLoop> MakeTetherLoop(const Ctx& c,
                                                     const char* name) {
  loop::UringEventLoopOptions options;
  options.port.backend = c.m == Mechanism::kTetherUring
                             ? loop::WakeBackend::kUringFutex
                             : loop::WakeBackend::kFutexWaitv;
  options.check_allocations = false;
  options.port.deadline_timer = c.o->deadline_timer;
  auto loop = loop::UringEventLoop::Create(name, c.set, options);
  if (!loop.ok()) Fail(c.board, "%s", std::string(loop.status().message()).c_str());
  return std::move(*loop);
}

[[noreturn]] void RtSubscriber(Ctx& c) {
  Board* b = c.board;
  BecomeRealtimeOrFail(b, c.o->rt_subscriber_cpu, c.o->rt_priority,
                       "real-time subscriber");
  if (IsTether(c.m)) {
    std::unique_ptr<loop::UringEventLoop> loop = MakeTetherLoop(c, "rt-subscriber");
    loop::UringEventLoop* l = loop.get();
    std::snprintf(b->note, sizeof(b->note), "%s",
                  l->backend_description().c_str());
    const absl::StatusOr<loop::WatcherHandle*> s = l->MakeWatcher<Scalars>(
        "/rt", [&](Scalars::Reader m, const loop::MessageContext& ctx) {
          const int64_t seq = m.getI64();
          if (seq == kStopSeq) {
            l->Exit();
          } else if (seq >= 0) {
            RecordDelivery(b, seq,
                           ctx.monotonic_receive_ns - ctx.monotonic_send_ns);
          }
        });
    if (!s.ok()) Fail(b, "%s", std::string(s.status().message()).c_str());
    l->OnRun([b] { b->rt_ready.store(1); });
    l->AddTimer([l] { l->Exit(); })
        ->Schedule(l->monotonic_now() + c.o->duration + seconds(20));  // safety
    l->Run();
    loop.reset();
    ::_exit(0);
  }
  if (c.m == Mechanism::kMsgRing) {
    io_uring ring;
    if (OpenRing(&ring) < 0) Fail(b, "io_uring_setup for the reader ring");
    if (PublishRing(b, 0, ring.ring_fd) != 0) Fail(b, "ring slot 0 taken");
    b->rt_ready.store(1);
    while (b->stop_rt.load() == 0) {
      __kernel_timespec ts = {0, 10'000'000};
      io_uring_cqe* cqe = nullptr;
      (void)io_uring_submit_and_wait_timeout(&ring, &cqe, 1, &ts, nullptr);
      ReapRing(b, &ring, /*rt_reader=*/true);
    }
    RetractRing(b, 0);
    ::_exit(0);
  }
  // Raw futex: the real-time word is `word` in both raw mechanisms.
  int64_t seen = 0;
  b->rt_ready.store(1);
  for (;;) {
    const uint32_t v = b->word.load(std::memory_order_seq_cst);
    const int64_t published = b->rt_published.load(std::memory_order_acquire);
    for (; seen < published && seen < kMaxRt; ++seen) {
      RecordDelivery(b, seen, NowNs() - b->send_ns[seen].load());
    }
    if (b->stop_rt.load() != 0) ::_exit(0);
    shm::FutexWait(&b->word, v, nullptr);
  }
}

// --- publishing ---------------------------------------------------------------------

// A raw publish: real-time message `seq` (or a churn message, seq < 0).
// raw_futex: one word. raw_futex_split: both words, the real-time one
// first. raw_futex_rt_wakes: as split, but a lower-priority publisher only
// bumps the real-time word (its readers see the message at their next
// wake) and never FUTEX_WAKEs it, so no lower-priority task ever dequeues
// a real-time reader's futex wait.
void RawPublish(Board* b, Mechanism m, int64_t seq) {
  if (seq >= 0) {
    b->send_ns[seq].store(NowNs(), std::memory_order_relaxed);
    b->rt_published.store(seq + 1, std::memory_order_release);
  }
  b->word.fetch_add(1, std::memory_order_seq_cst);
  if (m != Mechanism::kRawRtWakes || seq >= 0) shm::FutexWake(&b->word);
  if (m == Mechanism::kRawSplit || m == Mechanism::kRawRtWakes) {
    b->word_lo.fetch_add(1, std::memory_order_seq_cst);
    shm::FutexWake(&b->word_lo);
  }
}

[[noreturn]] void RtPublisher(Ctx& c) {
  Board* b = c.board;
  BecomeRealtimeOrFail(b, c.o->rt_publisher_cpu, c.o->rt_priority,
                       "real-time publisher");
  std::unique_ptr<transport::ChannelHandle> channel;
  std::unique_ptr<transport::Publisher<Scalars>> publisher;
  io_uring ring;
  std::unique_ptr<MsgRingSender> sender;
  if (IsTether(c.m)) {
    auto ch = transport::ChannelHandle::Open(c.channel_options, "/rt");
    if (!ch.ok()) Fail(b, "%s", std::string(ch.status().message()).c_str());
    channel = std::move(*ch);
    auto p = transport::Publisher<Scalars>::Create(channel.get());
    if (!p.ok()) Fail(b, "%s", std::string(p.status().message()).c_str());
    publisher = std::move(*p);
  } else if (c.m == Mechanism::kMsgRing) {
    if (OpenRing(&ring) < 0) Fail(b, "io_uring_setup for the publisher ring");
    sender = std::make_unique<MsgRingSender>(&ring);
  }
  const MonotonicTime start = MonotonicNow();
  const MonotonicTime end = start + c.o->duration / std::max(1, c.o->rounds);
  MonotonicTime next = start + c.o->rt_period;
  for (int64_t seq = 0; next < end && seq < kMaxRt;
       ++seq, next += c.o->rt_period) {
    loop::NanosleepUntil(next);
    int64_t t0 = 0, t1 = 0;
    if (IsTether(c.m)) {
      auto loan = publisher->MakeLoan();
      loan.root().setI64(seq);
      t0 = NowNs();
      const transport::PublishResult r = publisher->Send(std::move(loan));
      t1 = NowNs();
      if (r.status != transport::PublishStatus::kOk) {
        Fail(b, "real-time Send failed: %s", transport::ToString(r.status));
      }
    } else if (c.m == Mechanism::kMsgRing) {
      sender->Refresh(b);
      t0 = NowNs();
      b->send_ns[seq].store(t0, std::memory_order_relaxed);
      sender->Send(kRtKind, static_cast<uint64_t>(seq));
      t1 = NowNs();
      ReapRing(b, &ring, /*rt_reader=*/false);
    } else {
      t0 = NowNs();
      RawPublish(b, c.m, seq);
      t1 = NowNs();
    }
    b->send_cost_ns[seq] = t1 - t0;
    b->rt_sent.store(seq + 1);
  }
  publisher.reset();
  ::_exit(0);
}

// --- the lower-priority churners ------------------------------------------------------

[[noreturn]] void Churner(Ctx& c, int cpu, Duration life) {
  Board* b = c.board;
  BecomeRealtimeOrFail(b, cpu, 0, "churner");  // pinned, SCHED_OTHER
  const MonotonicTime death = MonotonicNow() + life;
  const Duration period = c.o->churn_period;
  if (IsTether(c.m)) {
    std::unique_ptr<loop::UringEventLoop> loop = MakeTetherLoop(c, "churner");
    loop::UringEventLoop* l = loop.get();
    auto sender = l->MakeSender<Scalars>("/rt");
    if (!sender.ok()) Fail(b, "%s", std::string(sender.status().message()).c_str());
    const absl::StatusOr<loop::WatcherHandle*> s = l->MakeWatcher<Scalars>(
        "/rt", [](Scalars::Reader, const loop::MessageContext&) {});
    if (!s.ok()) Fail(b, "%s", std::string(s.status().message()).c_str());
    l->AddTimer([&] {
         if (l->monotonic_now() >= death || b->stop_churn.load() != 0) {
           l->Exit();
           return;
         }
         auto loan = (*sender)->MakeLoan();
         loan.root().setI64(kChurnSeq);
         if ((*sender)->Send(std::move(loan)).status ==
             transport::PublishStatus::kOk) {
           b->churn_sent.fetch_add(1);
         }
       })
        ->Schedule(l->monotonic_now() + period, period);
    l->Run();
    sender->reset();
    loop.reset();
    ::_exit(0);
  }
  io_uring ring;
  std::unique_ptr<MsgRingSender> sender;
  int slot = -1;
  if (c.m == Mechanism::kMsgRing) {
    if (OpenRing(&ring) < 0) Fail(b, "io_uring_setup for a churner ring");
    slot = PublishRing(b, -1, ring.ring_fd);
    sender = std::make_unique<MsgRingSender>(&ring);
  }
  std::atomic<uint32_t>* wait_word =
      c.m == Mechanism::kRawSplit || c.m == Mechanism::kRawRtWakes
          ? &b->word_lo
          : &b->word;
  MonotonicTime next = MonotonicNow() + period;
  for (;;) {
    const MonotonicTime now = MonotonicNow();
    if (now >= death || b->stop_churn.load() != 0) break;
    if (now >= next) {
      if (sender != nullptr) {
        sender->Refresh(b);
        sender->Send(kChurnKind, 0);
      } else {
        RawPublish(b, c.m, kChurnSeq);
      }
      b->churn_sent.fetch_add(1);
      next = now + period;
      continue;
    }
    if (sender != nullptr) {
      const timespec left = Relative(next - now);
      __kernel_timespec ts = {left.tv_sec, left.tv_nsec};
      io_uring_cqe* cqe = nullptr;
      (void)io_uring_submit_and_wait_timeout(&ring, &cqe, 1, &ts, nullptr);
      ReapRing(b, &ring, /*rt_reader=*/false);
    } else {
      const uint32_t v = wait_word->load(std::memory_order_seq_cst);
      const timespec left = Relative(next - now);
      shm::FutexWait(wait_word, v, &left);
    }
  }
  RetractRing(b, slot);
  ::_exit(0);
}

// Waits for `pid` at most `limit`, then kills it (by its pid). Returns true
// if it exited with status 0 by itself.
bool WaitFor(pid_t pid, Duration limit) {
  const MonotonicTime end = MonotonicNow() + limit;
  int status = 0;
  while (MonotonicNow() < end) {
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      return WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
    ::usleep(1000);
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return false;
}

constexpr char kStackTemplate[] = R"({
  "channels": [
    {"name": "/rt", "type": "tests/transport/framing_test.capnp:Scalars",
     "maxSize": 128, "queueDepth": 8192, "maxPublishers": %d, "maxPinned": %d}
  ]
})";

// What one round of one mechanism measured (summed over rounds).
struct Samples {
  ContentionRow row;
  std::vector<int64_t> delivery;
  std::vector<int64_t> send;
};

// One round of one mechanism, start to end; appends to *acc.
absl::Status RunOne(const MechanismInfo& info, const ContentionOptions& o,
                    Samples* acc) {
  ContentionRow& row = acc->row;
  row.key = info.key;
  row.label = info.label;
  const loop::KernelFeatures features = loop::ProbeKernel();
  if (info.m == Mechanism::kTetherUring || info.m == Mechanism::kTetherWaitv) {
    auto choice = loop::ChooseWakeBackend(
        features, info.m == Mechanism::kTetherUring
                      ? loop::WakeBackend::kUringFutex
                      : loop::WakeBackend::kFutexWaitv);
    if (!choice.ok()) {
      row.note = std::string(choice.status().message());
      return absl::OkStatus();
    }
  }
  if (info.m == Mechanism::kMsgRing && !features.io_uring) {
    row.note = "no io_uring";
    return absl::OkStatus();
  }

  void* page = ::mmap(nullptr, sizeof(Board), PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) return absl::ResourceExhaustedError("mmap board");
  Board* b = new (page) Board();
  for (int i = 0; i < kMaxRt; ++i) b->delivery_ns[i] = -1;

  shm::testing::ScopedRoot root;
  transport::SchemaRegistry schemas;
  schemas.Register<Scalars>();
  std::unique_ptr<transport::ChannelSet> set;
  if (IsTether(info.m)) {
    char stack_text[sizeof(kStackTemplate) + 32];
    std::snprintf(stack_text, sizeof(stack_text), kStackTemplate,
                  o.churners + 4, o.churners + 4);
    auto stack = transport::ParseStackConfig(stack_text, "<contention stack>",
                                             schemas.known_types());
    if (!stack.ok()) return stack.status();
    auto s = transport::ChannelSet::Create(root.options(), *stack, schemas);
    if (!s.ok()) return s.status();
    set = std::move(*s);
  }
  Ctx c{b, info.m, &o, set.get(), root.options()};

  const pid_t sub = ::fork();
  if (sub < 0) return absl::InternalError("fork");
  if (sub == 0) RtSubscriber(c);
  const MonotonicTime ready_by = MonotonicNow() + seconds(20);
  while (b->rt_ready.load() == 0 && b->failed.load() == 0 &&
         MonotonicNow() < ready_by) {
    ::usleep(1000);
  }
  std::vector<std::unique_ptr<loop::BurstLoad>> bursts;
  for (int cpu : {o.rt_publisher_cpu, o.rt_subscriber_cpu}) {
    if (o.burst_priority <= 0) break;  // no bursts
    loop::BurstLoadOptions load;
    load.cpu = cpu;
    load.priority = o.burst_priority;
    load.seed = static_cast<uint32_t>(cpu + 17);
    auto burst = loop::BurstLoad::Start(load);
    if (!burst.ok()) {
      ::kill(sub, SIGKILL);
      ::waitpid(sub, nullptr, 0);
      return burst.status();
    }
    bursts.push_back(std::move(*burst));
  }
  ::usleep(20000);
  const pid_t pub = ::fork();
  if (pub < 0) return absl::InternalError("fork");
  if (pub == 0) RtPublisher(c);

  // Keep o.churners lower-priority processes alive until the publisher is
  // done; each lives a random time and is replaced when it ends.
  std::mt19937 rng(7);
  std::uniform_int_distribution<int64_t> life_ns(o.churner_min_life.count(),
                                                 o.churner_max_life.count());
  std::vector<pid_t> churners(static_cast<size_t>(o.churners), -1);
  bool publisher_ok = false;
  for (;;) {
    int status = 0;
    if (::waitpid(pub, &status, WNOHANG) == pub) {
      publisher_ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      break;
    }
    for (size_t i = 0; i < churners.size(); ++i) {
      if (churners[i] > 0 && ::waitpid(churners[i], &status, WNOHANG) == churners[i]) {
        churners[i] = -1;
      }
      if (churners[i] < 0 && b->failed.load() == 0) {
        const Duration life(life_ns(rng));
        const int cpu = i % 2 == 0 ? o.rt_publisher_cpu : o.rt_subscriber_cpu;
        const pid_t child = ::fork();
        if (child == 0) Churner(c, cpu, life);
        churners[i] = child;
        ++row.churners_started;
      }
    }
    // A churner that died without retracting its ring (killed) frees it.
    for (RingSlot& s : b->rings) {
      if (s.state.load() == 2 && ::kill(s.pid.load(), 0) != 0) s.state.store(0);
    }
    ::usleep(1000);
  }
  b->stop_churn.store(1);
  for (pid_t child : churners) {
    if (child > 0) (void)WaitFor(child, seconds(10));
  }
  bursts.clear();
  ::usleep(50000);  // the last deliveries
  if (IsTether(info.m)) {
    auto p = transport::Publisher<Scalars>::Create(set->Find("/rt").value());
    if (p.ok()) {
      auto loan = (*p)->MakeLoan();
      loan.root().setI64(kStopSeq);
      (void)(*p)->Send(std::move(loan));
    }
  } else {
    b->stop_rt.store(1);
    b->word.fetch_add(1);
    shm::FutexWake(&b->word);
  }
  const bool subscriber_ok = WaitFor(sub, seconds(10));

  row.ran = true;
  row.note = b->note;
  const int64_t sent = b->rt_sent.load();
  row.rt_sent += sent;
  row.churn_sent += b->churn_sent.load();
  for (int64_t i = 0; i < sent && i < kMaxRt; ++i) {
    acc->send.push_back(b->send_cost_ns[i]);
    if (b->delivery_ns[i] >= 0) {
      acc->delivery.push_back(b->delivery_ns[i]);
      ++row.rt_delivered;
    } else {
      ++row.lost;
    }
  }
  std::string error = b->failed.load() != 0 ? b->error : "";
  ::munmap(page, sizeof(Board));
  if (!error.empty()) {
    return absl::InternalError(std::string(info.key) + ": " + error);
  }
  if (!publisher_ok || !subscriber_ok) {
    return absl::InternalError(std::string(info.key) +
                               ": the real-time publisher or subscriber did "
                               "not end cleanly");
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<std::pair<std::string, std::string>> ContentionMechanisms() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const MechanismInfo& m : kMechanisms) out.emplace_back(m.key, m.label);
  return out;
}

absl::StatusOr<std::vector<ContentionRow>> RunContention(
    const ContentionOptions& o) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0 ||
      !CPU_ISSET(o.rt_publisher_cpu, &set) ||
      !CPU_ISSET(o.rt_subscriber_cpu, &set) ||
      o.rt_publisher_cpu == o.rt_subscriber_cpu) {
    return absl::FailedPreconditionError(
        "wakes under contention needs two distinct allowed CPUs for the "
        "real-time publisher and subscriber (--pub-cpu, --sub-cpu)");
  }
  if (o.duration / o.rt_period >= kMaxRt) {
    return absl::InvalidArgumentError("duration too long for the sample buffer");
  }
  std::vector<const MechanismInfo*> chosen;
  for (const MechanismInfo& info : kMechanisms) {
    bool wanted = o.mechanisms.empty();
    for (const std::string& k : o.mechanisms) wanted |= k == info.key;
    if (wanted) chosen.push_back(&info);
  }
  // Rounds alternate the mechanisms, so that a noisy stretch of the machine
  // (an emulator's host preempting its virtual CPUs) hits them alike.
  std::vector<Samples> acc(chosen.size());
  const int rounds = std::max(1, o.rounds);
  for (int round = 0; round < rounds; ++round) {
    for (size_t i = 0; i < chosen.size(); ++i) {
      std::fprintf(stderr, "rt_benchmark: contention: round %d/%d: %s...\n",
                   round + 1, rounds, chosen[i]->key);
      if (absl::Status s = RunOne(*chosen[i], o, &acc[i]); !s.ok()) return s;
    }
  }
  std::vector<ContentionRow> rows;
  for (Samples& a : acc) {
    a.row.delivery = Summarize(a.delivery);
    a.row.send = Summarize(a.send);
    rows.push_back(std::move(a.row));
  }
  return rows;
}

}  // namespace tether::bench
