// examples: the demo stack's sensors node: wheel encoders, motor current
// sensing and an IMU, sampled at `rate_hz` (1 kHz) in a phased loop. Each
// sample reads the newest true plant state from /plant/state (published by
// the actuator node, which owns the physics) and publishes what real
// sensors would report: /robot/imu (gyro with bias and noise, accelerometer
// with noise) and then /robot/joint_state (quantised encoder angles, noisy
// velocities and efforts). Noise comes from a seeded generator, so a
// simulated run is reproducible.
#ifndef TETHER_EXAMPLES_SENSORS_H_
#define TETHER_EXAMPLES_SENSORS_H_

#include <cstdint>
#include <memory>
#include <random>
#include <string>

#include "absl/status/statusor.h"
#include "examples/demo.capnp.h"
#include "examples/plant.h"
#include "loop/event_loop.h"

namespace tether::examples {

struct SensorsOptions {
  std::string plant_channel = "/plant/state";
  std::string imu_channel = "/robot/imu";
  std::string joint_state_channel = "/robot/joint_state";
  double rate_hz = 1000;
  // Sampling phase: after the actuator's physics step (phase 0).
  loop::Duration phase_offset = std::chrono::microseconds(100);
  // Geometry the IMU's body motion is derived from (wheel radius, track).
  PlantParams geometry;
  uint64_t seed = 1;
  double encoder_counts_per_rev = 16384;
  double velocity_noise_rads = 0.01;  // standard deviations
  double effort_noise_nm = 0.02;
  double gyro_noise_rads = 0.002;
  double gyro_bias_rads = 0.01;  // constant z bias the estimator must learn
  double accel_noise_ms2 = 0.05;
  // A plant state older than this is not sampled (the sensors go quiet
  // rather than report a frozen robot).
  loop::Duration stale_after = std::chrono::milliseconds(50);
};

struct SensorsStats {
  uint64_t samples = 0;          // published sample pairs
  uint64_t missed_samples = 0;   // phase points run late
  uint64_t skipped_samples = 0;  // no (fresh) plant state to sample
  uint64_t publish_failures = 0;
};

// Loop thread only. Lives as long as its loop runs.
class SensorsNode {
 public:
  // Errors name the channel. Setup; allocates.
  static absl::StatusOr<std::unique_ptr<SensorsNode>> Create(
      loop::EventLoop* loop, const SensorsOptions& options = {});
  SensorsNode(const SensorsNode&) = delete;
  SensorsNode& operator=(const SensorsNode&) = delete;

  // Loop thread (or after the loop ended).
  const SensorsStats& stats() const { return stats_; }

 private:
  SensorsNode(loop::EventLoop* loop, const SensorsOptions& options);
  absl::Status Init();
  // Phased loop: sample and publish. RT-safe.
  void Sample(int cycles);
  double Noise(double sigma) { return sigma * normal_(rng_); }

  // The plant state last read (copied out of the channel).
  struct Truth {
    int64_t time_ns = 0;
    double left_position = 0, right_position = 0;
    double left_velocity = 0, right_velocity = 0;
    double left_effort = 0, right_effort = 0;
  };

  loop::EventLoop* const loop_;
  const SensorsOptions options_;
  std::unique_ptr<loop::Fetcher<JointState>> plant_fetcher_;
  std::unique_ptr<loop::Sender<ImuSample>> imu_sender_;
  std::unique_ptr<loop::Sender<JointState>> joint_state_sender_;
  std::mt19937_64 rng_;
  std::normal_distribution<double> normal_{0.0, 1.0};
  bool have_truth_ = false;
  Truth truth_;
  // Body forward velocity at the previous distinct plant state, for the
  // accelerometer.
  bool have_previous_ = false;
  int64_t previous_time_ns_ = 0;
  double previous_forward_velocity_ = 0;
  double forward_acceleration_ = 0;
  SensorsStats stats_;
};

}  // namespace tether::examples

#endif  // TETHER_EXAMPLES_SENSORS_H_
