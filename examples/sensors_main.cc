// examples: main() of the sensors node (encoders, motor current, IMU).
// Usage: sensors [--config=FILE] [--rate_hz=1000] [--seed=N]
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "examples/demo_schemas.h"
#include "examples/sensors.h"
#include "loop/node_main.h"

ABSL_FLAG(std::string, config, "",
          "stack config (default: the stack the launcher started this node "
          "from, else examples/config/example_stack.json)");
ABSL_FLAG(double, rate_hz, 1000, "sampling rate");
ABSL_FLAG(uint64_t, seed, 1, "seed of the sensor noise");

int main(int argc, char** argv) {
  using namespace tether::examples;
  using tether::loop::FailNode;
  absl::ParseCommandLine(argc, argv);
  const tether::transport::NodeEnvironment env =
      tether::loop::NodeEnvironmentFromProcess("sensors", kDemoStackPath,
                                               absl::GetFlag(FLAGS_config));
  auto process = tether::loop::NodeMain::Start(env, &RegisterDemoSchemas);
  if (!process.ok()) return FailNode(env.node_name, process.status());
  SensorsOptions options;
  options.rate_hz = absl::GetFlag(FLAGS_rate_hz);
  options.seed = absl::GetFlag(FLAGS_seed);
  auto node = SensorsNode::Create((*process)->loop(), options);
  if (!node.ok()) return FailNode(env.node_name, node.status());
  const int code = (*process)->Run();
  const SensorsStats& s = (*node)->stats();
  std::printf(
      "sensors: %llu samples (%llu late, %llu without plant state), %llu "
      "failed sends\n",
      (unsigned long long)s.samples, (unsigned long long)s.missed_samples,
      (unsigned long long)s.skipped_samples,
      (unsigned long long)s.publish_failures);
  return code;
}
