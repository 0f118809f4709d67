// The logger and replay, measured (custom harness; figures as ratios within
// one run):
//
//   send       publisher send latency (write 64 B into the loan + Send) at
//              1 kHz with no reader, with the logger recording the channel,
//              and (for reference) with a sleeping reader (an io_uring
//              watcher, which costs the sender a FUTEX_WAKE); modes
//              interleaved over --rounds rounds.
//   throughput the logger recording 4 channels of incompressible 4 KiB
//              messages sent as fast as publishers can, uncompressed and
//              zstd-1, against the disk's own write speed in the same run
//              (dd to the same directory, page cache and fdatasync).
//   replay     real-time replay timing: a log of 5,000 messages at random
//              0.2..2 ms intervals replayed (send times restamped, so the
//              slot holds when the replay really published); error of each
//              replayed interval against the logged one.
//
//   bazel run //benchmarks:log_benchmark -- [--part=all|send|throughput|replay]
//       [--dir=DIR (default /tmp)] [--seconds=3] [--rounds=4] [--samples=4000]
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "log/log_format.h"
#include "log/logger.h"
#include "log/realtime_replay.h"
#include "log/replay_plan.h"
#include "loop/uring_event_loop.h"
#include "tests/log/log_test_util.h"
#include "tests/shm/shm_test_util.h"
#include "transport/channel_set.h"

namespace tether::log {
namespace {

using namespace ::tether::log::testing;

struct Options {
  std::string part = "all";
  std::string dir = "/tmp";
  double seconds = 3;
  int rounds = 4;
  int samples = 4000;  // per send mode, over all rounds
};

int64_t Now() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

void SleepUntil(int64_t t) {
  timespec ts{static_cast<time_t>(t / 1'000'000'000), static_cast<long>(t % 1'000'000'000)};
  while (::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

struct Percentiles {
  double p50, p99, p999, max;
};
Percentiles Summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    return v.empty() ? 0 : v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))];
  };
  return {at(0.5), at(0.99), at(0.999), v.empty() ? 0 : v.back()};
}

// --- send latency -------------------------------------------------------------

