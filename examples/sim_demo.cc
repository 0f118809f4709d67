#include "examples/sim_demo.h"

#include <chrono>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "examples/demo_schemas.h"
#include "examples/trajectory.h"

namespace tether::examples {

absl::StatusOr<std::unique_ptr<SimulatedDemo>> SimulatedDemo::Create(
    const std::string& config_path, const SimulatedDemoOptions& options) {
  std::unique_ptr<SimulatedDemo> demo(new SimulatedDemo());
  if (absl::Status s = demo->Build(config_path, options); !s.ok()) return s;
  return demo;
}

SimulatedDemo::~SimulatedDemo() {
  // Nodes hold endpoints on the factory's channels: drop them first.
  referee_estimate_.reset();
  monitor_.reset();
  controller_.reset();
  estimator_.reset();
  sensors_.reset();
  actuator_.reset();
  factory_.reset();
}

absl::Status SimulatedDemo::Build(const std::string& config_path,
                                  SimulatedDemoOptions options) {
  RegisterDemoSchemas(&schemas_);
  absl::StatusOr<transport::StackConfig> stack =
      transport::LoadStackConfig(config_path, schemas_.known_types());
  if (!stack.ok()) return stack.status();
  stack_ = std::make_unique<transport::StackConfig>(std::move(*stack));
  if (options.monitor.channels.empty()) {
    std::optional<transport::config::Node::Reader> node =
        stack_->FindNode("monitor");
    if (!node.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          config_path, " has no node \"monitor\" to take the watched "
                       "channels from; set SimulatedDemoOptions.monitor."
                       "channels"));
    }
    for (capnp::Text::Reader r : node->getReads()) {
      options.monitor.channels.emplace_back(r.cStr());
    }
  }
  auto factory = loop::SimulatedEventLoopFactory::Create(*stack_, schemas_,
                                                         options.simulation);
  if (!factory.ok()) return factory.status();
  factory_ = std::move(*factory);

  auto actuator =
      ActuatorNode::Create(factory_->MakeEventLoop("actuator"), options.actuator);
  if (!actuator.ok()) return actuator.status();
  actuator_ = std::move(*actuator);
  auto sensors =
      SensorsNode::Create(factory_->MakeEventLoop("sensors"), options.sensors);
  if (!sensors.ok()) return sensors.status();
  sensors_ = std::move(*sensors);
  auto estimator = EstimatorNode::Create(factory_->MakeEventLoop("estimator"),
                                         options.estimator);
  if (!estimator.ok()) return estimator.status();
  estimator_ = std::move(*estimator);
  auto controller = ControllerNode::Create(
      factory_->MakeEventLoop("controller"), options.controller);
  if (!controller.ok()) return controller.status();
  controller_ = std::move(*controller);
  auto monitor =
      MonitorNode::Create(factory_->MakeEventLoop("monitor"), options.monitor);
  if (!monitor.ok()) return monitor.status();
  monitor_ = std::move(*monitor);

  // The referee runs after the controller's phase in every period.
  referee_loop_ = factory_->MakeEventLoop("referee");
  auto fetcher = referee_loop_->MakeFetcher<StateEstimate>(
      options.estimator.estimate_channel);
  if (!fetcher.ok()) return fetcher.status();
  referee_estimate_ = std::move(*fetcher);
  const loop::Duration referee_phase =
      options.controller.phase_offset + options.controller.period / 10;
  referee_lag_ = referee_phase - options.actuator.phase_offset;
  referee_loop_->AddPhasedLoop([this](int) { Referee(); },
                               options.controller.period, referee_phase);
  return absl::OkStatus();
}

void SimulatedDemo::Referee() {
  const PlantState& truth = actuator_->plant().state();
  transport::Message<StateEstimate> m;
  if (referee_estimate_->Latest(&m) == transport::ReceiveStatus::kOk) {
    estimation_.AddTracked(m.root.getX() - truth.x_m,
                           m.root.getY() - truth.y_m,
                           WrapAngle(m.root.getHeading() - truth.heading_rad),
                           false);
    referee_estimate_->Release();
  }
  const std::optional<Trajectory>& trajectory = controller_->trajectory();
  if (!trajectory.has_value()) return;
  // The plant was last stepped at this period's actuator phase: compare it
  // with the reference for that instant.
  const double t = std::chrono::duration<double>(
                       referee_loop_->context().monotonic_event_time -
                       referee_lag_ - controller_->start_time())
                       .count();
  const ReferencePoint ref = trajectory->At(t);
  true_tracking_.AddTracked(ref.x_m - truth.x_m, ref.y_m - truth.y_m,
                            WrapAngle(ref.heading_rad - truth.heading_rad),
                            false);
}

SimulatedDemoSummary SimulatedDemo::summary() const {
  SimulatedDemoSummary s;
  s.controller = controller_->summary();
  s.monitor = monitor_->summary();
  s.true_tracking = true_tracking_.summary();
  s.estimation = estimation_.summary();
  s.actuator = actuator_->stats();
  s.sensors = sensors_->stats();
  s.estimator = estimator_->stats();
  s.controller_stale_cycles = controller_->stale_cycles();
  s.status_published = monitor_->status_published();
  return s;
}

}  // namespace tether::examples
