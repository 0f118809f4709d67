// examples: main() of the actuator node (motor drives + the simulated
// plant). Usage: actuator [--config=FILE] [--substeps=N]
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "examples/actuator.h"
#include "examples/demo_schemas.h"
#include "loop/node_main.h"

ABSL_FLAG(std::string, config, "",
          "stack config (default: the stack the launcher started this node "
          "from, else examples/config/example_stack.json)");
ABSL_FLAG(int, substeps, 4, "physics integration steps per 1 ms period");
ABSL_FLAG(int, command_timeout_ms, 20,
          "apply zero torque when the last command is older than this");

int main(int argc, char** argv) {
  using namespace tether::examples;
  using tether::loop::FailNode;
  absl::ParseCommandLine(argc, argv);
  const tether::transport::NodeEnvironment env =
      tether::loop::NodeEnvironmentFromProcess("actuator", kDemoStackPath,
                                               absl::GetFlag(FLAGS_config));
  auto process = tether::loop::NodeMain::Start(env, &RegisterDemoSchemas);
  if (!process.ok()) return FailNode(env.node_name, process.status());
  ActuatorOptions options;
  options.substeps = absl::GetFlag(FLAGS_substeps);
  options.command_timeout =
      std::chrono::milliseconds(absl::GetFlag(FLAGS_command_timeout_ms));
  auto node = ActuatorNode::Create((*process)->loop(), options);
  if (!node.ok()) return FailNode(env.node_name, node.status());
  const int code = (*process)->Run();
  const ActuatorStats s = (*node)->stats();
  std::printf(
      "actuator: %llu steps (%llu late), %llu commands (%llu lost, %llu "
      "malformed), %llu steps without a fresh command, %llu saturated, %llu "
      "failed sends\n",
      (unsigned long long)s.steps, (unsigned long long)s.missed_steps,
      (unsigned long long)s.commands, (unsigned long long)s.missed_commands,
      (unsigned long long)s.malformed_commands,
      (unsigned long long)s.stale_steps, (unsigned long long)s.saturated_steps,
      (unsigned long long)s.publish_failures);
  return code;
}
