// tools: main() of the `tether` command. Holds the subcommand table; each
// command turns its parsed arguments into its library's options struct.
#include <iostream>
#include <string>
#include <vector>

#include "tools/arg_parser.h"
#include "tools/cli.h"
#include "tools/doctor.h"
#include "tools/list.h"
#include "transport/channel_handle.h"

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
      "Exits 1 if any check FAILs, else 0.");
  parser.AddFlag("json", "print the report as one JSON object");
  return parser;
}

int RunDoctor(const ParsedArgs& args, std::ostream& out, std::ostream&) {
  const DoctorOptions options;  // The real /proc, /sys and /dev/shm.
  const DoctorInputs inputs = GatherDoctorInputs(options);
  const std::vector<CheckResult> results = RunDoctorChecks(inputs);
  out << (args.Flag("json") ? FormatDoctorJson(inputs, results)
                            : FormatDoctorText(inputs, results));
  return AnyFailed(results) ? kExitFailure : kExitOk;
}

// Options every command that touches channels shares.
void AddChannelOptions(ArgParser& parser) {
  parser.AddOption("root", "DIR", "directory holding channel instances",
                   "/dev/shm/tether");
  parser.AddOption("instance", "NAME", "stack instance (a folder under root)",
                   "default");
}

shm::ChannelOptions ChannelOptionsFrom(const ParsedArgs& args) {
  shm::ChannelOptions options;
  options.root = args.Option("root");
  options.instance = args.Option("instance");
  return options;
}

ArgParser ListParser() {
  ArgParser parser(
      "tether list",
      "Lists the channels of a stack instance: message type, max size, queue\n"
      "depth, rate, messages sent so far, registered publishers and pinning\n"
      "readers, and the shared memory each takes. Opening a channel also\n"
      "reclaims what dead processes left in it.");
  AddChannelOptions(parser);
  parser.AddFlag("json", "print one JSON object");
  return parser;
}

int RunList(const ParsedArgs& args, std::ostream& out, std::ostream& err) {
  absl::StatusOr<std::vector<transport::ChannelSummary>> channels =
      transport::ListChannels(ChannelOptionsFrom(args));
  if (!channels.ok()) {
    err << "tether list: " << channels.status().message() << "\n";
    return kExitFailure;
  }
  out << (args.Flag("json") ? FormatChannelJson(*channels)
                            : FormatChannelTable(*channels));
  return kExitOk;
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
};

}  // namespace
}  // namespace tether::tools

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
  return tether::tools::RunCli(tether::tools::kCommands, args, std::cout,
                               std::cerr);
}
