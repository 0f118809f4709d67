// Round trip tether -> net bridge -> DDS -> net bridge -> tether between two
// network namespaces joined by a veth pair, against Cyclone DDS's own round
// trip (benchmarks/dds_pingpong: the same Frame type, QoS and domain
// configuration) over the same veth, in the same run, in alternating rounds:
// the bridges' added latency at p50 and p99 for 64 B and 64 KiB.
//
//   bazel run //benchmarks:net_bridge_benchmark -- [--samples=2000]
//       [--rounds=2] [--json]
//
// Host a runs bridge a (out /bench/ping, in /bench/pong), host b runs bridge b
// (in /bench/ping, out /bench/pong). This process pings from host a's
// instance and echoes in host b's, each in its own event loop (watchers
// woken by io_uring futex waits); shared memory is not namespaced, the
// bridges are the only link. Needs root (namespaces). Machine shared and
// noisy: compare the rows of one run, not runs.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "capnp/message.h"
#include "capnp/serialize.h"
#include "loop/uring_event_loop.h"
#include "tests/net/two_hosts.h"
#include "tests/shm/shm_test_util.h"
#include "tests/transport/framing_test.capnp.h"
#include "transport/channel_set.h"
#include "transport/config.h"
#include "transport/schema_registry.h"

namespace tether::net {
namespace {

using std::chrono::milliseconds;
using testing::TwoHosts;

struct Options {
  int samples = 2000;
  int warmup = 200;
  int rounds = 2;
  bool json = false;
};

struct Stats {
  double p50 = 0, p99 = 0, p999 = 0, max = 0;
  size_t n = 0;
};

Stats Summarize(std::vector<int64_t> ns) {
  Stats s;
  s.n = ns.size();
  if (ns.empty()) return s;
  std::sort(ns.begin(), ns.end());
  auto at = [&](double p) {
    size_t i = static_cast<size_t>(std::ceil(p * ns.size()));
    return ns[std::clamp<size_t>(i, 1, ns.size()) - 1] / 1000.0;
  };
  s.p50 = at(0.5);
  s.p99 = at(0.99);
  s.p999 = at(0.999);
  s.max = ns.back() / 1000.0;
  return s;
}

std::string Runfile(const std::string& path) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(path, ec);
  return p.string();
}

void Progress(const std::string& what) {
  std::fprintf(stderr, "net_bridge_benchmark: %s\n", what.c_str());
}

// A framed Sample whose framed size is about `size` bytes (one segment).
std::vector<std::byte> Message(size_t size) {
  const size_t blob = size > 48 ? size - 48 : 8;
  capnp::MallocMessageBuilder message(static_cast<unsigned>(blob / 8 + 64));
  auto root = message.initRoot<Sample>();
  root.setStamp(1);
  auto b = root.initBlob(static_cast<unsigned>(blob));
  for (size_t i = 0; i < blob; ++i) b[i] = static_cast<uint8_t>(i * 7);
  kj::Array<capnp::word> flat = capnp::messageToFlatArray(message);
  const auto* p = reinterpret_cast<const std::byte*>(flat.begin());
  return std::vector<std::byte>(p, p + flat.size() * sizeof(capnp::word));
}

class Bench {
 public:
  Bench(const Options& o, TwoHosts& hosts) : o_(o), hosts_(hosts) {
    tmp_ = testing_tmp();
    for (int i = 0; i < 2; ++i) {
      options_[i] = root_.options();
      options_[i].instance = i == 0 ? "a" : "b";
    }
  }

  static std::string testing_tmp() {
    char dir[] = "/tmp/tether-net-bench-XXXXXX";
    return ::mkdtemp(dir) != nullptr ? dir : "/tmp";
  }
  ~Bench() { std::filesystem::remove_all(tmp_); }

