// Cross-process wake latency: a publisher process sends, a subscriber
// process asleep in its wake port wakes up and reads the message. Latency is
// CLOCK_MONOTONIC at the read minus the send time stamped at commit (the
// message context), one way, with a random gap between sends so that the
// subscriber is asleep each time. Mechanisms, in the same run:
//
//   busy_spin             subscriber spins on a shared word: the floor of
//                         any handoff (no sleep at all)
//   raw_futex             FUTEX_WAIT / FUTEX_WAKE on a shared word: the floor
//                         of a blocking wake
//   tether uring_futex    shm::Publisher::Send -> UringFutexPort (default)
//   tether futex_waitv   the fallback backend (helper thread + eventfd)
//   tether uring_futex+spin  the default backend spinning up to --spin_us
//
// each with both processes pinned to one CPU (same_cpu: the cost of each
// path itself) and to two CPUs (cross_cpu: dominated by waking an idle vCPU
// on a VM). Modes are interleaved in --rounds rounds so that drift hits all
// alike. Compare as ratios within one run.
//
//   bazel run -c opt //benchmarks:wake_latency_benchmark -- [--samples=20000]
//       [--rounds=4] [--min_gap_us=50] [--max_gap_us=200] [--spin_us=100]
//       [--fifo=0] [--json]
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "loop/clock.h"
#include "loop/kernel_probe.h"
#include "loop/make_wake_port.h"
#include "loop/realtime.h"
#include "loop/wake_port.h"
#include "shm/channel.h"
#include "shm/futex.h"
#include "shm/publisher.h"
#include "shm/reader.h"
#include "tests/loop/loop_test_util.h"

namespace tether::loop {
namespace {

// --- options -------------------------------------------------------------------

struct Options {
  int samples = 20000;  // per mechanism and placement, over all rounds
  int rounds = 4;
  int warmup = 200;     // per round, discarded
  int min_gap_us = 50;
  int max_gap_us = 200;
  int spin_us = 100;
  int fifo = 0;         // SCHED_FIFO priority for both processes; 0 = off
  bool json = false;
};

bool ParseInt(const char* arg, const char* name, int* out) {
  const size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0 || arg[n] != '=') return false;
  *out = std::atoi(arg + n + 1);
  return true;
}

Options ParseOptions(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (ParseInt(a, "--samples", &o.samples) ||
        ParseInt(a, "--rounds", &o.rounds) ||
        ParseInt(a, "--warmup", &o.warmup) ||
        ParseInt(a, "--min_gap_us", &o.min_gap_us) ||
        ParseInt(a, "--max_gap_us", &o.max_gap_us) ||
        ParseInt(a, "--spin_us", &o.spin_us) ||
        ParseInt(a, "--fifo", &o.fifo)) {
      continue;
    }
    if (std::strcmp(a, "--json") == 0) {
      o.json = true;
      continue;
    }
    if (std::strcmp(a, "--help") == 0 || std::strcmp(a, "-h") == 0) {
      std::printf(
          "usage: wake_latency_benchmark [--samples=20000] [--rounds=4]\n"
          "    [--warmup=N] [--min_gap_us=50] [--max_gap_us=200]\n"
          "    [--spin_us=100] [--fifo=PRIORITY] [--json]\n\n"
          "Cross-process wake latency (publisher send -> subscriber wakes and\n"
          "reads) for busy spin, raw futex, and each tether wake backend, with\n"
          "both processes on one CPU and on two. Prints p50/p90/p99/p99.9/max\n"
          "and ratios to the raw futex floor measured in the same run.\n");
      std::exit(0);
    }
    std::fprintf(stderr, "unknown argument %s (try --help)\n", a);
    std::exit(2);
  }
  o.rounds = std::max(1, o.rounds);
  o.samples = std::max(o.rounds, o.samples);
  o.max_gap_us = std::max(o.min_gap_us, o.max_gap_us);
  return o;
}

// --- mechanisms ------------------------------------------------------------------

enum class Mechanism {
  kBusySpin,
  kRawFutex,
  kTetherUringFutex,
  kTetherFutexWaitv,
  kTetherUringFutexSpin,
};
constexpr Mechanism kMechanisms[] = {
    Mechanism::kBusySpin, Mechanism::kRawFutex, Mechanism::kTetherUringFutex,
    Mechanism::kTetherFutexWaitv, Mechanism::kTetherUringFutexSpin};

