#include "examples/controller.h"

#include <chrono>
#include <cmath>

#include "absl/status/status.h"

namespace tether::examples {

using std::chrono::duration;

bool ParseControllerMode(std::string_view name, ControllerMode* mode) {
  if (name == "position") {
    *mode = ControllerMode::kPosition;
  } else if (name == "velocity") {
    *mode = ControllerMode::kVelocity;
  } else {
    return false;
  }
  return true;
}

PlantParams NominalModel() {
  PlantParams p;
  p.mass_kg *= 0.85;
  p.yaw_inertia_kgm2 *= 1.2;
  p.wheel_inertia_kgm2 *= 0.8;
  p.viscous_friction_nms *= 0.75;
  p.coulomb_friction_nm *= 0.75;
  return p;
}

absl::StatusOr<std::unique_ptr<ControllerNode>> ControllerNode::Create(
    loop::EventLoop* loop, const ControllerOptions& options) {
  std::unique_ptr<ControllerNode> node(new ControllerNode(loop, options));
  if (absl::Status s = node->Init(); !s.ok()) return s;
  return node;
}

ControllerNode::ControllerNode(loop::EventLoop* loop,
                               const ControllerOptions& options)
    : loop_(loop), options_(options) {}

absl::Status ControllerNode::Init() {
  auto estimate = loop_->MakeFetcher<StateEstimate>(options_.estimate_channel);
  if (!estimate.ok()) return estimate.status();
  estimate_fetcher_ = std::move(*estimate);
  auto js = loop_->MakeFetcher<JointState>(options_.joint_state_channel);
  if (!js.ok()) return js.status();
  joint_state_fetcher_ = std::move(*js);
  auto sender = loop_->MakeSender<JointCommand>(options_.command_channel);
  if (!sender.ok()) return sender.status();
  sender_ = std::move(*sender);
  auto velocity =
      loop_->MakeFetcher<VelocityCommand>(options_.velocity_command_channel);
  if (velocity.ok()) {
    velocity_fetcher_ = std::move(*velocity);
  } else if (!absl::IsNotFound(velocity.status())) {
    return velocity.status();
  }
  loop_->AddPhasedLoop([this](int cycles) { Cycle(cycles); }, options_.period,
                       options_.phase_offset);
  return absl::OkStatus();
}

void ControllerNode::Sent(transport::PublishResult result) {
  if (result.status != transport::PublishStatus::kOk) ++publish_failures_;
}

void ControllerNode::SendIdle(loop::MonotonicTime now) {
  transport::Loan<JointCommand> loan = sender_->MakeLoan();
  if (!loan.valid()) {
    ++publish_failures_;
    return;
  }
  JointCommand::Builder c = loan.root();
  c.setCycle(cycle_);
  c.setSampleTimeNs(static_cast<int64_t>(loop::ToMonotonicNs(now)));
  c.setEnabled(false);
  c.setMode(JointCommand::Mode::IDLE);
  Sent(sender_->Send(std::move(loan)));
}

void ControllerNode::Cycle(int cycles) {
  const loop::MonotonicTime now = loop_->context().monotonic_event_time;
  const int64_t now_ns = static_cast<int64_t>(loop::ToMonotonicNs(now));
  // The first run is cycle 0; a late run skips cycle numbers (the monitor
  // sees the gap).
  if (ran_) cycle_ += static_cast<uint64_t>(cycles);
  ran_ = true;
  tracking_.AddCycles(1, static_cast<uint64_t>(cycles - 1));

  transport::Message<StateEstimate> em;
  if (estimate_fetcher_->Latest(&em) == transport::ReceiveStatus::kOk) {
    have_estimate_ = true;
    estimate_time_ns_ = em.root.getSampleTimeNs();
    x_ = em.root.getX();
    y_ = em.root.getY();
    heading_ = em.root.getHeading();
    estimate_fetcher_->Release();
  }
  transport::Message<JointState> jm;
  if (joint_state_fetcher_->Latest(&jm) == transport::ReceiveStatus::kOk) {
    have_wheels_ = true;
    left_velocity_ = jm.root.getLeftVelocityRadS();
    right_velocity_ = jm.root.getRightVelocityRadS();
    left_position_ = jm.root.getLeftPositionRad();
    right_position_ = jm.root.getRightPositionRad();
    joint_state_fetcher_->Release();
  }
  transport::Message<VelocityCommand> vm;
  if (velocity_fetcher_ != nullptr &&
      velocity_fetcher_->Latest(&vm) == transport::ReceiveStatus::kOk) {
    have_velocity_command_ = true;
    velocity_command_ns_ = vm.context.monotonic_send_ns;
    command_v_ = vm.root.getForwardMs();
    command_w_ = vm.root.getYawRateRads();
    velocity_fetcher_->Release();
  }
  const bool teleop =
      have_velocity_command_ &&
      now_ns - velocity_command_ns_ <=
          std::chrono::nanoseconds(options_.velocity_command_timeout).count();
  const bool fresh =
      have_estimate_ && have_wheels_ &&
      now_ns - estimate_time_ns_ <=
          std::chrono::nanoseconds(options_.estimate_timeout).count();
  if (!fresh) {
    if (trajectory_.has_value()) ++stale_cycles_;
    left_integral_ = right_integral_ = 0;
    tracking_.AddUntracked(false);
    SendIdle(now);
    return;
  }
  if (teleop) {
    // The trajectory starts again from wherever teleoperation leaves it.
    trajectory_.reset();
  } else if (!trajectory_.has_value()) {
    trajectory_.emplace(options_.trajectory, x_, y_, heading_);
    start_time_ = now;
    left_position_target_ = left_position_;
    right_position_target_ = right_position_;
  }

  const double dt = duration<double>(options_.period).count();
  const double t = duration<double>(now - start_time_).count();
  ReferencePoint ref;
  if (teleop) {
    ++teleop_cycles_;
    ref.x_m = x_;
    ref.y_m = y_;
    ref.heading_rad = heading_;
    ref.velocity_ms = command_v_;
    ref.yaw_rate_rads = command_w_;
  } else {
    ref = trajectory_->At(t);
  }
  const ControllerGains& k = options_.gains;
  const PlantParams& m = options_.model;

  // Pose loop.
  const double ex = ref.x_m - x_, ey = ref.y_m - y_;
  const double eh = WrapAngle(ref.heading_rad - heading_);
  const double c = std::cos(heading_), s = std::sin(heading_);
  const double e1 = c * ex + s * ey;   // along the robot's heading
  const double e2 = -s * ex + c * ey;  // to its left
  double v = ref.velocity_ms, w = ref.yaw_rate_rads;
  if (options_.mode == ControllerMode::kPosition && !teleop) {
    v = ref.velocity_ms * std::cos(eh) + k.kx * e1;
    w = ref.yaw_rate_rads +
        ref.velocity_ms * (k.ky * e2 + k.ktheta * std::sin(eh));
  }

  // Wheel loops.
  const double half_track = m.track_width_m / 2;
  const double left_target = (v - w * half_track) / m.wheel_radius_m;
  const double right_target = (v + w * half_track) / m.wheel_radius_m;
  double left_ff = 0, right_ff = 0;
  WheelTorques(m,
               (ref.acceleration_ms2 - ref.yaw_acceleration_rads2 * half_track) /
                   m.wheel_radius_m,
               (ref.acceleration_ms2 + ref.yaw_acceleration_rads2 * half_track) /
                   m.wheel_radius_m,
               &left_ff, &right_ff);
  left_ff = k.feedforward * (left_ff + FrictionTorque(m, left_target));
  right_ff = k.feedforward * (right_ff + FrictionTorque(m, right_target));
  const double left_error = left_target - left_velocity_;
  const double right_error = right_target - right_velocity_;
  const double left_request =
      left_ff + k.wheel_kp * left_error + k.wheel_ki * left_integral_;
  const double right_request =
      right_ff + k.wheel_kp * right_error + k.wheel_ki * right_integral_;
  const double left = LimitMotorTorque(m, left_request, left_velocity_);
  const double right = LimitMotorTorque(m, right_request, right_velocity_);
  const bool saturated = left != left_request || right != right_request;
  if (!saturated) {  // anti-windup: hold the integrals while clipped
    left_integral_ += left_error * dt;
    right_integral_ += right_error * dt;
  }
  left_position_target_ += left_target * dt;
  right_position_target_ += right_target * dt;
  if (teleop) {
    tracking_.AddUntracked(saturated);
  } else {
    tracking_.AddTracked(ex, ey, eh, saturated);
  }

  transport::Loan<JointCommand> loan = sender_->MakeLoan();
  if (!loan.valid()) {
    ++publish_failures_;
    return;
  }
  JointCommand::Builder cmd = loan.root();
  cmd.setCycle(cycle_);
  cmd.setSampleTimeNs(estimate_time_ns_);
  cmd.setLeftEffortNm(left);
  cmd.setRightEffortNm(right);
  cmd.setLeftVelocityTarget(left_target);
  cmd.setRightVelocityTarget(right_target);
  cmd.setLeftPositionTarget(left_position_target_);
  cmd.setRightPositionTarget(right_position_target_);
  cmd.setKp(static_cast<float>(k.wheel_kp));
  cmd.setKi(static_cast<float>(k.wheel_ki));
  cmd.setKd(0.0f);
  cmd.setFeedForward(static_cast<float>(k.feedforward));
  cmd.setTrackingErrorX(ex);
  cmd.setTrackingErrorY(ey);
  cmd.setTrackingErrorHeading(eh);
  cmd.setReferenceX(ref.x_m);
  cmd.setReferenceY(ref.y_m);
  cmd.setReferenceHeading(ref.heading_rad);
  cmd.setSaturated(saturated);
  cmd.setEnabled(true);
  cmd.setMode(JointCommand::Mode::EFFORT);
  Sent(sender_->Send(std::move(loan)));
}

}  // namespace tether::examples