  // Cyclone's own round trip, `size` payload bytes.
  absl::StatusOr<std::vector<int64_t>> Raw(size_t size) {
    const std::string bin = Runfile("benchmarks/dds_pingpong");
    const pid_t pong = hosts_.Spawn(
        1, {bin, "pong", "--interface", hosts_.interface(1), "--peer",
            hosts_.address(0)},
        tmp_ + "/pong.log");
    const std::string out = tmp_ + "/ping.txt";
    const pid_t ping = hosts_.Spawn(
        0, {bin, "ping", "--interface", hosts_.interface(0), "--peer",
            hosts_.address(1), "--size", std::to_string(size), "--samples",
            std::to_string(o_.samples), "--warmup", std::to_string(o_.warmup),
            "--out", out},
        tmp_ + "/ping.log");
    std::optional<int> rc;
    testing::WaitFor([&] { return (rc = hosts_.Exited(ping)).has_value(); },
                     milliseconds(300000));
    hosts_.Stop(pong);
    if (!rc || *rc != 0) {
      if (!rc) hosts_.Stop(ping);
      return absl::InternalError(absl::StrCat("dds_pingpong ping failed (exit ", rc ? *rc : -1, "): ") +
                                 ReadAll(tmp_ + "/ping.log"));
    }
    std::vector<int64_t> ns;
    std::ifstream in(out);
    for (long long v; in >> v;) ns.push_back(v);
    return ns;
  }

  absl::Status SetUpBridges() {
    if (sets_[0] == nullptr) {
      if (absl::Status s = MakeChannels(); !s.ok()) return s;
    }
    return StartBridges();
  }

