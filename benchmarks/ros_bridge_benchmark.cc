// ROS bridge against plain TCPROS between the same two ROS nodes, in one
// run: one-way latency ROS -> bridge -> tether callback vs ROS -> ROS, round
// trip ROS -> tether -> ROS vs ROS -> ROS -> ROS, p50/p99/max for 64 B and a
// 640x480 RGB image (921,600 B), and the highest rate each sustains without
// loss. A private roscore on a free port; every process stopped at the end.
//   bazel run //benchmarks:ros_bridge_benchmark -- [--quick] [--json]
// Roles (the binary runs itself): ros_pub, ros_sub, ros_pong, ros_ping,
// tether_sub, tether_pong.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "loop/signals.h"
#include "loop/uring_event_loop.h"
#include "ros/ros.h"
#include "ros_bridge/ros1msg/envelope.h"
#include "ros_bridge/ros1msg/typed.h"
#include "tests/ros_bridge/ros_test_env.h"
#include "topic_tools/shape_shifter.h"
#include "transport/channel_set.h"
#include "transport/config.h"

namespace {

using namespace std::chrono_literals;
using tether::ros_bridge::testing::Process;
using tether::ros_bridge::testing::RosGraph;

constexpr char kType[] = "bench_msgs/Blob";
constexpr char kMd5[] = "b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1";
constexpr char kDefinition[] = "uint8[] data\n";
constexpr uint64_t kWarmup = uint64_t{1} << 63;  // seq bit of warm-up pings

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// Payload: uint32 length, then [send ns][seq][padding].
std::vector<uint8_t> Payload(size_t size, int64_t t, uint64_t seq) {
  std::vector<uint8_t> b(4 + size, 0);
  const uint32_t n = static_cast<uint32_t>(size);
  std::memcpy(b.data(), &n, 4);
  std::memcpy(b.data() + 4, &t, 8);
  std::memcpy(b.data() + 12, &seq, 8);
  return b;
}

bool Parse(const uint8_t* data, size_t size, int64_t* t, uint64_t* seq) {
  if (size < 20) return false;
  std::memcpy(t, data + 4, 8);
  std::memcpy(seq, data + 12, 8);
  return true;
}

// Filled by a callback thread, read by the main thread.
struct Stats {
  std::mutex mu;
  std::vector<int64_t> ns;
  std::atomic<uint64_t> count{0};
  void Add(int64_t v) {
    std::lock_guard<std::mutex> lock(mu);
    ns.push_back(v);
    ++count;
  }
  void Clear() {
    std::lock_guard<std::mutex> lock(mu);
    ns.clear();
    count = 0;
  }
  std::string Line() {
    std::lock_guard<std::mutex> lock(mu);
    std::sort(ns.begin(), ns.end());
    auto pct = [&](double p) {
      return ns.empty() ? 0.0 : ns[std::min(ns.size() - 1, size_t(p * ns.size()))] / 1e3;
    };
    char buf[200];
    std::snprintf(buf, sizeof(buf), "count=%llu p50=%.1f p99=%.1f max=%.1f",
                  (unsigned long long)count, pct(0.5), pct(0.99),
                  ns.empty() ? 0.0 : ns.back() / 1e3);
    return buf;
  }
};

std::string Arg(const std::vector<std::string>& a, const std::string& key,
                const std::string& fallback = "") {
  for (size_t i = 0; i + 1 < a.size(); ++i) {
    if (a[i] == key) return a[i + 1];
  }
  return fallback;
}

// --- ROS roles ------------------------------------------------------------

void RosInit(const std::string& name) {
  int argc = 1;
  char arg0[] = "bench";
  char* argv[] = {arg0, nullptr};
  ros::init(argc, argv, name, ros::init_options::AnonymousName);
}

topic_tools::ShapeShifter Shape(const std::vector<uint8_t>& bytes) {
  topic_tools::ShapeShifter s;
  s.morph(kMd5, kType, kDefinition, "0");
  ros::serialization::IStream is(const_cast<uint8_t*>(bytes.data()),
                                 static_cast<uint32_t>(bytes.size()));
  s.read(is);
  return s;
}

// Publishes N messages at R Hz on TOPIC once it has a subscriber (and, for
// ping, measures the round trip on PONG).
int RosPub(const std::vector<std::string>& a, bool ping) {
  RosInit(ping ? "bench_ping" : "bench_pub");
  ros::NodeHandle nh;
  const size_t size = std::stoul(Arg(a, "--size"));
  const double rate = std::stod(Arg(a, "--rate"));
  const uint64_t n = std::stoull(Arg(a, "--count"));
  Stats rtt;
  std::atomic<int64_t> last_rx{NowNs()};
  std::atomic<bool> warm{false};
  ros::Subscriber pong;
  ros::AsyncSpinner spinner(1);
  if (ping) {
    pong = nh.subscribe<topic_tools::ShapeShifter>(
        Arg(a, "--pong"), 1000,
        [&](const boost::shared_ptr<const topic_tools::ShapeShifter>& m) {
          const int64_t now = NowNs();
          std::vector<uint8_t> b(m->size());
          ros::serialization::OStream os(b.data(), b.size());
          m->write(os);
          int64_t t;
          uint64_t seq;
          if (!Parse(b.data(), b.size(), &t, &seq)) return;
          last_rx = now;
          if (seq & kWarmup) {
            warm = true;
          } else {
            rtt.Add(now - t);
          }
        },
        ros::VoidConstPtr(), ros::TransportHints().tcpNoDelay());
    spinner.start();
  }
  topic_tools::ShapeShifter proto = Shape(Payload(size, 0, 0));
  ros::Publisher pub = proto.advertise(nh, Arg(a, "--topic"), 1000);
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (ros::ok() && pub.getNumSubscribers() == 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  std::this_thread::sleep_for(500ms);  // every link connected
  std::vector<uint8_t> bytes = Payload(size, 0, 0);
  // Round trip: warm-up pings until the whole path answers (the bridge
  // advertises the pong topic when its first envelope arrives).
  for (uint64_t w = 0; ping && !warm && std::chrono::steady_clock::now() < deadline; ++w) {
    const int64_t t = NowNs();
    const uint64_t seq = kWarmup | w;
    std::memcpy(bytes.data() + 4, &t, 8);
    std::memcpy(bytes.data() + 12, &seq, 8);
    topic_tools::ShapeShifter s = Shape(bytes);
    pub.publish(s);
    std::this_thread::sleep_for(50ms);
  }
  std::this_thread::sleep_for(ping ? 300ms : 0ms);
  const auto period = std::chrono::nanoseconds(int64_t(1e9 / rate));
  auto next = std::chrono::steady_clock::now();
  for (uint64_t i = 0; i < n && ros::ok(); ++i) {
    std::this_thread::sleep_until(next);
    next += period;
    const int64_t t = NowNs();
    std::memcpy(bytes.data() + 4, &t, 8);
    std::memcpy(bytes.data() + 12, &i, 8);
    topic_tools::ShapeShifter s = Shape(bytes);
    pub.publish(s);
  }
  if (ping) {
    while (rtt.count < n && NowNs() - last_rx < 2'000'000'000) {
      std::this_thread::sleep_for(10ms);
    }
    std::printf("RESULT sent=%llu %s\n", (unsigned long long)n, rtt.Line().c_str());
  } else {
    std::this_thread::sleep_for(300ms);
    std::printf("RESULT sent=%llu\n", (unsigned long long)n);
  }
  std::fflush(stdout);
  return 0;
}

// Receives on TOPIC until idle for 2 s after the first message (or
// --expect messages); prints the one-way latency. With --echo republishes
// each message on ECHO (the TCPROS round-trip peer).
int RosSub(const std::vector<std::string>& a, bool echo) {
  RosInit(echo ? "bench_pong" : "bench_sub");
  ros::NodeHandle nh;
  Stats lat;
  std::atomic<int64_t> last_rx{0};
  ros::Publisher out;
  if (echo) {
    topic_tools::ShapeShifter proto = Shape(Payload(16, 0, 0));
    out = proto.advertise(nh, Arg(a, "--echo"), 1000);
  }
  ros::Subscriber sub = nh.subscribe<topic_tools::ShapeShifter>(
      Arg(a, "--topic"), 1000,
      [&](const boost::shared_ptr<const topic_tools::ShapeShifter>& m) {
        const int64_t now = NowNs();
        if (echo) {
          out.publish(*m);
        } else {
          std::vector<uint8_t> b(m->size());
          ros::serialization::OStream os(b.data(), b.size());
          m->write(os);
          int64_t t;
          uint64_t seq;
          if (Parse(b.data(), b.size(), &t, &seq)) lat.Add(now - t);
        }
        last_rx = now;
      },
      ros::VoidConstPtr(), ros::TransportHints().tcpNoDelay());
  std::printf("READY\n");
  std::fflush(stdout);
  const uint64_t expect = std::stoull(Arg(a, "--expect", "0"));
  ros::AsyncSpinner spinner(1);
  spinner.start();
  while (ros::ok()) {
    std::this_thread::sleep_for(20ms);
    const int64_t l = last_rx;
    if (l != 0 && (NowNs() - l > 2'000'000'000 || (expect && lat.count >= expect))) break;
  }
  std::printf("RESULT %s\n", lat.Line().c_str());
  std::fflush(stdout);
  return 0;
}

// --- tether roles -----------------------------------------------------------

std::unique_ptr<tether::transport::StackConfig> BenchStack(
    const tether::transport::SchemaRegistry& schemas) {
  // Small messages: 1024 deep (TCPROS has 1000-message queues and socket
  // buffers); images: 16 deep, 2 MiB slots.
  std::string json = "{\"channels\": [";
  for (const char* name : {"/t/ping_s", "/t/pong_s", "/t/ping_l", "/t/pong_l"}) {
    const bool small = name[std::strlen(name) - 1] == 's';
    json += std::string(json.back() == '[' ? "" : ",") + "{\"name\": \"" + name +
            "\", \"type\": \"ros_bridge/ros1msg/envelope.capnp:RosEnvelope\", "
            "\"maxSize\": " + (small ? "4096" : "2097152") +
            ", \"queueDepth\": " + (small ? "1024" : "16") +
            ", \"maxPublishers\": 4, \"maxPinned\": 8}";
  }
  json += "]}";
  auto stack = tether::transport::ParseStackConfig(json, "<bench>", schemas.known_types());
  if (!stack.ok()) {
    std::fprintf(stderr, "%s\n", std::string(stack.status().message()).c_str());
    std::exit(1);
  }
  return std::make_unique<tether::transport::StackConfig>(std::move(*stack));
}

// Watches /t/ping; records latency (tether_sub) or answers on /t/pong.
int TetherNode(const std::vector<std::string>& a, bool pong) {
  using namespace tether;
  shm::ChannelOptions o;
  o.root = Arg(a, "--root");
  o.instance = "bench";
  auto signals = loop::StopSignals::Install();
  transport::SchemaRegistry schemas;
  ros1msg::RegisterRosSchemas(&schemas);
  auto stack = BenchStack(schemas);
  auto channels = transport::ChannelSet::Create(o, *stack, schemas);
  if (!channels.ok()) {
    std::fprintf(stderr, "%s\n", std::string(channels.status().message()).c_str());
    return 1;
  }
  loop::UringEventLoopOptions lo;
  lo.stop_fd = (*signals)->fd();
  auto loop = loop::UringEventLoop::Create("bench", channels->get(), lo);
  if (!loop.ok()) return 1;
  const std::string ping_channel = "/t/ping_" + Arg(a, "--class");
  const std::string pong_channel = "/t/pong_" + Arg(a, "--class");
  auto sender = (*loop)->MakeRawSender(pong_channel);
  if (!sender.ok()) return 1;
  transport::BuildArena arena((*sender)->channel()->params().slot_size);
  Stats lat;
  uint64_t missed = 0;
  int64_t last_rx = 0;
  auto s = (*loop)->MakeRawWatcher(ping_channel, [&](const transport::RawMessage& m) {
    const int64_t now = NowNs();
    missed += m.context.missed;
    ros1msg::EnvelopeView v;
    if (!ros1msg::ReadEnvelope(m.bytes, &v).ok()) return;
    last_rx = now;
    if (!pong) {
      int64_t t;
      uint64_t seq;
      if (Parse(v.data.data(), v.data.size(), &t, &seq)) lat.Add(now - t);
      return;
    }
    ros1msg::EnvelopeHeader h = v.header;
    h.origin_graph = {};  // a tether node's answer
    h.origin_bridge = {};
    h.latching = false;
    auto f = ros1msg::BuildEnvelope(&arena, (*sender)->Loan(), pong_channel, h, v.data.size(),
                                    [&](std::span<uint8_t> out) {
                                      std::memcpy(out.data(), v.data.data(), v.data.size());
                                    });
    if (f.ok()) (void)(*sender)->Send(f.size, nullptr, f.offset);
  });
  if (!s.ok()) return 1;
  (*loop)->AddTimer([&] {
    if (last_rx != 0 && NowNs() - last_rx > 2'000'000'000) (*loop)->Exit();
  })->Schedule((*loop)->monotonic_now(), 100ms);
  std::printf("READY\n");
  std::fflush(stdout);
  (*loop)->Run();
  std::printf("RESULT %s missed=%llu\n", lat.Line().c_str(), (unsigned long long)missed);
  std::fflush(stdout);
  return 0;
}

// --- orchestration -----------------------------------------------------------

std::string Self() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, n) : "ros_bridge_benchmark";
}

std::string BridgeBinary() {
  // Next to us in bazel-bin: benchmarks/x -> ros_bridge/ros_bridge.
  std::string self = Self();
  return self.substr(0, self.rfind("/benchmarks/")) + "/ros_bridge/ros_bridge";
}

std::map<std::string, std::string> ParseResult(const std::string& out) {
  std::map<std::string, std::string> r;
  const size_t p = out.rfind("RESULT ");
  if (p == std::string::npos) return r;
  std::istringstream in(out.substr(p + 7, out.find('\n', p) - p - 7));
  std::string kv;
  while (in >> kv) {
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) r[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return r;
}

bool WaitReady(Process& p) {
  return tether::ros_bridge::testing::WaitFor(
      [&] { return p.Output().find("READY") != std::string::npos; }, 20s);
}

struct Run {
  std::map<std::string, std::string> sender, receiver;
};

// One measurement. path: "tcpros" or "bridge"; kind: "oneway" or "rtt".
Run Measure(RosGraph& graph, const std::string& root, const std::string& path,
            const std::string& kind, size_t size, double rate, uint64_t count) {
  const std::string self = Self();
  const std::string sz = std::to_string(size), rt = std::to_string(rate),
                    ct = std::to_string(count);
  Run run;
  const std::string cls = size <= 2048 ? "s" : "l";
  std::unique_ptr<Process> receiver;
  if (path == "tcpros") {
    receiver = graph.Spawn({self, kind == "rtt" ? "ros_pong" : "ros_sub", "--topic",
                            "/a/ping", "--echo", "/a/pong", "--expect", ct},
                           "recv");
  } else {
    receiver = graph.Spawn({self, kind == "rtt" ? "tether_pong" : "tether_sub",
                            "--root", root, "--class", cls},
                           "recv");
  }
  if (!WaitReady(*receiver)) {
    std::fprintf(stderr, "receiver did not start: %s\n", receiver->Output().c_str());
    return run;
  }
  const std::string topic = path == "tcpros" ? "/a/ping" : "/b/ping_" + cls;
  const std::string pong = path == "tcpros" ? "/a/pong" : "/b/pong_" + cls;
  auto sender = graph.Spawn({self, kind == "rtt" ? "ros_ping" : "ros_pub", "--topic",
                             topic, "--pong", pong, "--size", sz, "--rate", rt,
                             "--count", ct},
                            "send");
  sender->Wait(std::chrono::seconds(60 + static_cast<int64_t>(count / std::max(1.0, rate))));
  receiver->Stop(10s);
  run.sender = ParseResult(sender->Output());
  run.receiver = ParseResult(receiver->Output());
  return run;
}

int Orchestrate(const std::vector<std::string>& a) {
  const bool quick = std::find(a.begin(), a.end(), "--quick") != a.end();
  const bool json = std::find(a.begin(), a.end(), "--json") != a.end();
  RosGraph graph;
  if (!graph.Start()) {
    std::fprintf(stderr, "roscore did not start\n");
    return 1;
  }
  char tmpl[] = "/dev/shm/tether-rosbench-XXXXXX";
  const std::string root = ::mkdtemp(tmpl);
  const std::string config = tether::ros_bridge::testing::TmpDir() + "/bench_bridge.json";
  std::ofstream(config) << "{\"rosQueueSize\": 1000, \"outboxDepth\": 1000, \"pairs\": ["
                           "{\"ros\": \"/b/ping_s\", \"tether\": \"/t/ping_s\", \"direction\": \"rosToTether\"},"
                           "{\"ros\": \"/b/pong_s\", \"tether\": \"/t/pong_s\", \"direction\": \"tetherToRos\"},"
                           "{\"ros\": \"/b/ping_l\", \"tether\": \"/t/ping_l\", \"direction\": \"rosToTether\"},"
                           "{\"ros\": \"/b/pong_l\", \"tether\": \"/t/pong_l\", \"direction\": \"tetherToRos\"}]}";
  // The tether side's channels first (the shape both sides use).
  {
    tether::transport::SchemaRegistry schemas;
    tether::ros1msg::RegisterRosSchemas(&schemas);
    auto stack = BenchStack(schemas);
    tether::shm::ChannelOptions o;
    o.root = root;
    o.instance = "bench";
    auto set = tether::transport::ChannelSet::Create(o, *stack, schemas);
    if (!set.ok()) {
      std::fprintf(stderr, "%s\n", std::string(set.status().message()).c_str());
      return 1;
    }
  }
  auto bridge = graph.Spawn({BridgeBinary(), "--config", config, "--root", root,
                             "--instance", "bench", "--no-status-channel"},
                            "bridge");
  if (!tether::ros_bridge::testing::WaitFor(
          [&] { return bridge->Output().find("joined the ROS master") != std::string::npos; },
          20s)) {
    std::fprintf(stderr, "bridge did not start: %s\n", bridge->Output().c_str());
    return 1;
  }
  struct Size {
    const char* name;
    size_t bytes;
    double latency_rate;
    uint64_t latency_count;
    std::vector<double> rates;
  };
  std::vector<Size> sizes = {
      {"64 B", 64, 200, quick ? 500u : 2000u, {1000, 2000, 5000, 10000, 20000, 50000}},
      {"640x480 RGB", 640 * 480 * 3, 20, quick ? 60u : 200u, {15, 30, 60, 120, 240}},
  };
  std::printf("%-12s %-22s %10s %10s %10s %8s\n", "SIZE", "PATH", "P50 US", "P99 US",
              "MAX US", "SAMPLES");
  std::string json_out = "{\"latency\":[";
  bool first = true;
  for (const Size& s : sizes) {
    for (const std::string kind : {"oneway", "rtt"}) {
      for (const std::string path : {"tcpros", "bridge"}) {
        Run r = Measure(graph, root, path, kind, s.bytes, s.latency_rate, s.latency_count);
        auto& res = kind == "rtt" ? r.sender : r.receiver;
        const std::string label =
            kind == "oneway" ? (path == "tcpros" ? "ROS->ROS (TCPROS)" : "ROS->bridge->tether")
                             : (path == "tcpros" ? "ROS->ROS->ROS" : "ROS->tether->ROS");
        std::printf("%-12s %-22s %10s %10s %10s %8s\n", s.name, label.c_str(),
                    res["p50"].c_str(), res["p99"].c_str(), res["max"].c_str(),
                    res["count"].c_str());
        std::fflush(stdout);
        json_out += (first ? "" : ",") + std::string("{\"size\":\"") + s.name +
                    "\",\"path\":\"" + label + "\",\"p50_us\":" + res["p50"] +
                    ",\"p99_us\":" + res["p99"] + ",\"max_us\":" + res["max"] +
                    ",\"samples\":" + res["count"] + "}";
        first = false;
      }
    }
  }
  json_out += "],\"max_rate\":[";
  first = true;
  std::printf("\n%-12s %-22s %s\n", "SIZE", "PATH", "HIGHEST RATE WITHOUT LOSS (sent/received at each rate)");
  for (const Size& s : sizes) {
    for (const std::string path : {"tcpros", "bridge"}) {
      double best = 0;
      std::string detail;
      for (double rate : s.rates) {
        const uint64_t n = static_cast<uint64_t>(rate * (quick ? 1.0 : 2.0));
        Run r = Measure(graph, root, path, "oneway", s.bytes, rate, n);
        const std::string got = r.receiver["count"];
        detail += std::to_string(int(rate)) + "Hz:" + got + "/" + std::to_string(n) +
                  (r.receiver.count("missed") ? "(missed " + r.receiver["missed"] + ")" : "") + " ";
        if (got == std::to_string(n)) {
          best = rate;
        } else {
          break;
        }
      }
      const std::string label = path == "tcpros" ? "ROS->ROS (TCPROS)" : "ROS->bridge->tether";
      std::printf("%-12s %-22s %6.0f Hz   (%s)\n", s.name, label.c_str(), best, detail.c_str());
      std::fflush(stdout);
      json_out += (first ? "" : ",") + std::string("{\"size\":\"") + s.name +
                  "\",\"path\":\"" + label + "\",\"max_rate_hz\":" + std::to_string(best) + "}";
      first = false;
    }
  }
  json_out += "]}";
  if (json) std::printf("%s\n", json_out.c_str());
  bridge->Stop();
  graph.StopMaster();
  std::string rm = "rm -rf " + root;
  (void)std::system(rm.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> a(argv + 1, argv + argc);
  if (!a.empty() && (a[0] == "-h" || a[0] == "--help")) {
    std::printf(
        "usage: ros_bridge_benchmark [--quick] [--json]\n"
        "Starts a private roscore, the bridge and ROS/tether peers; prints\n"
        "latency (p50/p99/max, us) and the highest loss-free rate for 64 B\n"
        "and 640x480 RGB messages, bridge against plain TCPROS. Takes a few\n"
        "minutes (--quick: about one).\n");
    return 0;
  }
  if (a.empty() || a[0].rfind("--", 0) == 0) return Orchestrate(a);
  const std::string role = a[0];
  if (role == "ros_pub") return RosPub(a, false);
  if (role == "ros_ping") return RosPub(a, true);
  if (role == "ros_sub") return RosSub(a, false);
  if (role == "ros_pong") return RosSub(a, true);
  if (role == "tether_sub") return TetherNode(a, false);
  if (role == "tether_pong") return TetherNode(a, true);
  std::fprintf(stderr, "unknown role %s\n", role.c_str());
  return 2;
}
