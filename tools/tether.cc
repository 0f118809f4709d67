// tools: main() of the `tether` command. Holds the subcommand table; each
// command turns its parsed arguments into its library's options struct.
#include <signal.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "loop/signals.h"
#include "tools/arg_parser.h"
#include "tools/clean.h"
#include "tools/cli.h"
#include "tools/channel_tool.h"
#include "tools/doctor.h"
#include "tools/doctor_rt_probe.h"
#include "tools/echo.h"
#include "tools/launcher.h"
#include "tools/list.h"
#include "tools/net_bridge_command.h"
#include "tools/package_binary.h"
#include "tools/log_command.h"
#include "tools/pub.h"
#include "tools/record.h"
#include "tools/replay.h"
#include "tools/stat.h"
#include "transport/channel_handle.h"
#include "transport/node_environment.h"

extern char** environ;

namespace tether::tools {
namespace {

ArgParser DoctorParser() {
  ArgParser parser(
      "tether doctor",
      "Checks this machine for what tether needs and prints each check as\n"
      "OK, WARN or FAIL with the fix: io_uring and its futex ops, the wake\n"
      "backend a loop would use, PREEMPT_RT, real-time and locked-memory\n"
      "limits, /dev/shm, CPU isolation and frequency governor. Limits and\n"
      "capabilities are those of the user running the doctor.\n"
      "--rt-probe measures whether io_uring wait timeouts are hard timers\n"
      "for real-time waiters here (about 1 s of SCHED_FIFO load on one CPU)\n"
      "and stores the verdict for this boot; loops then choose their\n"
      "deadline mode from it.\n"
      "Exits 1 if any check FAILs, else 0.");
  parser.AddOption("root", "DIR",
                   "the channels' root whose filesystem and instance folders "
                   "are checked (default: $TETHER_ROOT if set, else "
                   "/dev/shm/tether)",
                   "");
  parser.AddFlag("json", "print the report as one JSON object");
  parser.AddFlag("rt-probe",
                 "run the real-time deadline probe (needs SCHED_FIFO) and "
                 "store its verdict for this boot");
  return parser;
}

int RunDoctor(const ParsedArgs& args, std::ostream& out, std::ostream& err) {
  DoctorOptions options;  // The real /proc, /sys and /dev/shm.
  // The root the stack's tools use (--root, else $TETHER_ROOT): its
  // filesystem (the nearest folder of it that exists) and its instances.
  std::string root = args.HasOption("root") ? args.Option("root") : "";
  if (root.empty() && ::getenv("TETHER_ROOT") != nullptr) {
    root = ::getenv("TETHER_ROOT");
  }
  if (!root.empty() && root != options.tether_root) {
    options.tether_root = root;
    std::error_code ec;
    std::filesystem::path fs_path = root;
    while (!fs_path.empty() && !std::filesystem::is_directory(fs_path, ec) &&
           fs_path != fs_path.parent_path()) {
      fs_path = fs_path.parent_path();
    }
    options.shm_path = fs_path.empty() ? "/" : fs_path.string();
  }
  DoctorInputs inputs = GatherDoctorInputs(options);
  std::vector<CheckResult> results = RunDoctorChecks(inputs);
  if (args.Flag("rt-probe")) {
    err << "tether doctor: rt-probe: about 1 s of a SCHED_FIFO 40 waiter "
           "beside a SCHED_FIFO 20 load on one CPU...\n";
    results.push_back(RunRtProbeCheck(&inputs.kernel, RtProbeCheckOptions{}));
  }
  results.push_back(CheckDeadlineTimer(inputs.kernel));
  out << (args.Flag("json") ? FormatDoctorJson(inputs, results)
                            : FormatDoctorText(inputs, results));
  return AnyFailed(results) ? kExitFailure : kExitOk;
}

ArgParser ListParser() {
  ArgParser parser(
      "tether list",
      "Lists the channels of a stack instance: message type, max size, queue\n"
      "depth, rate, messages sent so far, registered publishers and pinning\n"
      "readers, and the shared memory each takes. Each channel's memory is\n"
      "checked: a corrupt one is shown with what is wrong and where. Opening\n"
      "a channel also reclaims what dead processes left in it. Exits 1 if a\n"
      "channel cannot be read or is corrupt.");
  AddRootInstanceOptions(parser);
  parser.AddFlag("json", "print one JSON object");
  return parser;
}

int RunList(const ParsedArgs& args, std::ostream& out, std::ostream& err) {
  shm::ChannelOptions where;
  if (!RootInstanceFrom(args, "tether list", &where, err)) return kExitUsage;
  absl::StatusOr<std::vector<transport::ChannelSummary>> channels =
      transport::ListChannels(where);
  if (!channels.ok()) {
    err << "tether list: " << channels.status().message() << "\n";
    return kExitFailure;
  }
  out << (args.Flag("json") ? FormatChannelJson(*channels)
                            : FormatChannelTable(*channels));
  // A channel that cannot be read or is corrupt is a failure, not a row.
  for (const transport::ChannelSummary& c : *channels) {
    if (!c.error.empty() || !c.corruption.empty()) return kExitFailure;
  }
  return kExitOk;
}

ArgParser LaunchParser() {
  ArgParser parser(
      "tether launch",
      absl::StrCat(
          "Starts a stack: creates every channel of the <stack> config, then\n"
          "starts its nodes in startAfter order, each with its scheduling,\n"
          "CPUs, user and environment (plus ",
          transport::kEnvRoot, ", ", transport::kEnvInstance, ",\n",
          transport::kEnvNode, " and ", transport::kEnvStack,
          "). Node output is prefixed with [node].\n"
          "Nodes are restarted by their restart policy with exponential\n"
          "backoff; a node that keeps failing is given up after\n"
          "restart.maxRestarts. Ctrl-C or SIGTERM stops the nodes in reverse\n"
          "start order (SIGTERM, then SIGKILL after --kill-timeout); a second\n"
          "Ctrl-C kills the launcher, and its nodes with it. The stack's\n"
          "status is published on the channel /tether/launcher/status.\n"
          "Exits 1 if a node failed for good (or never started), else 0."));
  parser.AddPositional("stack", "the stack config (JSON)");
  AddRootInstanceOptions(parser);
  parser.AddOption("duration", "SECONDS",
                   "stop the stack after this long (default: run until "
                   "Ctrl-C or every node has ended)");
  parser.AddOption("kill-timeout", "SECONDS",
                   "at shutdown, SIGKILL a node this long after its SIGTERM",
                   "2");
  parser.AddOption("status-json", "PATH",
                   "keep the stack's status as JSON in this file");
  parser.AddOption("workdir", "DIR",
                   "working directory of the nodes, base of relative "
                   "commands (default: the current directory)");
  parser.AddOption("schemas", "FILES",
                   "comma-separated schema files for message types the "
                   "stack's own \"schemas\" do not declare: .capnp files, "
                   "or made with capnp compile -o- x.capnp > x.schema");
  parser.AddFlag("no-status-channel", "do not publish /tether/launcher/status");
  return parser;
}

// Parses --name SECONDS into milliseconds (>= 0, or > 0 if `positive`).
bool ParseSeconds(const ParsedArgs& args, const char* name, bool positive,
                  std::chrono::milliseconds* out, std::ostream& err) {
  double seconds = 0;
  if (!absl::SimpleAtod(args.Option(name), &seconds) ||
      !std::isfinite(seconds) || seconds < 0 || (positive && seconds == 0) ||
      seconds > 1e9) {
    err << "tether launch: --" << name << " " << args.Option(name)
        << " is not a number of seconds" << (positive ? " > 0" : " >= 0")
        << "; see tether launch --help\n";
    return false;
  }
  *out = std::chrono::milliseconds(std::llround(seconds * 1000));
  return true;
}

int RunLaunch(const ParsedArgs& args, std::ostream& out, std::ostream& err) {
  LaunchOptions options;
  options.stack_path = args.Positional("stack");
  if (!RootInstanceFrom(args, "tether launch", &options.channels, err)) return kExitUsage;
  options.working_directory = args.Option("workdir");
  options.status_json_path = args.Option("status-json");
  options.status_channel = !args.Flag("no-status-channel");
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    options.base_env.emplace_back(*e);
  }
  if (args.HasOption("duration")) {
    std::chrono::milliseconds duration;
    if (!ParseSeconds(args, "duration", true, &duration, err)) {
      return kExitUsage;
    }
    options.duration = duration;
  }
  if (!ParseSeconds(args, "kill-timeout", false, &options.kill_timeout, err)) {
    return kExitUsage;
  }
  for (absl::string_view file :
       absl::StrSplit(args.Option("schemas"), ',', absl::SkipEmpty())) {
    options.schema_files.emplace_back(file);
  }
  loop::StopSignalOptions stop_options;
  stop_options.signals = {SIGINT, SIGTERM, SIGHUP};
  absl::StatusOr<std::unique_ptr<loop::StopSignals>> stop =
      loop::StopSignals::Install(stop_options);
  if (!stop.ok()) {
    err << "tether launch: " << stop.status().message() << "\n";
    return kExitFailure;
  }
  options.stop_fd = (*stop)->fd();
  // A closed output pipe (`| head`) must not take the stack down with the
  // launcher; nodes get default signal dispositions back.
  ::signal(SIGPIPE, SIG_IGN);
  // No compiled-in message types: the launcher learns the stack's types
  // from its schema files and channels (tools/launch_plan.h).
  absl::StatusOr<std::unique_ptr<Launcher>> launcher = Launcher::Create(
      std::move(options), std::make_unique<transport::SchemaRegistry>(), out,
      err);
  if (!launcher.ok()) {
    err << "tether launch: " << launcher.status().message() << "\n";
    return kExitFailure;
  }
  return (*launcher)->Run().exit_code;
}

// Listed for `tether --help`; main() execs the package binary before the
// table is consulted, so these only describe it.
ArgParser RosBridgeParser() {
  return ArgParser(
      "tether ros-bridge",
      "Runs the ROS 1 bridge (bazel-bin/ros_bridge/ros_bridge, built by\n"
      "./tether ros-bridge); `tether ros-bridge --help` shows its options.");
}

int RunPackageBinaryStub(const ParsedArgs&, std::ostream&, std::ostream& err) {
  err << "tether: this command runs its package's binary; see its --help\n";
  return kExitFailure;
}

// Every command of the CLI. Later commands (launch, list, echo, pub, stat,
// record, replay, bench, clean, demo) add a row here.
constexpr Command kCommands[] = {
    {"doctor",
     "check this machine: io_uring, wake backend, RT kernel, limits, "
     "/dev/shm, CPUs",
     &DoctorParser, &RunDoctor},
    {"list", "list the channels of a stack: type, size, traffic, endpoints",
     &ListParser, &RunList},
    {"launch",
     "start a stack: channels, then nodes in order, with restarts and "
     "clean shutdown",
     &LaunchParser, &RunLaunch},
    {"echo", "print a channel's messages as JSON lines, with losses",
     &EchoParser, &RunEchoCommand},
    {"pub", "publish a JSON message on a channel, once or at a rate",
     &PubParser, &RunPubCommand},
    {"stat", "live rate, loss and latency of channels, with a summary",
     &StatParser, &RunStatCommand},
    {"clean", "remove channels no live process uses, and creators' leftovers",
     &CleanParser, &RunCleanCommand},
    {"ros-bridge",
     "bridge ROS 1 topics and tether channels, both ways (any message type)",
     &RosBridgeParser, &RunPackageBinaryStub},
    {"net-bridge",
     "forward chosen channels to and from other hosts over Cyclone DDS",
     &NetBridgeParser, &RunNetBridgeCommand},
    {"record", "record a stack's channels into an MCAP log, losses included",
     &RecordParser, &RunRecordCommand},
    {"replay", "play a log back into shared memory in real time",
     &ReplayParser, &RunReplayCommand},
    {"log", "log tools: info, cat, check, recover, plot (tether log --help)",
     &LogParser, &RunLogCommand},
};

}  // namespace
}  // namespace tether::tools

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
  if (std::optional<int> code =
          tether::tools::MaybeExecPackageBinary(args, std::cerr)) {
    return *code;
  }
  // The bridge parses its own arguments (and --help): hand them over whole.
  if (!args.empty() && args[0] == "net-bridge") {
    return tether::tools::ExecNetBridge(
        std::span<const std::string>(args).subspan(1), std::cerr);
  }
  // `tether log <command>` has a command table of its own.
  if (!args.empty() && args[0] == "log") {
    return tether::tools::RunLogCli(std::span(args).subspan(1), std::cout,
                                    std::cerr);
  }
  return tether::tools::RunCli(tether::tools::kCommands, args, std::cout,
                               std::cerr);
}
