#include "examples/estimator.h"

#include <chrono>
#include <cmath>

#include "examples/trajectory.h"

namespace tether::examples {

absl::StatusOr<std::unique_ptr<EstimatorNode>> EstimatorNode::Create(
    loop::EventLoop* loop, const EstimatorOptions& options) {
  std::unique_ptr<EstimatorNode> node(new EstimatorNode(loop, options));
  if (absl::Status s = node->Init(); !s.ok()) return s;
  return node;
}

EstimatorNode::EstimatorNode(loop::EventLoop* loop,
                             const EstimatorOptions& options)
    : loop_(loop),
      options_(options),
      p00_(options.initial_heading_variance),
      p11_(options.initial_bias_variance) {}

absl::Status EstimatorNode::Init() {
  auto sender = loop_->MakeSender<StateEstimate>(options_.estimate_channel);
  if (!sender.ok()) return sender.status();
  sender_ = std::move(*sender);
  if (auto s = loop_->MakeWatcher<ImuSample>(
          options_.imu_channel,
          [this](ImuSample::Reader m, const loop::MessageContext& c) {
            OnImu(m, c);
          });
      !s.ok()) {
    return s.status();
  }
  return loop_
      ->MakeWatcher<JointState>(
          options_.joint_state_channel,
          [this](JointState::Reader m, const loop::MessageContext& c) {
            OnJointState(m, c);
          })
      .status();
}

void EstimatorNode::OnImu(ImuSample::Reader imu,
                          const loop::MessageContext& context) {
  ++stats_.imu_samples;
  stats_.missed_inputs += context.missed;
  have_imu_ = true;
  imu_time_ns_ = imu.getSampleTimeNs();
  gyro_z_ = imu.getAngularVelocity().getZ();
}

void EstimatorNode::OnJointState(JointState::Reader js,
                                 const loop::MessageContext& context) {
  stats_.missed_inputs += context.missed;
  const PlantParams& g = options_.geometry;
  const int64_t t = js.getSampleTimeNs();
  const double left = js.getLeftPositionRad();
  const double right = js.getRightPositionRad();
  if (!initialised_) {
    // The first sample fixes the odometry origin: nothing moved yet.
    initialised_ = true;
    last_time_ns_ = t;
    last_left_ = left;
    last_right_ = right;
    odometry_heading_ = heading_;
  }
  const double dt = 1e-9 * static_cast<double>(t - last_time_ns_);
  const double d_left = left - last_left_;
  const double d_right = right - last_right_;
  last_time_ns_ = t;
  last_left_ = left;
  last_right_ = right;
  odometry_heading_ +=
      g.wheel_radius_m * (d_right - d_left) / g.track_width_m;
  const double ds = g.wheel_radius_m * (d_left + d_right) / 2;

  const bool imu_fresh =
      have_imu_ && t - imu_time_ns_ <= std::chrono::nanoseconds(
                                           options_.imu_timeout)
                                           .count();
  const double previous_heading = heading_;
  if (dt > 0) {
    // Predict with the gyro (or, without one, with the odometry's turn).
    const double rate = imu_fresh ? gyro_z_ - bias_
                                  : (odometry_heading_ - heading_) / dt;
    heading_ += rate * dt;
    const double qg = options_.gyro_noise_rads * dt;
    const double qb = options_.bias_walk * options_.bias_walk * dt;
    // P = F P F' + Q with F = [[1, -dt], [0, 1]].
    const double p00 = p00_ - 2 * dt * p01_ + dt * dt * p11_ + qg * qg;
    const double p01 = p01_ - dt * p11_;
    p00_ = p00;
    p01_ = p01;
    p11_ += qb;
    // Correct with the odometry heading (H = [1, 0]).
    const double r = options_.odometry_heading_noise_rad *
                     options_.odometry_heading_noise_rad;
    const double s = p00_ + r;
    const double k0 = p00_ / s, k1 = p01_ / s;
    const double innovation = odometry_heading_ - heading_;
    heading_ += k0 * innovation;
    if (imu_fresh) bias_ += k1 * innovation;
    const double n00 = (1 - k0) * p00_;
    const double n01 = (1 - k0) * p01_;
    const double n11 = p11_ - k1 * p01_;
    p00_ = n00;
    p01_ = n01;
    p11_ = n11;
  }
  if (!imu_fresh) ++stats_.updates_without_imu;
  const double mid = (previous_heading + heading_) / 2;
  x_ += ds * std::cos(mid);
  y_ += ds * std::sin(mid);
  // A crude position uncertainty: grows with distance and heading doubt.
  position_variance_ += std::abs(ds) * 1e-6 + ds * ds * p00_;

  transport::Loan<StateEstimate> loan = sender_->MakeLoan();
  if (!loan.valid()) {
    ++stats_.publish_failures;
    return;
  }
  StateEstimate::Builder e = loan.root();
  e.setSampleTimeNs(t);
  e.setX(x_);
  e.setY(y_);
  e.setHeading(WrapAngle(heading_));
  e.setForwardVelocity(ForwardVelocity(g, js.getLeftVelocityRadS(),
                                       js.getRightVelocityRadS()));
  e.setYawRate(imu_fresh ? gyro_z_ - bias_
                         : YawRate(g, js.getLeftVelocityRadS(),
                                   js.getRightVelocityRadS()));
  e.setCovarianceTrace(p00_ + p11_ + 2 * position_variance_);
  if (sender_->Send(std::move(loan)).status != transport::PublishStatus::kOk) {
    ++stats_.publish_failures;
    return;
  }
  ++stats_.updates;
}

}  // namespace tether::examples
