// examples: the demo stack's estimator node: wheel odometry fused with the
// IMU's gyro. On every /robot/joint_state message (the sensors publish the
// IMU sample of the same instant just before it) it runs a two-state Kalman
// filter on [heading, gyro bias] -- predict with the bias-corrected gyro,
// correct with the odometry heading r (phiR - phiL) / b -- then dead-reckons
// the position with the fused heading and publishes /robot/state_estimate.
// The world frame is where the robot stood when the estimator started.
#ifndef TETHER_EXAMPLES_ESTIMATOR_H_
#define TETHER_EXAMPLES_ESTIMATOR_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "examples/demo.capnp.h"
#include "examples/plant.h"
#include "loop/event_loop.h"

namespace tether::examples {

struct EstimatorOptions {
  std::string imu_channel = "/robot/imu";
  std::string joint_state_channel = "/robot/joint_state";
  std::string estimate_channel = "/robot/state_estimate";
  // Wheel radius and track width used for odometry.
  PlantParams geometry;
  // Filter tuning: gyro white noise (rad/s, per sample), bias random walk
  // (rad/s per sqrt(s)), odometry heading noise (rad).
  double gyro_noise_rads = 0.002;
  double bias_walk = 1e-4;
  double odometry_heading_noise_rad = 2e-3;
  double initial_heading_variance = 1e-6;
  double initial_bias_variance = 1e-3;
  // An IMU sample older than this is not used (odometry only).
  loop::Duration imu_timeout = std::chrono::milliseconds(10);
};

struct EstimatorStats {
  uint64_t updates = 0;           // estimates published
  uint64_t imu_samples = 0;
  uint64_t updates_without_imu = 0;
  uint64_t missed_inputs = 0;     // joint states or IMU samples lost
  uint64_t publish_failures = 0;
};

// Loop thread only. Lives as long as its loop runs.
class EstimatorNode {
 public:
  // Makes the sender and both watchers. Errors name the channel. Setup;
  // allocates.
  static absl::StatusOr<std::unique_ptr<EstimatorNode>> Create(
      loop::EventLoop* loop, const EstimatorOptions& options = {});
  EstimatorNode(const EstimatorNode&) = delete;
  EstimatorNode& operator=(const EstimatorNode&) = delete;

  // Loop thread (or after the loop ended).
  const EstimatorStats& stats() const { return stats_; }
  double gyro_bias_estimate() const { return bias_; }

 private:
  EstimatorNode(loop::EventLoop* loop, const EstimatorOptions& options);
  absl::Status Init();
  // Watchers. RT-safe.
  void OnImu(ImuSample::Reader imu, const loop::MessageContext& context);
  void OnJointState(JointState::Reader js, const loop::MessageContext& context);

  loop::EventLoop* const loop_;
  const EstimatorOptions options_;
  std::unique_ptr<loop::Sender<StateEstimate>> sender_;

  bool have_imu_ = false;
  int64_t imu_time_ns_ = 0;
  double gyro_z_ = 0;

  bool initialised_ = false;
  int64_t last_time_ns_ = 0;
  double last_left_ = 0, last_right_ = 0;
  double odometry_heading_ = 0;  // r (phiR - phiL) / b since start
  // Filter state [heading (unwrapped), bias] and covariance.
  double heading_ = 0, bias_ = 0;
  double p00_, p01_ = 0, p11_;
  double x_ = 0, y_ = 0;
  double position_variance_ = 0;
  EstimatorStats stats_;
};

}  // namespace tether::examples

#endif  // TETHER_EXAMPLES_ESTIMATOR_H_