const char* Name(Mechanism m) {
  switch (m) {
    case Mechanism::kBusySpin:
      return "busy_spin";
    case Mechanism::kRawFutex:
      return "raw_futex";
    case Mechanism::kTetherUringFutex:
      return "tether uring_futex";
    case Mechanism::kTetherFutexWaitv:
      return "tether futex_waitv";
    case Mechanism::kTetherUringFutexSpin:
      return "tether uring_futex+spin";
  }
  return "?";
}

bool IsTether(Mechanism m) {
  return m == Mechanism::kTetherUringFutex ||
         m == Mechanism::kTetherFutexWaitv ||
         m == Mechanism::kTetherUringFutexSpin;
}

struct Placement {
  const char* name;
  int publisher_cpu;
  int subscriber_cpu;
};

// --- shared state between the two processes --------------------------------------

constexpr int kMaxPerRound = 1 << 20;

struct Board {
  std::atomic<int> ready{0};
  std::atomic<int> failed{0};
  // Raw mechanisms: the word counts messages sent; message i's send time is
  // send_ns[i] (written before the word is bumped), so a subscriber that
  // falls behind still accounts for every message, as a tether reader does.
  alignas(64) std::atomic<uint32_t> word{0};
  alignas(64) std::atomic<int> stop{0};
  alignas(64) std::atomic<uint64_t> send_ns[kMaxPerRound];
  // Latency of message i (ns), -1 if it never arrived.
  alignas(64) int64_t latency_ns[kMaxPerRound];
  // tether: the messages the reader was told it missed (overwritten in the
  // ring before it woke: the subscriber was not scheduled for longer than
  // the ring lasts). A message that never arrived and was not counted here
  // would be a lost wake or a silent loss.
  std::atomic<uint64_t> missed{0};
};

struct Message {
  uint64_t sequence;  // ~0: the last message, stop
};
constexpr uint64_t kStop = ~uint64_t{0};

void Pin(int cpu) {
  const int cpus[] = {cpu};
  const absl::Status s = SetThreadAffinity(cpus);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    std::exit(1);
  }
}

void ApplyFifo(int priority) {
  if (priority <= 0) return;
  const absl::Status s = SetThreadScheduling(SchedPolicy::kFifo, priority);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    std::exit(1);
  }
}

inline void CpuRelax() { __builtin_ia32_pause(); }

// --- subscriber processes ------------------------------------------------------------

void Record(Board* board, uint64_t sequence, uint64_t send_ns) {
  const uint64_t now = ToMonotonicNs(MonotonicNow());
  if (sequence < kMaxPerRound) {
    board->latency_ns[sequence] = static_cast<int64_t>(now - send_ns);
  }
}

[[noreturn]] void RawSubscriber(Board* board, bool spin) {
  uint32_t seen = board->word.load(std::memory_order_acquire);
  board->ready.store(1);
  for (;;) {
    const uint32_t v = board->word.load(std::memory_order_acquire);
    // Stop is stored before its bump of the word: seen with it.
    if (board->stop.load(std::memory_order_acquire) != 0) ::_exit(0);
    if (v == seen) {
      if (spin) {
        CpuRelax();
      } else {
        shm::FutexWait(&board->word, seen, nullptr);
      }
      continue;
    }
    for (; seen != v; ++seen) {
      Record(board, seen,
             board->send_ns[seen % kMaxPerRound].load(std::memory_order_relaxed));
    }
  }
}

[[noreturn]] void TetherSubscriber(Board* board,
                                   const shm::ChannelOptions& channel_options,
                                   Mechanism m, const Options& o) {
  auto channel = shm::Channel::Open(channel_options, "wake");
  if (!channel.ok()) ::_exit(3);
  auto reader = shm::Reader::Create(channel->get());
  if (!reader.ok()) ::_exit(4);
  WakePortOptions port_options;
  port_options.backend = m == Mechanism::kTetherFutexWaitv
                             ? WakeBackend::kFutexWaitv
                             : WakeBackend::kUringFutex;
  if (m == Mechanism::kTetherUringFutexSpin) {
    port_options.spin = std::chrono::microseconds(o.spin_us);
  }
  auto port = MakeWakePort(port_options, ProbeKernel());
  if (!port.ok()) {
    std::fprintf(stderr, "%s\n", std::string(port.status().message()).c_str());
    ::_exit(5);
  }
  testing::Subscription sub(channel->get(), reader->get());
  testing::ChannelSleepHooks hooks;
  hooks.Add(&sub);
  if (!(*port)->Watch((*channel)->wake_word(), 1).ok()) ::_exit(6);
  board->ready.store(1);
  for (;;) {
    (void)(*port)->Wait(std::nullopt, hooks, [](uint64_t) {});
    shm::MessageView view;
    while (sub.Next(&view) == shm::ReadStatus::kOk) {
      Message msg;
      std::memcpy(&msg, view.data.data(), sizeof(msg));
      if (msg.sequence == kStop) {
        (*port)->Unwatch(1);
        ::_exit(0);
      }
      if (view.missed != 0) board->missed.fetch_add(view.missed);
      Record(board, msg.sequence, view.monotonic_send_ns);
    }
  }
}

