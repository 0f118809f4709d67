// examples: main() of the controller node (1 kHz trajectory tracking).
// Usage: controller [--config=FILE] [--gains=FILE] [--trajectory=figure8]
// The mode comes from $TETHER_CONTROLLER_MODE (position | velocity).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "examples/controller.h"
#include "examples/demo_schemas.h"
#include "examples/gains_file.h"
#include "examples/summary.h"
#include "loop/node_main.h"

ABSL_FLAG(std::string, config, "",
          "stack config (default: the stack the launcher started this node "
          "from, else examples/config/example_stack.json)");
ABSL_FLAG(std::string, gains, "",
          "JSON file of gains (kx, ky, ktheta, wheel_kp, wheel_ki, "
          "feedforward); empty: built-in defaults");
ABSL_FLAG(std::string, trajectory, "figure8", "figure8 or circle");
ABSL_FLAG(double, size_m, 1.0, "figure-eight half length / circle radius");
ABSL_FLAG(double, period_s, 12.0, "time for one figure");

int main(int argc, char** argv) {
  using namespace tether::examples;
  using tether::loop::FailNode;
  absl::ParseCommandLine(argc, argv);
  const tether::transport::NodeEnvironment env =
      tether::loop::NodeEnvironmentFromProcess("controller", kDemoStackPath,
                                               absl::GetFlag(FLAGS_config));

  ControllerOptions options;
  if (const char* mode = std::getenv("TETHER_CONTROLLER_MODE");
      mode != nullptr && mode[0] != '\0' &&
      !ParseControllerMode(mode, &options.mode)) {
    return FailNode(env.node_name,
                    absl::InvalidArgumentError(absl::StrCat(
                        "TETHER_CONTROLLER_MODE=", mode,
                        " is not a mode; use position or velocity")));
  }
  if (!ParseTrajectoryShape(absl::GetFlag(FLAGS_trajectory),
                            &options.trajectory.shape)) {
    return FailNode(env.node_name,
                    absl::InvalidArgumentError(absl::StrCat(
                        "--trajectory=", absl::GetFlag(FLAGS_trajectory),
                        " is not a trajectory; use figure8 or circle")));
  }
  options.trajectory.size_m = absl::GetFlag(FLAGS_size_m);
  options.trajectory.period_s = absl::GetFlag(FLAGS_period_s);
  if (const std::string gains = absl::GetFlag(FLAGS_gains); !gains.empty()) {
    absl::StatusOr<ControllerGains> loaded = LoadControllerGains(gains);
    if (!loaded.ok()) return FailNode(env.node_name, loaded.status());
    options.gains = *loaded;
  }

  auto process = tether::loop::NodeMain::Start(env, &RegisterDemoSchemas);
  if (!process.ok()) return FailNode(env.node_name, process.status());
  auto node = ControllerNode::Create((*process)->loop(), options);
  if (!node.ok()) return FailNode(env.node_name, node.status());
  const int code = (*process)->Run();
  std::printf("controller: %s; %llu cycles paused for a stale estimate; "
              "%llu cycles driven by velocity commands; %llu failed sends\n",
              FormatTracking((*node)->summary()).c_str(),
              (unsigned long long)(*node)->stale_cycles(),
              (unsigned long long)(*node)->teleop_cycles(),
              (unsigned long long)(*node)->publish_failures());
  return code;
}
