// examples: the demo stack's controller node: a 1 kHz phased loop that
// tracks a reference trajectory (figure eight or circle, see trajectory.h)
// and publishes wheel torques on /robot/joint_command.
//
// Each cycle it takes the newest /robot/state_estimate and
// /robot/joint_state (fetchers: the loop is clocked, not message-driven),
// then:
//   1. pose loop (Kanayama et al. 1990): with the error (e1, e2, e_heading)
//      in the robot's frame, v = v_ref cos(e_heading) + kx e1 and
//      w = w_ref + v_ref (ky e2 + ktheta sin(e_heading)) -- or, in velocity
//      mode, just the reference's v_ref and w_ref;
//   2. wheel speed targets from (v, w), and per wheel
//      torque = feedforward (M alpha_ref + friction) + kp e + ki integral(e),
//      clipped to the nominal motor limit (integration stops while clipped).
// If the stack has a /robot/velocity_command channel, a fresh command on it
// (newer than velocity_command_timeout) replaces the trajectory's v and w
// (teleoperation; tracking errors are then reported as 0: there is no
// reference pose); when commands stop, tracking starts again from the
// robot's pose.
// Until the first estimate arrives it sends idle commands; tracking starts
// from the robot's pose then (the reference is anchored there), and stops
// (idle commands) while the estimate is older than `estimate_timeout`.
#ifndef TETHER_EXAMPLES_CONTROLLER_H_
#define TETHER_EXAMPLES_CONTROLLER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "examples/demo.capnp.h"
#include "examples/plant.h"
#include "examples/summary.h"
#include "examples/trajectory.h"
#include "loop/event_loop.h"

namespace tether::examples {

enum class ControllerMode {
  kPosition,  // pose feedback + wheel speed loops (tracks the trajectory)
  kVelocity,  // wheel speed loops on the reference's velocities only
};

// "position" / "velocity". False if unknown. Any thread.
bool ParseControllerMode(std::string_view name, ControllerMode* mode);

struct ControllerGains {
  double kx = 3.0;       // 1/s: along-track position error -> speed
  double ky = 25.0;      // 1/m^2: cross-track error -> turn rate (per m/s)
  double ktheta = 10.0;  // 1/m: heading error -> turn rate (per m/s)
  double wheel_kp = 3.0;   // N m per rad/s of wheel speed error
  double wheel_ki = 30.0;  // N m per rad of integrated wheel speed error
  double feedforward = 1.0;  // scale of the model feedforward (0 disables)
};

// The demo controller's model of the base: PlantParams' defaults off by
// 10-25% (mass, inertias, friction, as an identified model would be), so
// that the feedback loops, not a perfect feedforward, do the tracking.
PlantParams NominalModel();

struct ControllerOptions {
  std::string estimate_channel = "/robot/state_estimate";
  std::string joint_state_channel = "/robot/joint_state";
  std::string command_channel = "/robot/joint_command";
  loop::Duration period = std::chrono::milliseconds(1);
  // Mid-cycle: after the sensors (100 us) and the estimator they trigger.
  loop::Duration phase_offset = std::chrono::microseconds(500);
  ControllerMode mode = ControllerMode::kPosition;
  ControllerGains gains;
  TrajectoryOptions trajectory;
  // The controller's model of the base (feedforward, motor limits).
  PlantParams model = NominalModel();
  loop::Duration estimate_timeout = std::chrono::milliseconds(20);
  // Optional teleoperation input; unused if the stack has no such channel.
  std::string velocity_command_channel = "/robot/velocity_command";
  loop::Duration velocity_command_timeout = std::chrono::milliseconds(500);
};

// Loop thread only. Lives as long as its loop runs.
class ControllerNode {
 public:
  // Makes the fetchers, the sender and the phased loop. Errors name the
  // channel. Setup; allocates.
  static absl::StatusOr<std::unique_ptr<ControllerNode>> Create(
      loop::EventLoop* loop, const ControllerOptions& options = {});
  ControllerNode(const ControllerNode&) = delete;
  ControllerNode& operator=(const ControllerNode&) = delete;

  // Tracking so far (error against the estimate). Loop thread; allocates
  // nothing.
  TrackingSummary summary() const { return tracking_.summary(); }
  // Cycles where tracking was paused for a stale estimate.
  uint64_t stale_cycles() const { return stale_cycles_; }
  uint64_t publish_failures() const { return publish_failures_; }
  // Cycles driven by a velocity command instead of the trajectory.
  uint64_t teleop_cycles() const { return teleop_cycles_; }
  // The reference being tracked (set once tracking started), and the time
  // (on the loop's clock) it started.
  const std::optional<Trajectory>& trajectory() const { return trajectory_; }
  loop::MonotonicTime start_time() const { return start_time_; }

 private:
  ControllerNode(loop::EventLoop* loop, const ControllerOptions& options);
  absl::Status Init();
  // Phased loop. RT-safe.
  void Cycle(int cycles);
  void SendIdle(loop::MonotonicTime now);
  void Sent(transport::PublishResult result);

  loop::EventLoop* const loop_;
  const ControllerOptions options_;
  std::unique_ptr<loop::Fetcher<StateEstimate>> estimate_fetcher_;
  std::unique_ptr<loop::Fetcher<JointState>> joint_state_fetcher_;
  std::unique_ptr<loop::Sender<JointCommand>> sender_;
  std::unique_ptr<loop::Fetcher<VelocityCommand>> velocity_fetcher_;  // or null

  bool ran_ = false;
  uint64_t cycle_ = 0;  // phase points since the first cycle
  // Newest inputs, copied out of their channels.
  bool have_estimate_ = false;
  int64_t estimate_time_ns_ = 0;
  double x_ = 0, y_ = 0, heading_ = 0;
  bool have_wheels_ = false;
  double left_velocity_ = 0, right_velocity_ = 0;
  double left_position_ = 0, right_position_ = 0;

  std::optional<Trajectory> trajectory_;
  loop::MonotonicTime start_time_;
  double left_integral_ = 0, right_integral_ = 0;
  double left_position_target_ = 0, right_position_target_ = 0;
  uint64_t stale_cycles_ = 0;
  uint64_t publish_failures_ = 0;
  // Newest velocity command and when it was sent (loop clock).
  bool have_velocity_command_ = false;
  int64_t velocity_command_ns_ = 0;
  double command_v_ = 0, command_w_ = 0;
  uint64_t teleop_cycles_ = 0;
  TrackingAccumulator tracking_;
};

}  // namespace tether::examples

#endif  // TETHER_EXAMPLES_CONTROLLER_H_
