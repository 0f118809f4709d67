// ros_bridge: main() of the bag commands the tether CLI runs here (it execs
// this binary for `tether replay IN.bag`):
//   ros_bag replay IN.bag [options]   play a ROS bag into tether channels
//   ros_bag info IN.bag               what is in it
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "loop/signals.h"
#include "ros_bridge/bag_replay.h"
#include "ros_bridge/bridge_config.h"
#include "ros_bridge/rosbag_reader.h"

namespace {

constexpr char kUsage[] =
    "usage: tether replay IN.bag [options] [/topic:=/channel ...]\n"
    "\n"
    "Plays a ROS 1 bag into tether channels, in real time (or --rate), as\n"
    "ROS envelopes: one channel per topic (named like the topic, or remapped,\n"
    "or under --prefix), made big enough for the bag's largest message, each\n"
    "message with its type, md5sum, definition, callerid, latching and bag\n"
    "time. A running `tether ros-bridge` publishes them into ROS again.\n"
    "Ctrl-C stops it. No ROS master is needed.\n"
    "\n"
    "  --rate R          speed factor (default 1; 0: as fast as possible)\n"
    "  --start S         skip the first S seconds of the bag\n"
    "  --end S           stop S seconds into the bag\n"
    "  --topics A,B      only these topics\n"
    "  --prefix P        channel names under P (/ros: /scan -> /ros/scan)\n"
    "  --depth N         queue depth of channels it creates (default 16)\n"
    "  --root DIR        tether channel root ($TETHER_ROOT, /dev/shm/tether)\n"
    "  --instance NAME   tether instance ($TETHER_INSTANCE, default)\n"
    "\n"
    "usage: tether replay --info IN.bag   lists the bag's topics\n";

int Usage(const std::string& why) {
  std::fprintf(stderr, "tether replay: %s\n(tether replay IN.bag --help)\n",
               why.c_str());
  return 2;
}

bool Number(const std::string& text, double* out) {
  return absl::SimpleAtod(text, out) && *out >= 0;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tether::ros_bridge;
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && args[0] == "replay") args.erase(args.begin());
  BagReplayOptions options;
  options.channels = ChannelOptionsFromEnvironment();
  std::string bag_path;
  bool info = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= args.size()) return false;
      *out = args[++i];
      return true;
    };
    std::string v;
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--info") {
      info = true;
    } else if (a == "--rate" || a == "--start" || a == "--end") {
      double d = 0;
      if (!value(&v) || !Number(v, &d)) return Usage(a + " needs a number >= 0");
      (a == "--rate" ? options.rate : a == "--start" ? options.start_s : options.end_s) = d;
    } else if (a == "--topics") {
      if (!value(&v)) return Usage("--topics needs a list");
      for (absl::string_view t : absl::StrSplit(v, ',', absl::SkipEmpty())) {
        options.topics.insert(std::string(t));
      }
    } else if (a == "--prefix") {
      if (!value(&options.prefix) || options.prefix.empty() || options.prefix[0] != '/') {
        return Usage("--prefix needs an absolute name such as /ros");
      }
      if (options.prefix.back() == '/') options.prefix.pop_back();
    } else if (a == "--depth") {
      if (!value(&v) || !absl::SimpleAtoi(v, &options.queue_depth) ||
          options.queue_depth < 2) {
        return Usage("--depth needs a power of two >= 2");
      }
    } else if (a == "--root") {
      if (!value(&options.channels.root)) return Usage("--root needs a directory");
    } else if (a == "--instance") {
      if (!value(&options.channels.instance)) return Usage("--instance needs a name");
    } else if (a.find(":=") != std::string::npos) {
      options.remap[a.substr(0, a.find(":="))] = a.substr(a.find(":=") + 2);
    } else if (a.rfind("--", 0) == 0) {
      return Usage("unknown option " + a);
    } else if (bag_path.empty()) {
      bag_path = a;
    } else {
      return Usage("one bag at a time (got " + bag_path + " and " + a + ")");
    }
  }
  if (bag_path.empty()) return Usage("which bag? tether replay IN.bag");
  auto bag = OpenRosBag(bag_path);
  if (!bag.ok()) {
    std::fprintf(stderr, "tether replay: %s\n", std::string(bag.status().message()).c_str());
    return 1;
  }
  const tether::ros1msg::BagSummary summary = (*bag)->summary();
  if (info) {
    std::printf("%s: %llu messages, %.3f s\n", bag_path.c_str(),
                static_cast<unsigned long long>(summary.message_count),
                (summary.end_time_ns - summary.start_time_ns) / 1e9);
    for (const auto& c : (*bag)->connections()) {
      std::printf("  %-30s %-30s %6llu msgs  max %u B  %s%s\n", c.topic.c_str(),
                  c.type.c_str(), static_cast<unsigned long long>(c.message_count),
                  c.max_data_size, c.callerid.c_str(), c.latching ? " latched" : "");
    }
    return 0;
  }
  auto signals = tether::loop::StopSignals::Install();
  if (!signals.ok()) {
    std::fprintf(stderr, "tether replay: %s\n", std::string(signals.status().message()).c_str());
    return 1;
  }
  options.stop_fd = (*signals)->fd();
  options.progress = &std::cerr;
  auto result = ReplayBag(**bag, options);
  if (!result.ok()) {
    std::fprintf(stderr, "tether replay: %s\n", std::string(result.status().message()).c_str());
    return 1;
  }
  std::fprintf(stderr,
               "tether replay: %llu messages on %u channels in %.1f s%s; %llu "
               "dropped (no free slot)\n",
               static_cast<unsigned long long>(result->messages), result->channels,
               result->seconds, result->stopped ? " (stopped)" : "",
               static_cast<unsigned long long>(result->dropped));
  return 0;
}
