// net: main() of `tether net-bridge` (the tether CLI runs this binary by
// exec): parses the command line, loads the bridge config, runs the bridge
// until Ctrl-C/SIGTERM or --duration, printing its status as it goes.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "loop/signals.h"
#include "net/bridge.h"
#include "net/bridge_config.h"
#include "net/local_channels.h"
#include "shm/channel.h"
#include "transport/channel_set.h"
#include "transport/node_environment.h"
#include "transport/schema_registry.h"

namespace {

constexpr int kExitOk = 0, kExitFailure = 1, kExitUsage = 2;

constexpr char kHelp[] = R"(usage: tether net-bridge --config FILE [options]

Forwards chosen tether channels to and from other hosts over Cyclone DDS.
FILE (JSON; fields in net/bridge_config.capnp, example in net/README.md)
lists each channel with its direction ("out": this host's channel to DDS;
"in": DDS to a channel here, created from what the sender announces, or
checked against the existing one, a mismatch refused with both sides
named; listed both out and in, it is forwarded both ways and a message
that came in is never sent back out; listed twice in one direction, it is
an error), its QoS (reliability, historyDepth, deadlineMs), and the DDS domain,
partition and the one interface the bridge may use (default "lo": nothing
leaves this host unless an interface is named). CYCLONEDDS_URI is ignored.

Status (per channel: state, peers, messages, losses in the network and at
the sender, drops, missed deadlines, latency p50/p99/max from the original
send) is published on /tether/net/<name>/status every --status-interval and
printed every --print-interval and at the end. Runs as a node of a stack
(TETHER_ROOT and TETHER_INSTANCE from the launcher) or on its own.
Exits 0 after a clean stop, 1 if it could not start, 2 on a bad command line.

options:
  --config FILE            the bridge config (required)
  --root DIR               channel root (default: $TETHER_ROOT or /dev/shm/tether)
  --instance NAME          stack instance (default: $TETHER_INSTANCE or "default")
  --status-interval SEC    publish the status this often (default 1)
  --print-interval SEC     print the status this often; 0: only at the end (default 5)
  --duration SEC           stop after this long (default: until Ctrl-C)
  --check                  check the config and this host, print what it
                           forwards, exit: 1 if a run would fail (bad config,
                           no such interface, an out channel that cannot be
                           opened); an out channel not in the instance yet is
                           only noted (exit 0), as the stack that declares it
                           may create it before the bridge starts
  -h, --help               this help
)";

bool ParseSeconds(const std::string& flag, const std::string& value,
                  bool allow_zero, double* out) {
  double v = 0;
  if (!absl::SimpleAtod(value, &v) || !std::isfinite(v) || v < 0 ||
      (!allow_zero && v == 0) || v > 1e7) {
    std::cerr << "tether net-bridge: " << flag << " " << value
              << " is not a number of seconds" << (allow_zero ? " >= 0" : " > 0")
              << "; see tether net-bridge --help\n";
    return false;
  }
  *out = v;
  return true;
}