  absl::Status MakeChannels() {
    schemas_.Register<Sample>();
    const std::string stack = tmp_ + "/stack.json";
    std::ofstream(stack) << R"({"channels": [
      {"name": "/bench/ping", "type": "tests/transport/framing_test.capnp:Sample",
       "maxSize": 71680, "frequencyHz": 0, "queueDepth": 64, "maxPublishers": 2, "maxPinned": 4},
      {"name": "/bench/pong", "type": "tests/transport/framing_test.capnp:Sample",
       "maxSize": 71680, "frequencyHz": 0, "queueDepth": 64, "maxPublishers": 2, "maxPinned": 4}]})";
    absl::StatusOr<transport::StackConfig> config =
        transport::LoadStackConfig(stack, schemas_.known_types());
    if (!config.ok()) return config.status();
    for (int i = 0; i < 2; ++i) {
      auto set = transport::ChannelSet::Create(options_[i], *config, schemas_);
      if (!set.ok()) return set.status();
      sets_[i] = std::move(*set);
    }
    return absl::OkStatus();
  }

  absl::Status StartBridges() {
    const std::string bin = Runfile("net/net_bridge");
    for (int i = 0; i < 2; ++i) {
      const char* out = i == 0 ? "/bench/ping" : "/bench/pong";
      const char* in = i == 0 ? "/bench/pong" : "/bench/ping";
      const std::string config_path = absl::StrCat(tmp_, "/bridge", i, ".json");
      std::ofstream(config_path) << absl::StrCat(
          "{\"name\": \"", i == 0 ? "a" : "b", "\", \"domain\": 8, ",
          "\"interface\": \"", hosts_.interface(i), "\", \"peers\": [\"",
          hosts_.address(1 - i), "\"], \"announceSeconds\": 0.2, ",
          "\"channels\": [{\"name\": \"", out,
          "\", \"direction\": \"out\", \"historyDepth\": 16}, {\"name\": \"",
          in, "\", \"direction\": \"in\"}]}");
      bridges_[i] = hosts_.Spawn(
          i,
          {bin, "--config", config_path, "--root", root_.root(), "--instance",
           options_[i].instance, "--status-interval", "0.2",
           "--print-interval", "0"},
          absl::StrCat(tmp_, "/bridge", i, ".log"));
    }
    // Both directions matched at both ends.
    const bool linked = testing::WaitFor(
        [&] {
          struct End {
            int host;
            const char* bridge;
            const char* channel;
            status::Direction dir;
          };
          for (const End& e :
               {End{0, "a", "/bench/ping", status::Direction::OUT},
                End{0, "a", "/bench/pong", status::Direction::IN},
                End{1, "b", "/bench/ping", status::Direction::IN},
                End{1, "b", "/bench/pong", status::Direction::OUT}}) {
            auto l = testing::ReadChannelStatus(options_[e.host], e.bridge,
                                                e.channel, e.dir);
            if (!l || l->peers == 0) return false;
          }
          return true;
        },
        milliseconds(30000));
    if (!linked) {
      return absl::DeadlineExceededError(
          "bridges did not link within 30 s: " + ReadAll(tmp_ + "/bridge0.log") +
          ReadAll(tmp_ + "/bridge1.log"));
    }
    return absl::OkStatus();
  }

  // tether -> bridge -> DDS -> bridge -> tether and back.
  absl::StatusOr<std::vector<int64_t>> Bridged(size_t size) {
    const std::vector<std::byte> message = Message(size);
    auto pinger = loop::UringEventLoop::Create("pinger", sets_[0].get());
    auto echo = loop::UringEventLoop::Create("echo", sets_[1].get());
    if (!pinger.ok()) return pinger.status();
    if (!echo.ok()) return echo.status();
    auto ping_sender = (*pinger)->MakeRawSender("/bench/ping");
    auto pong_sender = (*echo)->MakeRawSender("/bench/pong");
    if (!ping_sender.ok()) return ping_sender.status();
    if (!pong_sender.ok()) return pong_sender.status();
    loop::RawSender* pong = pong_sender->get();
    absl::Status s = (*echo)
                         ->MakeRawWatcher("/bench/ping",
                                          [pong](const transport::RawMessage& m) {
                                            (void)pong->Publish(m.bytes);
                                          })
                         .status();
    if (!s.ok()) return s;
    std::vector<int64_t> rtts;
    rtts.reserve(o_.samples);
    const int total = o_.warmup + o_.samples;
    int done = 0;
    int64_t sent_at = 0;
    std::atomic<bool> failed{false};
    loop::UringEventLoop* pl = pinger->get();
    loop::RawSender* ping = ping_sender->get();
    auto send = [&] {
      sent_at = static_cast<int64_t>(loop::ToMonotonicNs(pl->monotonic_now()));
      (void)ping->Publish(message);
    };
    s = pl->MakeRawWatcher("/bench/pong", [&](const transport::RawMessage&) {
            const int64_t now =
                static_cast<int64_t>(loop::ToMonotonicNs(pl->monotonic_now()));
            if (done >= o_.warmup) rtts.push_back(now - sent_at);
            if (++done < total) {
              send();
            } else {
              pl->Exit();
            }
          }).status();
    if (!s.ok()) return s;
    int last_done = -1;
    loop::TimerHandle* watchdog = pl->AddTimer([&] {
      if (done == last_done) {  // nothing for 5 s: a lost message
        failed = true;
        pl->Exit();
      }
      last_done = done;
    });
    pl->OnRun([&] {
      watchdog->Schedule(pl->monotonic_now() + std::chrono::seconds(5),
                         std::chrono::seconds(5));
      send();
    });
    std::thread echo_thread([&] { (*echo)->Run(); });
    pl->Run();
    (*echo)->Exit();
    echo_thread.join();
    if (failed) return absl::DeadlineExceededError("a round trip was lost");
    return rtts;
  }

  void StopBridges() {
    for (pid_t p : bridges_) {
      if (p > 0) hosts_.Stop(p);
    }
  }

 private:
  static std::string ReadAll(const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  Options o_;
  TwoHosts& hosts_;
  std::string tmp_;
  shm::testing::ScopedRoot root_;
  shm::ChannelOptions options_[2];
  transport::SchemaRegistry schemas_;
  std::unique_ptr<transport::ChannelSet> sets_[2];
  pid_t bridges_[2] = {0, 0};
};

