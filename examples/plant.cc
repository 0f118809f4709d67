#include "examples/plant.h"

#include <algorithm>
#include <cmath>

namespace tether::examples {
namespace {

struct MassMatrix {
  double a;  // diagonal
  double c;  // off-diagonal
};

MassMatrix MassOf(const PlantParams& p) {
  const double r2 = p.wheel_radius_m * p.wheel_radius_m;
  const double b2 = p.track_width_m * p.track_width_m;
  return {p.wheel_inertia_kgm2 + r2 * (p.mass_kg / 4 + p.yaw_inertia_kgm2 / b2),
          r2 * (p.mass_kg / 4 - p.yaw_inertia_kgm2 / b2)};
}

}  // namespace

double ForwardVelocity(const PlantParams& p, double left_rads,
                       double right_rads) {
  return p.wheel_radius_m * (left_rads + right_rads) / 2;
}

double YawRate(const PlantParams& p, double left_rads, double right_rads) {
  return p.wheel_radius_m * (right_rads - left_rads) / p.track_width_m;
}

double FrictionTorque(const PlantParams& p, double w) {
  return p.viscous_friction_nms * w +
         p.coulomb_friction_nm * std::tanh(w / p.coulomb_smoothing_rads);
}

double LimitMotorTorque(const PlantParams& p, double requested, double w) {
  // Driving (torque along the motion): the torque-speed line. Braking or at
  // rest: the stall torque.
  double limit = p.stall_torque_nm;
  if (requested * w > 0) {
    limit = std::max(0.0, p.stall_torque_nm *
                              (1.0 - std::abs(w) / p.no_load_speed_rads));
  }
  return std::clamp(requested, -limit, limit);
}

void WheelAccelerations(const PlantParams& p, double tau_left,
                        double tau_right, double* alpha_left,
                        double* alpha_right) {
  const MassMatrix m = MassOf(p);
  const double det = m.a * m.a - m.c * m.c;
  *alpha_left = (m.a * tau_left - m.c * tau_right) / det;
  *alpha_right = (m.a * tau_right - m.c * tau_left) / det;
}

void WheelTorques(const PlantParams& p, double alpha_left, double alpha_right,
                  double* tau_left, double* tau_right) {
  const MassMatrix m = MassOf(p);
  *tau_left = m.a * alpha_left + m.c * alpha_right;
  *tau_right = m.c * alpha_left + m.a * alpha_right;
}

DiffDrivePlant::DiffDrivePlant(const PlantParams& params,
                               const PlantState& initial)
    : params_(params), state_(initial) {}

bool DiffDrivePlant::Step(double left_torque_nm, double right_torque_nm,
                          double dt_s, int substeps) {
  substeps = std::max(substeps, 1);
  const double h = dt_s / substeps;
  bool saturated = false;
  for (int i = 0; i < substeps; ++i) {
    saturated |= Substep(left_torque_nm, right_torque_nm, h);
  }
  return saturated;
}

bool DiffDrivePlant::Substep(double left_torque_nm, double right_torque_nm,
                             double h) {
  PlantState& s = state_;
  const double tl =
      LimitMotorTorque(params_, left_torque_nm, s.left_velocity_rads);
  const double tr =
      LimitMotorTorque(params_, right_torque_nm, s.right_velocity_rads);
  double al = 0, ar = 0;
  WheelAccelerations(params_, tl - FrictionTorque(params_, s.left_velocity_rads),
                     tr - FrictionTorque(params_, s.right_velocity_rads), &al,
                     &ar);
  // Semi-implicit Euler: velocities first, positions with the new ones; the
  // pose with the heading at the middle of the step.
  s.left_velocity_rads += al * h;
  s.right_velocity_rads += ar * h;
  s.left_position_rad += s.left_velocity_rads * h;
  s.right_position_rad += s.right_velocity_rads * h;
  const double v =
      ForwardVelocity(params_, s.left_velocity_rads, s.right_velocity_rads);
  const double w = YawRate(params_, s.left_velocity_rads, s.right_velocity_rads);
  const double mid_heading = s.heading_rad + w * h / 2;
  s.x_m += v * std::cos(mid_heading) * h;
  s.y_m += v * std::sin(mid_heading) * h;
  s.heading_rad += w * h;
  s.left_effort_nm = tl;
  s.right_effort_nm = tr;
  s.time_s += h;
  return tl != left_torque_nm || tr != right_torque_nm;
}

}  // namespace tether::examples