std::string ReadLine(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string HostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

// --check: the config (already loaded) and what a run would fail on that
// can be known without starting: the interface, and each out channel as the
// run opens it. An out channel that does not exist yet is only noted: the
// stack may create it before the bridge starts.
int Check(const tether::net::BridgeOptions& options,
          const tether::shm::ChannelOptions& channels) {
  using tether::net::Direction;
  std::cout << "net-bridge " << options.name << ": domain "
            << options.dds.domain << ", partition " << options.dds.partition
            << ", interface " << options.dds.interface << "\n";
  std::set<std::string> out, in;
  for (const auto& c : options.channels) {
    std::cout << "  " << tether::net::ToString(c.direction) << "  " << c.name
              << "  " << tether::net::ToString(c.reliability) << "\n";
    (c.direction == Direction::kOut ? out : in).insert(c.name);
  }
  for (const std::string& name : out) {
    if (in.count(name) != 0) {
      std::cout << "  " << name << " is forwarded both ways (out and in); "
                << "a message that came in is never sent back out\n";
    }
  }
  int code = kExitOk;
  if (absl::Status s = tether::net::CheckInterface(options.dds.interface);
      !s.ok()) {
    std::cerr << "tether net-bridge: " << s.message() << "\n";
    code = kExitFailure;
  }
  if (absl::Status s = tether::net::CheckPeers(options.dds.peers); !s.ok()) {
    std::cerr << "tether net-bridge: " << s.message() << "\n";
    code = kExitFailure;
  }
  for (const std::string& name : out) {
    tether::transport::SchemaRegistry schemas;
    absl::StatusOr<std::unique_ptr<tether::transport::ChannelSet>> set =
        tether::net::OpenChannelSet(channels, {name}, {}, schemas);
    if (set.ok()) continue;
    if (absl::IsNotFound(set.status())) {
      std::cerr << "tether net-bridge: note: " << set.status().message()
                << " (a run now would fail; --check passes it, since the "
                   "stack may create it before the bridge starts)\n";
    } else {
      std::cerr << "tether net-bridge: " << set.status().message() << "\n";
      code = kExitFailure;
    }
  }
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  std::string config_path, root, instance;
  double status_s = 1, print_s = 5, duration_s = 0;
  bool check = false;
  {
    // As a node of a stack: the launcher's root and instance.
    const tether::shm::ChannelOptions env =
        tether::transport::ReadNodeEnvironment(::getenv, "", "").channels;
    root = env.root;
    instance = env.instance;
  }
  std::vector<std::string> args(argv + 1, argv + argc);
  for (size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i], value;
    const bool has_eq = a.rfind("--", 0) == 0 && a.find('=') != std::string::npos;
    if (has_eq) {
      value = a.substr(a.find('=') + 1);
      a = a.substr(0, a.find('='));
    }
    auto take = [&](std::string* out) {
      if (has_eq) {
        *out = value;
        return true;
      }
      // "--config --check": the next flag is not --config's value.
      if (i + 1 >= args.size() || args[i + 1].rfind("--", 0) == 0) {
        std::cerr << "tether net-bridge: " << a << " needs a value"
                  << (i + 1 < args.size() ? " (" + args[i + 1] +
                                                " is the next flag)"
                                          : "")
                  << "; see tether net-bridge --help\n";
        return false;
      }
      *out = args[++i];
      return true;
    };
    std::string v;
    if (a == "-h" || a == "--help") {
      std::cout << kHelp;
      return kExitOk;
    } else if (a == "--check") {
      check = true;
    } else if (a == "--config") {
      if (!take(&config_path)) return kExitUsage;
    } else if (a == "--root") {
      if (!take(&root)) return kExitUsage;
    } else if (a == "--instance") {
      if (!take(&instance)) return kExitUsage;
    } else if (a == "--status-interval") {
      if (!take(&v) || !ParseSeconds(a, v, false, &status_s)) return kExitUsage;
    } else if (a == "--print-interval") {
      if (!take(&v) || !ParseSeconds(a, v, true, &print_s)) return kExitUsage;
    } else if (a == "--duration") {
      if (!take(&v) || !ParseSeconds(a, v, false, &duration_s)) return kExitUsage;
    } else {
      std::cerr << "tether net-bridge: unknown argument " << args[i]
                << "; see tether net-bridge --help\n";
      return kExitUsage;
    }
  }
  if (config_path.empty()) {
    std::cerr << "tether net-bridge: --config FILE is required; see tether "
                 "net-bridge --help\n";
    return kExitUsage;
  }
  absl::StatusOr<tether::net::BridgeOptions> options =
      tether::net::LoadBridgeConfig(config_path);
  if (!options.ok()) {
    std::cerr << "tether net-bridge: " << options.status().message() << "\n";
    return kExitFailure;
  }
  tether::shm::ChannelOptions channels;
  if (!root.empty()) channels.root = root;
  if (!instance.empty()) channels.instance = instance;
  if (check) return Check(*options, channels);
  if (absl::Status s = tether::net::CheckPeers(options->dds.peers); !s.ok()) {
    std::cerr << "tether net-bridge: warning: " << s.message()
              << "; DDS will not reach that peer until it does\n";
  }
  if (std::getenv("CYCLONEDDS_URI") != nullptr) {
    std::cerr << "tether net-bridge: CYCLONEDDS_URI is ignored; the bridge "
                 "config's domain, interface and peers decide\n";
  }

  tether::net::BridgeRuntime runtime;
  runtime.channels = channels;
  runtime.host = HostName();
  runtime.boot_id = ReadLine("/proc/sys/kernel/random/boot_id");
  runtime.status_interval =
      std::chrono::milliseconds(std::max<long long>(1, std::llround(status_s * 1000)));
  absl::StatusOr<std::unique_ptr<tether::loop::StopSignals>> stop =
      tether::loop::StopSignals::Install();
  if (!stop.ok()) {
    std::cerr << "tether net-bridge: " << stop.status().message() << "\n";
    return kExitFailure;
  }
  runtime.stop_fd = (*stop)->fd();
  absl::StatusOr<std::unique_ptr<tether::net::Bridge>> bridge =
      tether::net::Bridge::Create(*options, runtime);
  if (!bridge.ok()) {
    std::cerr << "tether net-bridge: " << bridge.status().message() << "\n";
    return kExitFailure;
  }
  std::cout << "net-bridge " << options->name << ": forwarding "
            << options->channels.size() << " channel(s) in "
            << runtime.channels.root << "/" << runtime.channels.instance
            << " over DDS domain " << options->dds.domain << " on "
            << options->dds.interface << "; status on "
            << tether::net::StatusChannelName(options->name) << std::endl;

  std::thread timer;
  std::atomic<bool> ended{false};
  if (duration_s > 0) {
    tether::net::Bridge* b = bridge->get();
    timer = std::thread([b, duration_s, &ended] {
      const auto end = std::chrono::steady_clock::now() +
                       std::chrono::duration<double>(duration_s);
      while (!ended && std::chrono::steady_clock::now() < end) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      b->Exit();
    });
  }
  const auto print_every = std::chrono::duration<double>(print_s);
  auto last_print = std::chrono::steady_clock::now();
  (*bridge)->Run([&](const tether::net::BridgeSnapshot& s) {
    const auto now = std::chrono::steady_clock::now();
    if (print_s > 0 && now - last_print >= print_every) {
      last_print = now;
      std::cout << tether::net::FormatSnapshot(s) << std::flush;
    }
  });
  ended = true;
  if (timer.joinable()) timer.join();
  std::cout << "=== final ===\n"
            << tether::net::FormatSnapshot((*bridge)->Snapshot()) << std::flush;
  return kExitOk;
}
