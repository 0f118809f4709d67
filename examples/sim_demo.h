// examples: the whole demo stack (actuator with the plant, sensors,
// estimator, controller, monitor) in one process on a virtual clock
// (SimulatedEventLoopFactory): deterministic, faster than real time. Tests
// use it; `tether demo` may use it for a run without shared-memory processes.
// A "referee" loop, which is not part of the stack, compares the plant's
// true pose with the controller's reference and with the estimate.
#ifndef TETHER_EXAMPLES_SIM_DEMO_H_
#define TETHER_EXAMPLES_SIM_DEMO_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "examples/actuator.h"
#include "examples/controller.h"
#include "examples/estimator.h"
#include "examples/monitor.h"
#include "examples/sensors.h"
#include "examples/summary.h"
#include "loop/simulated_event_loop.h"
#include "transport/config.h"
#include "transport/schema_registry.h"

namespace tether::examples {

struct SimulatedDemoOptions {
  ActuatorOptions actuator;
  SensorsOptions sensors;
  EstimatorOptions estimator;
  ControllerOptions controller;
  // Empty `channels`: the `reads` of the stack's "monitor" node.
  MonitorOptions monitor;
  loop::SimulatedOptions simulation;
};

struct SimulatedDemoSummary {
  TrackingSummary controller;  // what the controller measured (vs estimate)
  MonitorSummary monitor;      // traffic, and tracking from the commands
  // The referee's view, after tracking started: true pose vs reference, and
  // true pose vs estimate.
  TrackingSummary true_tracking;
  TrackingSummary estimation;
  ActuatorStats actuator;
  SensorsStats sensors;
  EstimatorStats estimator;
  uint64_t controller_stale_cycles = 0;
  uint64_t status_published = 0;
};

// Not thread-safe: one thread builds and runs it.
class SimulatedDemo {
 public:
  // Loads the stack config at `config_path` (demo schemas registered) and
  // builds every node. Errors name the file or channel. Setup; allocates.
  static absl::StatusOr<std::unique_ptr<SimulatedDemo>> Create(
      const std::string& config_path, const SimulatedDemoOptions& options = {});
  ~SimulatedDemo();
  SimulatedDemo(const SimulatedDemo&) = delete;
  SimulatedDemo& operator=(const SimulatedDemo&) = delete;

  // Advances virtual time by `d`, running every node.
  void RunFor(loop::Duration d) { factory_->RunFor(d); }

  SimulatedDemoSummary summary() const;
  loop::MonotonicTime now() const { return factory_->now(); }
  loop::SimulatedEventLoopFactory& factory() { return *factory_; }
  const ActuatorNode& actuator() const { return *actuator_; }
  const ControllerNode& controller() const { return *controller_; }
  const EstimatorNode& estimator() const { return *estimator_; }

 private:
  SimulatedDemo() = default;
  absl::Status Build(const std::string& config_path,
                     SimulatedDemoOptions options);
  void Referee();

  transport::SchemaRegistry schemas_;
  std::unique_ptr<transport::StackConfig> stack_;
  std::unique_ptr<loop::SimulatedEventLoopFactory> factory_;
  std::unique_ptr<ActuatorNode> actuator_;
  std::unique_ptr<SensorsNode> sensors_;
  std::unique_ptr<EstimatorNode> estimator_;
  std::unique_ptr<ControllerNode> controller_;
  std::unique_ptr<MonitorNode> monitor_;
  loop::EventLoop* referee_loop_ = nullptr;
  std::unique_ptr<loop::Fetcher<StateEstimate>> referee_estimate_;
  loop::Duration referee_lag_{};  // referee phase - actuator phase
  TrackingAccumulator true_tracking_;
  TrackingAccumulator estimation_;
};

}  // namespace tether::examples

#endif  // TETHER_EXAMPLES_SIM_DEMO_H_