void SendPart(const Options& o) {
  shm::testing::ScopedRoot root;
  transport::SchemaRegistry schemas;
  RegisterTestTypes(schemas);
  auto channel = MakeChannel(root.options(), schemas, "/bench/send", kScalarsType,
                             {.max_size = 256, .depth = 1024});
  auto pub = transport::RawPublisher::Create(channel.get());
  std::vector<std::byte> message = ScalarsMessage(1);
  enum Mode { kAlone, kLogger, kSleeper, kModes };
  const char* names[] = {"no reader", "logger recording", "sleeping reader (io_uring watcher)"};
  std::vector<double> ns[kModes];
  const int per_round = std::max(1, o.samples / o.rounds);
  for (int round = 0; round < o.rounds; ++round) {
    for (int mode = 0; mode < kModes; ++mode) {
      std::unique_ptr<Logger> logger;
      std::unique_ptr<transport::ChannelSet> set;
      std::unique_ptr<loop::UringEventLoop> loop;
      std::thread loop_thread;
      std::optional<transport::StackConfig> stack;
      if (mode == kLogger) {
        LoggerOptions lo;
        lo.channels = root.options();
        lo.path = o.dir + "/tether-log-benchmark-send.mcap";
        lo.overwrite = true;
        logger = *Logger::Start(lo);
      } else if (mode == kSleeper) {
        stack = *StackConfigFor({{"/bench/send", DescribeChannel(*channel)}},
                                schemas.known_types());
        set = *transport::ChannelSet::Create(root.options(), *stack, schemas);
        loop = *loop::UringEventLoop::Create("sleeper", set.get());
        (void)loop->MakeRawWatcher("/bench/send", [](const transport::RawMessage&) {});
        loop_thread = std::thread([&] { loop->Run(); });
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      int64_t next = Now();
      for (int i = 0; i < per_round; ++i) {
        next += 1'000'000;  // 1 kHz
        SleepUntil(next);
        const int64_t t0 = Now();
        std::span<std::byte> loan = (*pub)->Loan();
        std::memcpy(loan.data(), message.data(), message.size());
        (void)(*pub)->Send(message.size());
        ns[mode].push_back(static_cast<double>(Now() - t0));
      }
      if (logger != nullptr) {
        (void)logger->Stop();
        if (logger->stats().messages != static_cast<uint64_t>(per_round)) {
          std::printf("  (the logger recorded %llu of %d)\n",
                      static_cast<unsigned long long>(logger->stats().messages),
                      per_round);
        }
      }
      if (loop != nullptr) {
        loop->Exit();
        loop_thread.join();
      }
    }
  }
  std::printf("\nsend: publisher Loan+write 64 B+Send at 1 kHz, %d samples per mode "
              "in %d interleaved rounds (ns)\n",
              per_round * o.rounds, o.rounds);
  std::printf("  %-36s %8s %8s %8s %8s %10s\n", "readers", "p50", "p99", "p99.9",
              "max", "p50 ratio");
  const Percentiles base = Summarize(ns[kAlone]);
  for (int mode = 0; mode < kModes; ++mode) {
    const Percentiles p = Summarize(ns[mode]);
    std::printf("  %-36s %8.0f %8.0f %8.0f %8.0f %9.2fx\n", names[mode], p.p50, p.p99,
                p.p999, p.max, p.p50 / base.p50);
  }
}

// --- throughput ----------------------------------------------------------------

double Dd(const std::string& dir, bool sync) {
  const std::string file = dir + "/tether-log-benchmark-dd.bin";
  const std::string cmd = "dd if=/dev/zero of='" + file + "' bs=1M count=512 " +
                          (sync ? "conv=fdatasync " : "") + "2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  char buf[512];
  size_t n;
  while (p != nullptr && (n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  if (p != nullptr) ::pclose(p);
  ::unlink(file.c_str());
  // "... copied, 0.25 s, 2.1 GB/s": bytes / seconds.
  const size_t copied = out.find("copied, ");
  if (copied == std::string::npos) return 0;
  const double seconds = std::atof(out.c_str() + copied + 8);
  return seconds > 0 ? 512.0 * 1024 * 1024 / seconds / 1e6 : 0;
}

struct Throughput {
  double payload_mb_s, file_mb_s, messages_s;
  uint64_t messages, missed, sent;
};

// Records 4 channels while one publisher thread sends `mb_per_s` of
// incompressible 4 KiB messages (windows of a 64 MiB random buffer), paced
// every millisecond.
Throughput Record(const Options& o, Compression compression, double mb_per_s) {
  shm::testing::ScopedRoot root;
  transport::SchemaRegistry schemas;
  RegisterTestTypes(schemas);
  constexpr int kChannels = 4;
  constexpr size_t kSize = 4096;
  std::vector<std::unique_ptr<transport::ChannelHandle>> channels;
  for (int c = 0; c < kChannels; ++c) {
    channels.push_back(MakeChannel(root.options(), schemas,
                                   "/bench/t" + std::to_string(c), kSampleType,
                                   {.max_size = kSize, .depth = 16384}));
  }
  static const std::vector<uint64_t>* noise = [] {
    auto* v = new std::vector<uint64_t>((64u << 20) / 8);
    std::mt19937_64 rng(7);
    for (uint64_t& w : *v) w = rng();
    return v;
  }();
  LoggerOptions lo;
  lo.channels = root.options();
  lo.path = o.dir + "/tether-log-benchmark-throughput.mcap";
  lo.overwrite = true;
  lo.mcap.compression = compression;
  lo.mcap.chunk_size = 4 << 20;
  auto logger = *Logger::Start(lo);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> sent{0};
  const double per_ms = mb_per_s * 1e6 / kSize / 1000;
  std::thread publisher([&] {
    std::vector<std::unique_ptr<transport::RawPublisher>> pubs;
    for (auto& c : channels) pubs.push_back(*transport::RawPublisher::Create(c.get()));
    std::mt19937_64 rng(3);
    const auto* base = reinterpret_cast<const std::byte*>(noise->data());
    const size_t span = noise->size() * 8 - kSize;
    uint64_t i = 0;
    double due = 0;
    int64_t next = Now();
    while (!stop.load(std::memory_order_relaxed)) {
      next += 1'000'000;
      SleepUntil(next);
      for (due += per_ms; due >= 1; due -= 1) {
        transport::RawPublisher& p = *pubs[i % kChannels];
        std::memcpy(p.Loan().data(), base + (rng() % span) / 8 * 8, kSize);
        (void)p.Send(kSize);
        ++i;
      }
      sent.store(i, std::memory_order_relaxed);
    }
  });
  const int64_t t0 = Now();
  std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
  stop = true;
  publisher.join();
  (void)logger->Stop();
  const double seconds = (Now() - t0) / 1e9;
  const LoggerStats s = logger->stats();
  ::unlink(lo.path.c_str());
  return {s.bytes / seconds / 1e6, s.file_bytes / seconds / 1e6, s.messages / seconds,
          s.messages, s.missed, sent.load()};
}

void ThroughputPart(const Options& o) {
  const double page_cache = Dd(o.dir, false);
  const double synced = Dd(o.dir, true);
  std::printf("\nthroughput: 4 channels of 4 KiB incompressible messages from 1 "
              "publisher thread at a set rate, %.0f s each, into %s\n",
              o.seconds, o.dir.c_str());
  std::printf("  %-22s %10s %10s %12s %12s %10s %10s\n", "", "offered", "MB/s",
              "file MB/s", "messages/s", "recorded", "missed");
  for (Compression c : {Compression::kNone, Compression::kZstd}) {
    for (double rate : {50.0, 100.0, 200.0, 300.0, 400.0, 600.0, 800.0}) {
      const Throughput t = Record(o, c, rate);
      std::printf("  %-22s %10.0f %10.0f %12.0f %12.0f %10llu %10llu\n",
                  c == Compression::kNone ? "logger, uncompressed" : "logger, zstd 1",
                  rate, t.payload_mb_s, t.file_mb_s, t.messages_s,
                  static_cast<unsigned long long>(t.messages),
                  static_cast<unsigned long long>(t.missed));
      if (t.missed > 0) break;  // past what it sustains
    }
  }
  std::printf("  %-22s %10s %10.0f\n", "dd 1 MiB (page cache)", "", page_cache);
  std::printf("  %-22s %10s %10.0f\n", "dd + fdatasync", "", synced);
}

// --- replay timing ---------------------------------------------------------------

void ReplayPart(const Options& o) {
  const std::string path = o.dir + "/tether-log-benchmark-replay.mcap";
  std::vector<int64_t> logged;
  {
    shm::testing::ScopedRoot root;
    transport::SchemaRegistry schemas;
    RegisterTestTypes(schemas);
    auto channel = MakeChannel(root.options(), schemas, "/bench/replay", kScalarsType,
                               {.max_size = 128, .depth = 8192});
    LoggerOptions lo;
    lo.channels = root.options();
    lo.path = path;
    lo.overwrite = true;
    auto logger = *Logger::Start(lo);
    auto pub = *transport::RawPublisher::Create(channel.get());
    std::mt19937 rng(11);
    std::uniform_int_distribution<int> gap_us(200, 2000);
    const std::vector<std::byte> m = ScalarsMessage(3);
    int64_t next = Now();
    for (int i = 0; i < 5000; ++i) {
      next += gap_us(rng) * 1000;
      SleepUntil(next);
      PublishBytes(*pub, m);
    }
    (void)logger->Stop();
  }
  std::printf("\nreplay: %d logged messages at random 0.2..2 ms intervals, replayed "
              "in real time (rate 1, send times restamped) (us)\n",
              5000);
  std::printf("  %-58s %8s %8s %8s %8s\n", "", "p50", "p99", "p99.9", "max");
  auto reader = *LogReader::Open(path);
  auto cursor = reader->Read();
  LogMessage lm;
  while (cursor->Next(&lm)) {
    if (!lm.channel->is_gap_channel()) logged.push_back(lm.monotonic_send_ns);
  }
  for (int spin_us : {0, 200}) {
    shm::testing::ScopedRoot target;
    RealtimeReplayOptions ro;
    ro.channels = target.options();
    ro.restamp = true;
    ro.spin = std::chrono::microseconds(spin_us);
    auto replay = *RealtimeReplay::Create(path, ro);
    (void)replay->Run(nullptr);
    auto h = *transport::ChannelHandle::Open(target.options(), "/bench/replay");
    auto sub = *transport::RawSubscriber::Create(h.get(), {.pin = false, .from_oldest = true});
    std::vector<int64_t> replayed;
    transport::RawMessage rm;
    while (sub->Next(&rm) == transport::ReceiveStatus::kOk) {
      replayed.push_back(rm.context.monotonic_send_ns);
    }
    std::vector<double> interval_error_us, lateness_us;
    for (size_t i = 1; i < std::min(logged.size(), replayed.size()); ++i) {
      const double want = logged[i] - logged[i - 1];
      const double got = replayed[i] - replayed[i - 1];
      interval_error_us.push_back(std::abs(got - want) / 1000);
      lateness_us.push_back(std::abs((replayed[i] - replayed[0]) - (logged[i] - logged[0])) / 1000);
    }
    const Percentiles e = Summarize(interval_error_us);
    const Percentiles d = Summarize(lateness_us);
    const std::string how = spin_us == 0 ? "sleeping" : "spinning the last 200 us";
    std::printf("  %-58s %8.1f %8.1f %8.1f %8.1f\n",
                ("interval error, " + how).c_str(), e.p50, e.p99, e.p999, e.max);
    std::printf("  %-58s %8.1f %8.1f %8.1f %8.1f   (%zu of %zu replayed)\n",
                ("time error vs the first message, " + how).c_str(), d.p50, d.p99,
                d.p999, d.max, replayed.size(), logged.size());
  }
  ::unlink(path.c_str());
}

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* name) -> const char* {
      const std::string prefix = std::string("--") + name + "=";
      return a.rfind(prefix, 0) == 0 ? argv[i] + prefix.size() : nullptr;
    };
    if (const char* v = value("part")) {
      o.part = v;
    } else if (const char* v = value("dir")) {
      o.dir = v;
    } else if (const char* v = value("seconds")) {
      o.seconds = std::atof(v);
    } else if (const char* v = value("rounds")) {
      o.rounds = std::max(1, std::atoi(v));
    } else if (const char* v = value("samples")) {
      o.samples = std::max(10, std::atoi(v));
    } else {
      std::fprintf(stderr,
                   "usage: log_benchmark [--part=all|send|throughput|replay] "
                   "[--dir=DIR] [--seconds=S] [--rounds=N] [--samples=N]\n"
                   "Measures publisher send latency with and without the logger, "
                   "logger throughput against dd to the same directory, and "
                   "real-time replay timing accuracy.\n");
      std::exit(a == "--help" || a == "-h" ? 0 : 2);
    }
  }
  return o;
}

}  // namespace
}  // namespace tether::log

int main(int argc, char** argv) {
  const tether::log::Options o = tether::log::Parse(argc, argv);
  std::printf("log_benchmark: %s (2-vCPU machine shared with builds: compare ratios)\n",
              o.part.c_str());
  if (o.part == "all" || o.part == "send") tether::log::SendPart(o);
  if (o.part == "all" || o.part == "throughput") tether::log::ThroughputPart(o);
  if (o.part == "all" || o.part == "replay") tether::log::ReplayPart(o);
  return 0;
}
