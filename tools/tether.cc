// tools: main() of the `tether` command. Holds the subcommand table; each
// command turns its parsed arguments into its library's options struct.
#include <iostream>
#include <string>
#include <vector>

#include "tools/arg_parser.h"
#include "tools/cli.h"
#include "tools/doctor.h"

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

// Every command of the CLI. Later commands (launch, list, echo, pub, stat,
// record, replay, bench, clean, demo) add a row here.
constexpr Command kCommands[] = {
    {"doctor",
     "check this machine: io_uring, wake backend, RT kernel, limits, "
     "/dev/shm, CPUs",
     &DoctorParser, &RunDoctor},
};

}  // namespace
}  // namespace tether::tools

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
  return tether::tools::RunCli(tether::tools::kCommands, args, std::cout,
                               std::cerr);
}
