// The channel queue's own costs, without wakeups: send with 0/1/8 registered
// readers, read, and a cross-process send->read round trip with a spinning
// reader, next to a memcpy of the same bytes and a raw shared atomic-flag
// ping-pong (the floor for any cross-process handoff).
//
//   bazel run //benchmarks:shm_queue_benchmark
//
// Compare as ratios within one run: the machines are noisy.
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "shm/channel.h"
#include "shm/publisher.h"
#include "shm/reader.h"

namespace tether::shm {
namespace {

// A private root under /dev/shm, removed at exit.
struct BenchRoot {
  BenchRoot() {
    options.root = "/dev/shm/tether-bench-" + std::to_string(::getpid());
    options.instance = "bench";
  }
  ~BenchRoot() {
    std::string cmd = "rm -rf '" + options.root + "'";
    if (std::system(cmd.c_str()) != 0) std::perror("cleanup");
  }
  ChannelOptions options;
};

BenchRoot& Root() {
  static BenchRoot root;
  return root;
}

std::unique_ptr<Channel> MakeChannel(const std::string& name, uint32_t size,
                                     uint32_t max_pinned) {
  QueueParams p{.slot_size = size, .queue_depth = 64, .max_publishers = 2,
                .max_pinned = max_pinned};
  (void)Channel::Remove(Root().options, name);
  auto c = Channel::OpenOrCreate(Root().options, name, p);
  if (!c.ok()) {
    std::fprintf(stderr, "%s\n", std::string(c.status().message()).c_str());
    std::abort();
  }
  return std::move(*c);
}

void PinToCpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  (void)sched_setaffinity(0, sizeof(set), &set);
}

// memcpy of the message bytes: what any transport pays at least once.
void BM_Memcpy(benchmark::State& state) {
  const size_t n = state.range(0);
  std::vector<char> src(n, 'x'), dst(n);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), n);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * n);
}
BENCHMARK(BM_Memcpy)->Arg(64)->Arg(4096);

// Write the message into the loan and send it, with `readers` registered
// pinning readers (idle, not sleeping: no wake syscall).
void BM_Send(benchmark::State& state) {
  const size_t n = state.range(0);
  const int readers = state.range(1);
  auto channel = MakeChannel("send", 4096, 8);
  auto pub = Publisher::Create(channel.get());
  std::vector<std::unique_ptr<Reader>> rs;
  for (int i = 0; i < readers; ++i) rs.push_back(std::move(*Reader::Create(channel.get())));
  std::vector<char> src(n, 'x');
  for (auto _ : state) {
    auto loan = (*pub)->Loan();
    std::memcpy(loan.data(), src.data(), n);
    if ((*pub)->Send(n).status != SendStatus::kOk) state.SkipWithError("send");
  }
  state.SetBytesProcessed(state.iterations() * n);
}
BENCHMARK(BM_Send)
    ->ArgsProduct({{64, 4096}, {0, 1, 8}})
    ->ArgNames({"bytes", "readers"});

// Read the next message pinned, touch its bytes, release: the reader's cost
// per message (a publisher refills the ring outside the timed region).
void BM_ReadNext(benchmark::State& state) {
  const size_t n = state.range(0);
  auto channel = MakeChannel("read", 4096, 1);
  auto pub = Publisher::Create(channel.get());
  auto reader = Reader::Create(channel.get());
  std::vector<char> dst(n);
  int left = 0;
  for (auto _ : state) {
    if (left == 0) {
      state.PauseTiming();
      for (int i = 0; i < 64; ++i) (void)(*pub)->Send(n);
      left = 64;
      state.ResumeTiming();
    }
    MessageView v;
    if ((*reader)->Next(&v) != ReadStatus::kOk) state.SkipWithError("read");
    std::memcpy(dst.data(), v.data.data(), n);
    benchmark::DoNotOptimize(dst.data());
    --left;
  }
}
BENCHMARK(BM_ReadNext)->Arg(64)->Arg(4096);

// Round trip between two processes on two CPUs through two channels: send
// on "ping", the other process spins reading it and sends on "pong", we spin
// reading "pong". Half of it is the queue's one-way latency without wakeups.
void BM_RoundTripSpinning(benchmark::State& state) {
  const size_t n = state.range(0);
  auto ping = MakeChannel("ping", 4096, 1);
  auto pong = MakeChannel("pong", 4096, 1);
  pid_t child = ::fork();
  if (child == 0) {
    PinToCpu(1);
    auto in = Channel::Open(Root().options, "ping");
    auto out = Channel::Open(Root().options, "pong");
    // From the oldest: the first ping may be sent before we get here.
    auto reader = Reader::Create(
        in->get(), {.pin = true, .start = ReaderOptions::Start::kOldest});
    auto pub = Publisher::Create(out->get());
    MessageView v;
    for (;;) {
      if ((*reader)->Next(&v) != ReadStatus::kOk) continue;
      if (v.data.size() == 0) ::_exit(0);
      std::memcpy((*pub)->Loan().data(), v.data.data(), v.data.size());
      (void)(*pub)->Send(v.data.size());
    }
  }
  PinToCpu(0);
  auto pub = Publisher::Create(ping.get());
  auto reader = Reader::Create(pong.get());
  std::vector<char> src(n, 'x');
  MessageView v;
  for (auto _ : state) {
    std::memcpy((*pub)->Loan().data(), src.data(), n);
    (void)(*pub)->Send(n);
    while ((*reader)->Next(&v) != ReadStatus::kOk) {
    }
  }
  (void)(*pub)->Send(0);  // tell the child to exit
  ::waitpid(child, nullptr, 0);
  state.counters["one_way_ns"] = benchmark::Counter(
      state.iterations() * 2.0,
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_RoundTripSpinning)->Arg(64)->Arg(4096)->UseRealTime();

// The floor: two processes bouncing one shared atomic word, spinning.
void BM_RoundTripAtomicFlag(benchmark::State& state) {
  void* m = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  auto* flag = new (m) std::atomic<uint64_t>(0);
  pid_t child = ::fork();
  if (child == 0) {
    PinToCpu(1);
    uint64_t seen = 0;
    for (;;) {
      uint64_t v = flag->load(std::memory_order_acquire);
      if (v == ~uint64_t{0}) ::_exit(0);
      if (v != seen && (v & 1)) {
        seen = v + 1;
        flag->store(seen, std::memory_order_release);
      }
    }
  }
  PinToCpu(0);
  uint64_t v = 0;
  for (auto _ : state) {
    flag->store(++v, std::memory_order_release);  // odd: ping
    ++v;
    while (flag->load(std::memory_order_acquire) != v) {
    }
  }
  flag->store(~uint64_t{0});
  ::waitpid(child, nullptr, 0);
  ::munmap(m, 4096);
  state.counters["one_way_ns"] = benchmark::Counter(
      state.iterations() * 2.0,
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_RoundTripAtomicFlag)->UseRealTime();

}  // namespace
}  // namespace tether::shm

BENCHMARK_MAIN();