// --- one measurement run ---------------------------------------------------------------

// Runs `count` sends of mechanism `m` at `placement`; appends the latencies
// (ns) that arrived to *out. Returns false on a failure.
bool RunOnce(Mechanism m, const Placement& placement, int count,
             const Options& o, uint32_t seed, std::vector<int64_t>* out) {
  auto* board = static_cast<Board*>(::mmap(nullptr, sizeof(Board),
                                           PROT_READ | PROT_WRITE,
                                           MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (board == MAP_FAILED) return false;
  new (board) Board();
  for (int i = 0; i < count; ++i) board->latency_ns[i] = -1;

  testing::ScopedRoot root;
  std::unique_ptr<shm::Channel> channel;
  std::unique_ptr<shm::Publisher> publisher;
  if (IsTether(m)) {
    const shm::QueueParams params{.slot_size = 64, .queue_depth = 64,
                                  .max_publishers = 1, .max_pinned = 1};
    auto c = shm::Channel::OpenOrCreate(root.options(), "wake", params);
    if (!c.ok()) return false;
    channel = std::move(*c);
  }

  const pid_t child = ::fork();
  if (child < 0) return false;
  if (child == 0) {
    Pin(placement.subscriber_cpu);
    ApplyFifo(o.fifo);
    (void)SetTimerSlack(std::chrono::nanoseconds(1));
    if (IsTether(m)) TetherSubscriber(board, root.options(), m, o);
    RawSubscriber(board, m == Mechanism::kBusySpin);
  }
  Pin(placement.publisher_cpu);
  ApplyFifo(o.fifo);
  (void)SetTimerSlack(std::chrono::nanoseconds(1));
  if (IsTether(m)) {
    auto p = shm::Publisher::Create(channel.get());
    if (!p.ok()) return false;
    publisher = std::move(*p);
  }
  while (board->ready.load() == 0) ::usleep(100);
  ::usleep(1000);  // let the subscriber reach its first sleep

  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> gap_ns(o.min_gap_us * 1000,
                                            o.max_gap_us * 1000);
  auto send = [&](uint64_t sequence) {
    if (IsTether(m)) {
      Message msg{sequence};
      std::memcpy(publisher->Loan().data(), &msg, sizeof(msg));
      // Send stamps the monotonic send time at commit, then wakes.
      return publisher->Send(sizeof(msg)).status == shm::SendStatus::kOk;
    }
    if (sequence == kStop) {
      board->stop.store(1, std::memory_order_release);
      board->word.fetch_add(1, std::memory_order_release);
      shm::FutexWake(&board->word);
      return true;
    }
    board->send_ns[sequence % kMaxPerRound].store(
        ToMonotonicNs(MonotonicNow()), std::memory_order_relaxed);
    board->word.fetch_add(1, std::memory_order_release);  // publishes send_ns
    if (m == Mechanism::kRawFutex) shm::FutexWake(&board->word);
    return true;
  };
  bool ok = true;
  for (int i = 0; i < count && ok; ++i) {
    const timespec gap = {0, gap_ns(rng)};
    ::clock_nanosleep(CLOCK_MONOTONIC, 0, &gap, nullptr);
    ok = send(static_cast<uint64_t>(i));
  }
  ::usleep(5000);
  ok = send(kStop) && ok;
  int status = 0;
  // The subscriber exits on the stop message; do not wait forever.
  for (int i = 0; i < 2000 && ::waitpid(child, &status, WNOHANG) == 0; ++i) {
    ::usleep(1000);
  }
  if (::waitpid(child, &status, WNOHANG) == 0) {
    ::kill(child, SIGKILL);
    ::waitpid(child, &status, 0);
    ok = false;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ok = false;
  int lost = 0;
  for (int i = o.warmup; i < count; ++i) {
    if (board->latency_ns[i] < 0) {
      ++lost;
    } else {
      out->push_back(board->latency_ns[i]);
    }
  }
  int lost_before_warmup_end = 0;
  for (int i = 0; i < o.warmup && i < count; ++i) {
    if (board->latency_ns[i] < 0) ++lost_before_warmup_end;
  }
  const uint64_t missed = board->missed.load();
  if (lost > 0 &&
      static_cast<uint64_t>(lost + lost_before_warmup_end) == missed) {
    // Overwritten before the reader woke, and the reader was told: the
    // machine did not schedule the subscriber for longer than the ring
    // (depth 64) lasts. Reported, not a failure of the wake path.
    std::fprintf(stderr,
                 "%s %s: %d messages overwritten before the reader ran "
                 "(counted by the reader as missed: the subscriber was not "
                 "scheduled for longer than 64 sends take)\n",
                 Name(m), placement.name, lost);
  } else if (lost > 0) {
    std::fprintf(stderr,
                 "%s %s: %d messages never arrived, %llu counted as missed\n",
                 Name(m), placement.name, lost,
                 static_cast<unsigned long long>(missed));
    ok = false;
  }
  ::munmap(board, sizeof(Board));
  return ok;
}

// A SCHED_FIFO busy-spinner never lets a same-priority publisher on its CPU
// run (only RT throttling does): no measurement, a livelock.
bool Skipped(const Options& o, const Placement& p, Mechanism m) {
  return o.fifo > 0 && m == Mechanism::kBusySpin && p.publisher_cpu == p.subscriber_cpu;
}

// --- statistics and output ----------------------------------------------------------------

struct Stats {
  size_t n = 0;
  double p50 = 0, p90 = 0, p99 = 0, p999 = 0, max = 0, mean = 0;
};

Stats Summarize(std::vector<int64_t> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    const size_t i = std::min(v.size() - 1,
                              static_cast<size_t>(std::ceil(q * v.size())) - 1);
    return v[i] / 1000.0;
  };
  s.n = v.size();
  s.p50 = at(0.50);
  s.p90 = at(0.90);
  s.p99 = at(0.99);
  s.p999 = at(0.999);
  s.max = v.back() / 1000.0;
  double sum = 0;
  for (int64_t x : v) sum += x;
  s.mean = sum / v.size() / 1000.0;
  return s;
}

struct Row {
  const Placement* placement;
  Mechanism mechanism;
  Stats stats;
  bool ok;
};

int Main(int argc, char** argv) {
  const Options o = ParseOptions(argc, argv);
  const KernelFeatures features = ProbeKernel();
  const auto default_choice = ChooseWakeBackend(features);
  const std::string default_backend =
      default_choice.ok() ? std::string(WakeBackendName(default_choice->backend))
                          : std::string("none");

  const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  std::vector<Placement> placements = {{"same_cpu", 0, 0}};
  if (cpus >= 2) placements.push_back({"cross_cpu", 0, 1});

  std::vector<Mechanism> mechanisms;
  for (Mechanism m : kMechanisms) {
    if (m == Mechanism::kTetherFutexWaitv && !features.futex_waitv_syscall) {
      continue;
    }
    if ((m == Mechanism::kTetherUringFutex ||
         m == Mechanism::kTetherUringFutexSpin) &&
        !features.op_futex_wait) {
      continue;
    }
    mechanisms.push_back(m);
  }

  std::vector<std::vector<std::vector<int64_t>>> samples(
      placements.size(),
      std::vector<std::vector<int64_t>>(mechanisms.size()));
  std::vector<std::vector<bool>> ok(placements.size(),
                                    std::vector<bool>(mechanisms.size(), true));
  const int per_round = o.samples / o.rounds + o.warmup;
  if (per_round > kMaxPerRound) {
    std::fprintf(stderr, "too many samples per round\n");
    return 2;
  }
  uint32_t seed = 12345;
  for (int round = 0; round < o.rounds; ++round) {
    for (size_t p = 0; p < placements.size(); ++p) {
      for (size_t m = 0; m < mechanisms.size(); ++m) {
        if (Skipped(o, placements[p], mechanisms[m])) {
          ok[p][m] = false;
          continue;
        }
        if (!o.json && ::isatty(STDERR_FILENO)) {
          std::fprintf(stderr, "\rround %d/%d  %-9s %-24s", round + 1,
                       o.rounds, placements[p].name, Name(mechanisms[m]));
        }
        if (!RunOnce(mechanisms[m], placements[p], per_round, o, seed++,
                     &samples[p][m])) {
          ok[p][m] = false;
        }
      }
    }
  }
  if (!o.json && ::isatty(STDERR_FILENO)) {
    std::fprintf(stderr, "\r%60s\r", "");
  }

  std::vector<Row> rows;
  for (size_t p = 0; p < placements.size(); ++p) {
    for (size_t m = 0; m < mechanisms.size(); ++m) {
      rows.push_back(Row{&placements[p], mechanisms[m],
                         Summarize(samples[p][m]), ok[p][m]});
    }
  }
  auto find = [&](const Placement* p, Mechanism m) -> const Row* {
    for (const Row& r : rows) {
      if (r.placement == p && r.mechanism == m) return &r;
    }
    return nullptr;
  };

  if (o.json) {
    std::printf("{\n  \"kernel\": \"%s\",\n  \"default_backend\": \"%s\",\n",
                features.kernel_release.c_str(), default_backend.c_str());
    std::printf("  \"samples_per_mechanism\": %d,\n  \"rounds\": %d,\n",
                o.samples, o.rounds);
    std::printf("  \"gap_us\": [%d, %d],\n  \"spin_us\": %d,\n  \"fifo\": %d,\n",
                o.min_gap_us, o.max_gap_us, o.spin_us, o.fifo);
    std::printf("  \"results\": [\n");
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      const Row* raw = find(r.placement, Mechanism::kRawFutex);
      const double ratio50 =
          raw && raw->stats.p50 > 0 ? r.stats.p50 / raw->stats.p50 : 0;
      const double ratio99 =
          raw && raw->stats.p99 > 0 ? r.stats.p99 / raw->stats.p99 : 0;
      std::printf(
          "    {\"placement\": \"%s\", \"mechanism\": \"%s\", \"ok\": %s, "
          "\"n\": %zu, \"p50_us\": %.2f, \"p90_us\": %.2f, \"p99_us\": %.2f, "
          "\"p999_us\": %.2f, \"max_us\": %.2f, \"mean_us\": %.2f, "
          "\"p50_vs_raw_futex\": %.3f, \"p99_vs_raw_futex\": %.3f}%s\n",
          r.placement->name, Name(r.mechanism), r.ok ? "true" : "false",
          r.stats.n, r.stats.p50, r.stats.p90, r.stats.p99, r.stats.p999,
          r.stats.max, r.stats.mean, ratio50, ratio99,
          i + 1 < rows.size() ? "," : "");
    }
    std::printf("  ]\n}\n");
    return 0;
  }

  std::printf(
      "Cross-process wake latency, one way: Publisher::Send (stamped at "
      "commit) -> subscriber wakes and reads.\n"
      "kernel %s, default backend %s, %d samples per row in %d rounds, "
      "random gap %d-%d us, spin %d us, %s\n\n",
      features.kernel_release.c_str(), default_backend.c_str(), o.samples,
      o.rounds, o.min_gap_us, o.max_gap_us, o.spin_us,
      o.fifo > 0 ? ("SCHED_FIFO " + std::to_string(o.fifo)).c_str()
                 : "SCHED_OTHER");
  std::printf("%-9s  %-24s %8s %8s %8s %8s %8s   %s\n", "placement",
              "mechanism", "p50 us", "p90 us", "p99 us", "p99.9 us", "max us",
              "p50 / p99 vs raw_futex");
  for (const Row& r : rows) {
    const Row* raw = find(r.placement, Mechanism::kRawFutex);
    std::printf("%-9s  %-24s %8.1f %8.1f %8.1f %8.1f %8.1f", r.placement->name,
                Name(r.mechanism), r.stats.p50, r.stats.p90, r.stats.p99,
                r.stats.p999, r.stats.max);
    if (raw != nullptr && raw->stats.p50 > 0) {
      std::printf("   %.2fx / %.2fx", r.stats.p50 / raw->stats.p50,
                  r.stats.p99 / raw->stats.p99);
    }
    if (Skipped(o, *r.placement, r.mechanism)) {
      std::printf("   (skipped: a FIFO spinner starves its CPU)");
    } else if (!r.ok) {
      std::printf("   (FAILED: see stderr)");
    } else if (r.mechanism == Mechanism::kBusySpin &&
               r.placement->publisher_cpu == r.placement->subscriber_cpu) {
      std::printf("   (spinner shares the CPU)");
    }
    std::printf("\n");
  }
  std::printf("\n");
  for (const Placement& p : placements) {
    const Row* tether = find(&p, Mechanism::kTetherUringFutex);
    const Row* raw = find(&p, Mechanism::kRawFutex);
    if (tether == nullptr || raw == nullptr || raw->stats.p50 <= 0) continue;
    const double ratio = tether->stats.p50 / raw->stats.p50;
    std::printf("target %-9s: tether default p50 / raw futex p50 = %.2f "
                "(target <= 1.20): %s\n",
                p.name, ratio, ratio <= 1.2 ? "met" : "NOT met");
  }
  return 0;
}

}  // namespace
}  // namespace tether::loop

int main(int argc, char** argv) { return tether::loop::Main(argc, argv); }
