#include "examples/actuator.h"

#include <algorithm>
#include <chrono>

namespace tether::examples {

using std::chrono::duration;

absl::StatusOr<std::unique_ptr<ActuatorNode>> ActuatorNode::Create(
    loop::EventLoop* loop, const ActuatorOptions& options) {
  std::unique_ptr<ActuatorNode> node(new ActuatorNode(loop, options));
  if (absl::Status s = node->Init(); !s.ok()) return s;
  return node;
}

ActuatorNode::ActuatorNode(loop::EventLoop* loop,
                           const ActuatorOptions& options)
    : loop_(loop), options_(options), plant_(options.plant, options.initial) {}

absl::Status ActuatorNode::Init() {
  auto sender = loop_->MakeSender<JointState>(options_.plant_channel);
  if (!sender.ok()) return sender.status();
  plant_sender_ = std::move(*sender);
  auto watcher = loop_->MakeWatcher<JointCommand>(
      options_.command_channel,
      [this](JointCommand::Reader c, const loop::MessageContext& ctx) {
        OnCommand(c, ctx);
      });
  if (!watcher.ok()) return watcher.status();
  command_watcher_ = *watcher;
  loop_->AddPhasedLoop([this](int cycles) { Step(cycles); }, options_.period,
                       options_.phase_offset);
  return absl::OkStatus();
}

ActuatorStats ActuatorNode::stats() const {
  ActuatorStats s = stats_;
  if (command_watcher_ != nullptr) {
    s.malformed_commands = command_watcher_->stats().malformed;
  }
  return s;
}

void ActuatorNode::OnCommand(JointCommand::Reader command,
                             const loop::MessageContext& context) {
  ++stats_.commands;
  stats_.missed_commands += context.missed;
  have_command_ = true;
  command_time_ = loop_->monotonic_now();
  mode_ = command.getMode();
  enabled_ = command.getEnabled();
  left_effort_ = command.getLeftEffortNm();
  right_effort_ = command.getRightEffortNm();
  left_velocity_target_ = command.getLeftVelocityTarget();
  right_velocity_target_ = command.getRightVelocityTarget();
  velocity_kp_ = command.getKp();
}

void ActuatorNode::Step(int cycles) {
  ++stats_.steps;
  stats_.missed_steps += static_cast<uint64_t>(cycles - 1);
  const int periods = std::clamp(cycles, 1, options_.max_catch_up_periods);
  const loop::MonotonicTime now = loop_->context().monotonic_event_time;

  // What the drives apply: the held command if fresh, else nothing.
  double left = 0, right = 0;
  const bool fresh =
      have_command_ && now - command_time_ <= options_.command_timeout;
  if (!fresh) {
    ++stats_.stale_steps;
  } else if (enabled_ && mode_ == JointCommand::Mode::EFFORT) {
    left = left_effort_;
    right = right_effort_;
  } else if (enabled_ && mode_ == JointCommand::Mode::VELOCITY) {
    // The drive's own velocity loop (proportional, gain from the command).
    const PlantState& s = plant_.state();
    left = velocity_kp_ * (left_velocity_target_ - s.left_velocity_rads);
    right = velocity_kp_ * (right_velocity_target_ - s.right_velocity_rads);
  }
  const double dt =
      duration<double>(options_.period).count() * static_cast<double>(periods);
  if (plant_.Step(left, right, dt, options_.substeps * periods)) {
    ++stats_.saturated_steps;
  }

  const PlantState& s = plant_.state();
  transport::Loan<JointState> loan = plant_sender_->MakeLoan();
  if (!loan.valid()) {
    ++stats_.publish_failures;
    return;
  }
  JointState::Builder m = loan.root();
  m.setSampleTimeNs(static_cast<int64_t>(loop::ToMonotonicNs(now)));
  m.setLeftPositionRad(s.left_position_rad);
  m.setRightPositionRad(s.right_position_rad);
  m.setLeftVelocityRadS(s.left_velocity_rads);
  m.setRightVelocityRadS(s.right_velocity_rads);
  m.setLeftEffortNm(s.left_effort_nm);
  m.setRightEffortNm(s.right_effort_nm);
  if (plant_sender_->Send(std::move(loan)).status !=
      transport::PublishStatus::kOk) {
    ++stats_.publish_failures;
  }
}

}  // namespace tether::examples
