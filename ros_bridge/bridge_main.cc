// ros_bridge: main() of `tether ros-bridge` (the tether CLI execs this
// binary; it also runs as a node of a stack config, taking its channels'
// root and instance from $TETHER_ROOT / $TETHER_INSTANCE like every node).
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "loop/signals.h"
#include "ros_bridge/bridge.h"
#include "ros_bridge/bridge_config.h"

namespace {

constexpr char kUsage[] =
    "usage: tether ros-bridge [--pair SPEC]... [--prefix SPEC]... [options]\n"
    "\n"
    "Joins a ROS 1 master as one ROS node and forwards messages between ROS\n"
    "topics and tether channels, in both directions, with no compiled ROS\n"
    "types: channels carry RosEnvelope (the ROS bytes plus type, md5sum,\n"
    "full definition, latching, callerid, receive time), so any type works,\n"
    "custom ones included; common types can be typed channels instead\n"
    "(type=geometry_msgs/Twist). Latched topics stay latched both ways; a\n"
    "forwarded message is never echoed back (also with several bridges); new\n"
    "topics under a prefix are bridged as they appear; the master going away\n"
    "or restarting is survived (see the status channel\n"
    "/tether/ros_bridge/<node>/status: `tether echo` it). Ctrl-C stops it.\n"
    "\n"
    "  --pair ROS=CHANNEL[,dir=both|to-tether|to-ros][,type=pkg/Name][,latch]\n"
    "         [,max_size=BYTES][,depth=N]\n"
    "                       bridge one topic (CHANNEL empty: same name)\n"
    "  --prefix ROS=TETHER[,dir=...]\n"
    "                       bridge every topic under ROS (e.g. /sim=/ros/sim)\n"
    "  --config FILE        pairs, prefixes and settings as JSON\n"
    "                       (ros_bridge/bridge_config.capnp; see\n"
    "                       ros_bridge/README.md)\n"
    "  --master URI         ROS master, http://HOST:PORT (default:\n"
    "                       $ROS_MASTER_URI)\n"
    "  --node-name NAME     ROS node name (default tether_bridge)\n"
    "  --root DIR           tether channel root (default $TETHER_ROOT or\n"
    "                       /dev/shm/tether)\n"
    "  --instance NAME      tether instance (default $TETHER_INSTANCE or\n"
    "                       default)\n"
    "  --max-size BYTES     largest message of a channel the bridge creates\n"
    "                       (default 1048576)\n"
    "  --depth N            queue depth of a channel the bridge creates\n"
    "                       (default 16)\n"
    "  --no-status-channel  do not publish the status channel\n"
    "\n"
    "Set ROS_IP (or ROS_HOSTNAME) as for any ROS node.\n";

bool IsFlag(const std::string& arg) {
  return arg.rfind("--", 0) == 0 || arg == "-h";
}

int Usage(const std::string& why) {
  std::fprintf(stderr, "tether ros-bridge: %s\n(tether ros-bridge --help)\n",
               why.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tether::ros_bridge;
  BridgeOptions options;
  options.channels = ChannelOptionsFromEnvironment();
  std::vector<std::string> args(argv + 1, argv + argc);
  std::vector<std::string> pairs, prefixes;
  std::string config;
  bool master_given = false;
  std::set<std::string> given;  // the value flags given, which win over --config
  for (size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i], value;
    const bool has_inline = a.rfind("--", 0) == 0 && a.find('=') != std::string::npos &&
                            a.rfind("--pair=", 0) != 0 && a.rfind("--prefix=", 0) != 0;
    if (has_inline) {
      value = a.substr(a.find('=') + 1);
      a = a.substr(0, a.find('='));
    } else if (a.rfind("--pair=", 0) == 0 || a.rfind("--prefix=", 0) == 0) {
      value = a.substr(a.find('=') + 1);
      a = a.substr(0, a.find('='));
    }
    auto take = [&](std::string* out) {
      if (!value.empty() || has_inline) {
        *out = value;
        return true;
      }
      // "--pair --root DIR": the next flag is not --pair's value.
      if (i + 1 >= args.size() || IsFlag(args[i + 1])) return false;
      *out = args[++i];
      return true;
    };
    std::string v;
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--no-status-channel") {
      options.status_channel = false;
    } else if (a == "--pair" || a == "--prefix" || a == "--config" ||
               a == "--master" || a == "--node-name" || a == "--root" ||
               a == "--instance" || a == "--max-size" || a == "--depth") {
      if (!take(&v)) {
        return Usage(a + " needs a value" +
                     (i + 1 < args.size() ? " (" + args[i + 1] +
                                                " is the next flag)"
                                          : ""));
      }
      if (a == "--pair") pairs.push_back(v);
      if (a == "--prefix") prefixes.push_back(v);
      if (a == "--config") config = v;
      if (a == "--master") {
        options.master_uri = v;
        master_given = true;
      }
      if (a == "--node-name") options.node_name = v;
      if (a == "--root") options.channels.root = v;
      if (a == "--instance") options.channels.instance = v;
      if (a == "--max-size" &&
          (!absl::SimpleAtoi(v, &options.max_size) || options.max_size < 64)) {
        return Usage("--max-size " + v + " is not a size in bytes >= 64");
      }
      if (a == "--depth" &&
          (!absl::SimpleAtoi(v, &options.queue_depth) ||
           options.queue_depth < 2 ||
           (options.queue_depth & (options.queue_depth - 1)) != 0)) {
        return Usage("--depth " + v + " is not a power of two >= 2");
      }
      given.insert(a);
    } else {
      return Usage("unknown argument " + args[i]);
    }
  }
  if (!config.empty()) {
    // Flags win over the file: keep what they set, load, put it back.
    const BridgeOptions flags = options;
    if (absl::Status s = LoadBridgeConfig(config, &options); !s.ok()) {
      return Usage(std::string(s.message()));
    }
    if (master_given) options.master_uri = flags.master_uri;
    if (given.count("--node-name")) options.node_name = flags.node_name;
    if (given.count("--max-size")) options.max_size = flags.max_size;
    if (given.count("--depth")) options.queue_depth = flags.queue_depth;
  }
  // ros::init aborts the process on a name it cannot take (the file's
  // nodeName is checked as it is read).
  if (absl::Status s = CheckNodeName(options.node_name, "--node-name");
      given.count("--node-name") && !s.ok()) {
    return Usage(std::string(s.message()));
  }
  for (const std::string& p : pairs) {
    if (absl::Status s = AddPairSpec(p, &options); !s.ok()) {
      return Usage(std::string(s.message()));
    }
  }
  for (const std::string& p : prefixes) {
    if (absl::Status s = AddPrefixSpec(p, &options); !s.ok()) {
      return Usage(std::string(s.message()));
    }
  }
  if (options.pairs.empty() && options.prefixes.empty()) {
    if (!config.empty()) {
      return Usage("the config file " + config +
                   " bridges nothing: it has no \"pairs\" or \"prefixes\" "
                   "(is it a net-bridge config?); list them in it "
                   "(ros_bridge/bridge_config.capnp) or give --pair/--prefix");
    }
    return Usage("nothing to bridge: give --pair, --prefix or --config");
  }
  // roscpp aborts the process (SIGTRAP) on a master URI it cannot split:
  // check the one it will use, from where it comes.
  std::string master = options.master_uri, master_origin;
  if (master_given) {
    master_origin = "--master";
  } else if (!master.empty()) {
    master_origin = config + ": master";
  } else if (const char* env = std::getenv("ROS_MASTER_URI"); env != nullptr) {
    master = env;
    master_origin = "ROS_MASTER_URI (environment)";
  } else {
    return Usage("no ROS master: set ROS_MASTER_URI or pass --master URI");
  }
  if (absl::Status s = CheckMasterUri(master, master_origin); !s.ok()) {
    return Usage(std::string(s.message()));
  }

  auto signals = tether::loop::StopSignals::Install();
  if (!signals.ok()) {
    std::fprintf(stderr, "tether ros-bridge: %s\n",
                 std::string(signals.status().message()).c_str());
    return 1;
  }
  ::signal(SIGPIPE, SIG_IGN);
  options.stop_fd = (*signals)->fd();
  options.log = &std::cerr;
  auto bridge = Bridge::Create(std::move(options));
  if (!bridge.ok()) {
    std::fprintf(stderr, "tether ros-bridge: %s\n",
                 std::string(bridge.status().message()).c_str());
    return 1;
  }
  const int code = (*bridge)->Run();
  bridge->reset();
  return code;
}