int Main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--samples=", 0) == 0) o.samples = std::atoi(a.c_str() + 10);
    else if (a.rfind("--rounds=", 0) == 0) o.rounds = std::atoi(a.c_str() + 9);
    else if (a == "--json") o.json = true;
    else {
      std::fprintf(stderr,
                   "usage: net_bridge_benchmark [--samples=N] [--rounds=R] "
                   "[--json]\n(root: makes two network namespaces and a "
                   "veth pair)\n");
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  if (o.samples < 10 || o.rounds < 1) {
    std::fprintf(stderr, "net_bridge_benchmark: --samples >= 10, --rounds >= 1\n");
    return 2;
  }
  absl::StatusOr<std::unique_ptr<TwoHosts>> hosts = TwoHosts::Create();
  if (!hosts.ok()) {
    std::fprintf(stderr, "net_bridge_benchmark: %s\n",
                 std::string(hosts.status().message()).c_str());
    return 1;
  }
  Bench bench(o, **hosts);
  const size_t sizes[] = {64, 64 * 1024};
  std::vector<int64_t> raw[2], bridged[2];
  for (int r = 0; r < o.rounds; ++r) {
    for (int k = 0; k < 2; ++k) {
      Progress(absl::StrCat("round ", r + 1, "/", o.rounds, ": Cyclone ping-pong, ",
                            sizes[k], " B, ", o.samples, " samples"));
      auto rs = bench.Raw(sizes[k]);
      if (!rs.ok()) {
        std::fprintf(stderr, "%s\n", std::string(rs.status().message()).c_str());
        return 1;
      }
      raw[k].insert(raw[k].end(), rs->begin(), rs->end());
    }
    Progress(absl::StrCat("round ", r + 1, "/", o.rounds, ": starting the bridges"));
    if (absl::Status s = bench.SetUpBridges(); !s.ok()) {
      std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
      return 1;
    }
    for (int k = 0; k < 2; ++k) {
      Progress(absl::StrCat("round ", r + 1, "/", o.rounds, ": bridged, ",
                            sizes[k], " B, ", o.samples, " samples"));
      auto bs = bench.Bridged(sizes[k]);
      if (!bs.ok()) {
        std::fprintf(stderr, "%s\n", std::string(bs.status().message()).c_str());
        return 1;
      }
      bridged[k].insert(bridged[k].end(), bs->begin(), bs->end());
    }
    bench.StopBridges();
  }
  if (o.json) {
    std::printf("{\"rows\": [");
    for (int k = 0; k < 2; ++k) {
      const Stats a = Summarize(raw[k]), b = Summarize(bridged[k]);
      std::printf("%s{\"size\": %zu, \"cyclone\": {\"p50_us\": %.1f, \"p99_us\": %.1f, "
                  "\"p999_us\": %.1f, \"max_us\": %.1f, \"n\": %zu}, \"bridged\": "
                  "{\"p50_us\": %.1f, \"p99_us\": %.1f, \"p999_us\": %.1f, "
                  "\"max_us\": %.1f, \"n\": %zu}}",
                  k ? ", " : "", sizes[k], a.p50, a.p99, a.p999, a.max, a.n,
                  b.p50, b.p99, b.p999, b.max, b.n);
    }
    std::printf("]}\n");
    return 0;
  }
  std::printf(
      "round trip between two network namespaces over one veth, %d samples "
      "x %d rounds per row (us)\n",
      o.samples, o.rounds);
  std::printf("%-8s  %-44s  %8s  %8s  %8s  %8s\n", "SIZE", "PATH", "P50", "P99",
              "P99.9", "MAX");
  for (int k = 0; k < 2; ++k) {
    const Stats a = Summarize(raw[k]), b = Summarize(bridged[k]);
    const std::string size = k == 0 ? "64 B" : "64 KiB";
    std::printf("%-8s  %-44s  %8.1f  %8.1f  %8.1f  %8.1f\n", size.c_str(),
                "Cyclone C ping-pong (floor)", a.p50, a.p99, a.p999, a.max);
    std::printf("%-8s  %-44s  %8.1f  %8.1f  %8.1f  %8.1f\n", size.c_str(),
                "tether -> bridge -> DDS -> bridge -> tether", b.p50, b.p99,
                b.p999, b.max);
    std::printf("%-8s  %-44s  %+8.1f  %+8.1f   (p50 %.2fx, p99 %.2fx)\n", "",
                "bridges add", b.p50 - a.p50, b.p99 - a.p99,
                a.p50 > 0 ? b.p50 / a.p50 : 0, a.p99 > 0 ? b.p99 / a.p99 : 0);
  }
  return 0;
}

}  // namespace
}  // namespace tether::net

int main(int argc, char** argv) { return tether::net::Main(argc, argv); }
