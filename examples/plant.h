// examples: the demo stack's plant, a two-wheel differential-drive base, as
// plain physics (no event loop, no channels). The actuator node owns one and
// steps it; tests read its true state.
//
// Model: rigid body of mass m and yaw inertia Iz, centre of mass on the wheel
// axle, wheels of radius r at track width b that roll without slipping. With
// wheel angles (phiL, phiR) as coordinates the kinetic energy is
//   T = m/2 v^2 + Iz/2 w^2 + Jw/2 (phiL'^2 + phiR'^2),
//   v = r (phiL' + phiR') / 2,  w = r (phiR' - phiL') / b,
// so the mass matrix is constant (no Coriolis terms):
//   M = [[a, c], [c, a]],  a = Jw + r^2 (m/4 + Iz/b^2),  c = r^2 (m/4 - Iz/b^2)
// and M phi'' = tau - friction(phi'). Each wheel's motor has a stall torque
// and a no-load speed (a torque-speed line: the back-EMF leaves less torque
// the faster a wheel spins in the direction of the torque). Friction per wheel
// is viscous plus Coulomb (smoothed by tanh so the integrator stays smooth).
// Integration: semi-implicit Euler with a fixed substep.
#ifndef TETHER_EXAMPLES_PLANT_H_
#define TETHER_EXAMPLES_PLANT_H_

#include <cstdint>

namespace tether::examples {

// Physical parameters of the base. The defaults are a 20 kg indoor base.
struct PlantParams {
  double mass_kg = 20.0;
  double yaw_inertia_kgm2 = 1.0;
  double wheel_radius_m = 0.1;
  double track_width_m = 0.4;
  // Wheel plus reflected rotor inertia, per wheel.
  double wheel_inertia_kgm2 = 0.02;
  // Friction torque per wheel: viscous * w + coulomb * tanh(w / smoothing).
  double viscous_friction_nms = 0.05;
  double coulomb_friction_nm = 0.2;
  double coulomb_smoothing_rads = 0.02;
  // Motor: torque available at zero speed, and the speed where it reaches 0.
  double stall_torque_nm = 4.0;
  double no_load_speed_rads = 30.0;
};

// The plant's full state: the wheels (its coordinates) and the pose they
// have driven to.
struct PlantState {
  double time_s = 0.0;
  double left_position_rad = 0.0;
  double right_position_rad = 0.0;
  double left_velocity_rads = 0.0;
  double right_velocity_rads = 0.0;
  // Torque the motors actually produced in the last step (after limits).
  double left_effort_nm = 0.0;
  double right_effort_nm = 0.0;
  double x_m = 0.0;
  double y_m = 0.0;
  double heading_rad = 0.0;  // unwrapped
};

// Body velocities from wheel velocities (no slip). Any thread; RT-safe.
double ForwardVelocity(const PlantParams& p, double left_rads,
                       double right_rads);
double YawRate(const PlantParams& p, double left_rads, double right_rads);

// Wheel torque one friction model gives at wheel speed `w` (what opposes the
// motor). Any thread; RT-safe.
double FrictionTorque(const PlantParams& p, double w);

// The torque a motor spinning at `w` can produce towards `requested`:
// `requested` clamped to the torque-speed line. Any thread; RT-safe.
double LimitMotorTorque(const PlantParams& p, double requested, double w);

// Wheel accelerations M^-1 (tau) for wheel torques tau (friction already
// subtracted), and its inverse M alpha. Any thread; RT-safe.
void WheelAccelerations(const PlantParams& p, double tau_left,
                        double tau_right, double* alpha_left,
                        double* alpha_right);
void WheelTorques(const PlantParams& p, double alpha_left, double alpha_right,
                  double* tau_left, double* tau_right);

// Not thread-safe; one owner steps it. Every method is RT-safe (no
// allocation, no syscall).
class DiffDrivePlant {
 public:
  explicit DiffDrivePlant(const PlantParams& params = {},
                          const PlantState& initial = {});

  // Advances by `dt_s` in `substeps` equal steps, holding the requested
  // motor torques (zero-order hold, as a motor drive does between commands).
  // Returns true if a motor limit clipped a request in any substep.
  bool Step(double left_torque_nm, double right_torque_nm, double dt_s,
            int substeps = 1);

  const PlantState& state() const { return state_; }
  const PlantParams& params() const { return params_; }

 private:
  bool Substep(double left_torque_nm, double right_torque_nm, double dt_s);

  PlantParams params_;
  PlantState state_;
};

}  // namespace tether::examples

#endif  // TETHER_EXAMPLES_PLANT_H_
