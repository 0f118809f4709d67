// examples: the reference trajectories the demo controller tracks (a figure
// eight or a circle), started from rest with a smooth speed ramp and anchored
// at the robot's pose when tracking begins. Pure functions of time.
#ifndef TETHER_EXAMPLES_TRAJECTORY_H_
#define TETHER_EXAMPLES_TRAJECTORY_H_

#include <string_view>

namespace tether::examples {

enum class TrajectoryShape {
  kFigureEight,  // lemniscate of Gerono: (A sin p, A/2 sin 2p)
  kCircle,       // radius A, counter-clockwise
};

// "figure8" / "circle" -> shape; false if unknown. Any thread.
bool ParseTrajectoryShape(std::string_view name, TrajectoryShape* shape);

struct TrajectoryOptions {
  TrajectoryShape shape = TrajectoryShape::kFigureEight;
  // Figure eight: half its length (x from -A to A); circle: radius.
  double size_m = 1.0;
  // Time for one full figure (after the ramp).
  double period_s = 12.0;
  // Time to reach full speed from rest (smoothstep in speed).
  double ramp_s = 1.0;
  // Where the curve starts relative to the robot's pose at the start, in
  // the robot's frame (x ahead, y to the left). Non-zero: the controller
  // must first converge onto the curve.
  double start_offset_x_m = 0;
  double start_offset_y_m = 0;
};

// Where the robot should be at a time, and the motion that gets it there
// (the controller's feedforward).
struct ReferencePoint {
  double x_m = 0;
  double y_m = 0;
  double heading_rad = 0;  // wrapped to (-pi, pi]
  double velocity_ms = 0;
  double yaw_rate_rads = 0;
  double acceleration_ms2 = 0;
  double yaw_acceleration_rads2 = 0;
};

// Immutable; any thread; At() is RT-safe (no allocation).
class Trajectory {
 public:
  // The robot is at (x0, y0) heading along heading0 when tracking starts;
  // the curve starts there (plus the start offset), heading along heading0.
  Trajectory(const TrajectoryOptions& options, double x0_m, double y0_m,
             double heading0_rad);

  // The reference `t_s` seconds after the start (t < 0: at rest at the
  // start).
  ReferencePoint At(double t_s) const;

  const TrajectoryOptions& options() const { return options_; }

 private:
  TrajectoryOptions options_;
  double x0_, y0_;
  double rotation_;  // from the curve's frame to the world
};

// Wraps an angle to (-pi, pi]. Any thread; RT-safe.
double WrapAngle(double a);

}  // namespace tether::examples

#endif  // TETHER_EXAMPLES_TRAJECTORY_H_
