// examples: main() of the estimator node (odometry + gyro Kalman filter).
// Usage: estimator [--config=FILE]
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "examples/demo_schemas.h"
#include "examples/estimator.h"
#include "loop/node_main.h"

ABSL_FLAG(std::string, config, "",
          "stack config (default: the stack the launcher started this node "
          "from, else examples/config/example_stack.json)");

int main(int argc, char** argv) {
  using namespace tether::examples;
  using tether::loop::FailNode;
  absl::ParseCommandLine(argc, argv);
  const tether::transport::NodeEnvironment env =
      tether::loop::NodeEnvironmentFromProcess("estimator", kDemoStackPath,
                                               absl::GetFlag(FLAGS_config));
  auto process = tether::loop::NodeMain::Start(env, &RegisterDemoSchemas);
  if (!process.ok()) return FailNode(env.node_name, process.status());
  auto node = EstimatorNode::Create((*process)->loop(), EstimatorOptions{});
  if (!node.ok()) return FailNode(env.node_name, node.status());
  const int code = (*process)->Run();
  const EstimatorStats& s = (*node)->stats();
  std::printf(
      "estimator: %llu estimates (%llu without IMU), %llu inputs lost, %llu "
      "failed sends, gyro bias %.4f rad/s\n",
      (unsigned long long)s.updates, (unsigned long long)s.updates_without_imu,
      (unsigned long long)s.missed_inputs,
      (unsigned long long)s.publish_failures, (*node)->gyro_bias_estimate());
  return code;
}
