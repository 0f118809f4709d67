#include "examples/sensors.h"

#include <chrono>
#include <cmath>
#include <numbers>

namespace tether::examples {

absl::StatusOr<std::unique_ptr<SensorsNode>> SensorsNode::Create(
    loop::EventLoop* loop, const SensorsOptions& options) {
  std::unique_ptr<SensorsNode> node(new SensorsNode(loop, options));
  if (absl::Status s = node->Init(); !s.ok()) return s;
  return node;
}

SensorsNode::SensorsNode(loop::EventLoop* loop, const SensorsOptions& options)
    : loop_(loop), options_(options), rng_(options.seed) {}

absl::Status SensorsNode::Init() {
  if (!(options_.rate_hz > 0)) {
    return absl::InvalidArgumentError("sensors: rate_hz must be positive");
  }
  auto fetcher = loop_->MakeFetcher<JointState>(options_.plant_channel);
  if (!fetcher.ok()) return fetcher.status();
  plant_fetcher_ = std::move(*fetcher);
  auto imu = loop_->MakeSender<ImuSample>(options_.imu_channel);
  if (!imu.ok()) return imu.status();
  imu_sender_ = std::move(*imu);
  auto js = loop_->MakeSender<JointState>(options_.joint_state_channel);
  if (!js.ok()) return js.status();
  joint_state_sender_ = std::move(*js);
  const auto period = std::chrono::duration_cast<loop::Duration>(
      std::chrono::duration<double>(1.0 / options_.rate_hz));
  loop_->AddPhasedLoop([this](int cycles) { Sample(cycles); }, period,
                       options_.phase_offset);
  return absl::OkStatus();
}

void SensorsNode::Sample(int cycles) {
  stats_.missed_samples += static_cast<uint64_t>(cycles - 1);
  const PlantParams& g = options_.geometry;

  // The newest plant state, copied out so the slot is released at once.
  transport::Message<JointState> m;
  if (plant_fetcher_->Latest(&m) == transport::ReceiveStatus::kOk) {
    JointState::Reader p = m.root;
    truth_ = {p.getSampleTimeNs(),    p.getLeftPositionRad(),
              p.getRightPositionRad(), p.getLeftVelocityRadS(),
              p.getRightVelocityRadS(), p.getLeftEffortNm(),
              p.getRightEffortNm()};
    plant_fetcher_->Release();
    have_truth_ = true;
    const double v = ForwardVelocity(g, truth_.left_velocity,
                                     truth_.right_velocity);
    if (have_previous_ && truth_.time_ns > previous_time_ns_) {
      forward_acceleration_ = (v - previous_forward_velocity_) /
                              (1e-9 * static_cast<double>(
                                          truth_.time_ns - previous_time_ns_));
    }
    have_previous_ = true;
    previous_time_ns_ = truth_.time_ns;
    previous_forward_velocity_ = v;
  }
  const loop::MonotonicTime now = loop_->context().monotonic_event_time;
  const int64_t now_ns = static_cast<int64_t>(loop::ToMonotonicNs(now));
  if (!have_truth_ ||
      now_ns - truth_.time_ns >
          std::chrono::nanoseconds(options_.stale_after).count()) {
    ++stats_.skipped_samples;
    return;
  }

  const double v =
      ForwardVelocity(g, truth_.left_velocity, truth_.right_velocity);
  const double w = YawRate(g, truth_.left_velocity, truth_.right_velocity);
  {
    transport::Loan<ImuSample> loan = imu_sender_->MakeLoan();
    if (!loan.valid()) {
      ++stats_.publish_failures;
    } else {
      ImuSample::Builder imu = loan.root();
      imu.setSampleTimeNs(now_ns);
      Vector3::Builder gyro = imu.initAngularVelocity();
      gyro.setX(Noise(options_.gyro_noise_rads));
      gyro.setY(Noise(options_.gyro_noise_rads));
      gyro.setZ(w + options_.gyro_bias_rads + Noise(options_.gyro_noise_rads));
      Vector3::Builder accel = imu.initLinearAcceleration();
      accel.setX(forward_acceleration_ + Noise(options_.accel_noise_ms2));
      accel.setY(v * w + Noise(options_.accel_noise_ms2));
      accel.setZ(9.80665 + Noise(options_.accel_noise_ms2));
      imu.setTemperatureC(static_cast<float>(35.0 + Noise(0.05)));
      if (imu_sender_->Send(std::move(loan)).status !=
          transport::PublishStatus::kOk) {
        ++stats_.publish_failures;
      }
    }
  }
  {
    transport::Loan<JointState> loan = joint_state_sender_->MakeLoan();
    if (!loan.valid()) {
      ++stats_.publish_failures;
      return;
    }
    const double q = 2 * std::numbers::pi / options_.encoder_counts_per_rev;
    JointState::Builder js = loan.root();
    js.setSampleTimeNs(now_ns);
    js.setLeftPositionRad(std::round(truth_.left_position / q) * q);
    js.setRightPositionRad(std::round(truth_.right_position / q) * q);
    js.setLeftVelocityRadS(truth_.left_velocity +
                           Noise(options_.velocity_noise_rads));
    js.setRightVelocityRadS(truth_.right_velocity +
                            Noise(options_.velocity_noise_rads));
    js.setLeftEffortNm(truth_.left_effort + Noise(options_.effort_noise_nm));
    js.setRightEffortNm(truth_.right_effort + Noise(options_.effort_noise_nm));
    if (joint_state_sender_->Send(std::move(loan)).status !=
        transport::PublishStatus::kOk) {
      ++stats_.publish_failures;
      return;
    }
  }
  ++stats_.samples;
}

}  // namespace tether::examples
