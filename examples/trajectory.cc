#include "examples/trajectory.h"

#include <cmath>
#include <numbers>

namespace tether::examples {
namespace {

struct Vec2 {
  double x, y;
};

double Cross(Vec2 a, Vec2 b) { return a.x * b.y - a.y * b.x; }
double Dot(Vec2 a, Vec2 b) { return a.x * b.x + a.y * b.y; }

// The curve p(phi) and its first three derivatives in phi.
struct CurvePoint {
  Vec2 p, d1, d2, d3;
};

CurvePoint Curve(TrajectoryShape shape, double a, double phi) {
  const double s = std::sin(phi), c = std::cos(phi);
  if (shape == TrajectoryShape::kCircle) {
    return {{a * s, a * (1 - c)}, {a * c, a * s}, {-a * s, a * c},
            {-a * c, -a * s}};
  }
  const double s2 = std::sin(2 * phi), c2 = std::cos(2 * phi);
  return {{a * s, a / 2 * s2},
          {a * c, a * c2},
          {-a * s, -2 * a * s2},
          {-a * c, -4 * a * c2}};
}

}  // namespace

bool ParseTrajectoryShape(std::string_view name, TrajectoryShape* shape) {
  if (name == "figure8") {
    *shape = TrajectoryShape::kFigureEight;
  } else if (name == "circle") {
    *shape = TrajectoryShape::kCircle;
  } else {
    return false;
  }
  return true;
}

double WrapAngle(double a) {
  a = std::remainder(a, 2 * std::numbers::pi);
  return a <= -std::numbers::pi ? a + 2 * std::numbers::pi : a;
}

Trajectory::Trajectory(const TrajectoryOptions& options, double x0_m,
                       double y0_m, double heading0_rad)
    : options_(options),
      x0_(x0_m + std::cos(heading0_rad) * options.start_offset_x_m -
          std::sin(heading0_rad) * options.start_offset_y_m),
      y0_(y0_m + std::sin(heading0_rad) * options.start_offset_x_m +
          std::cos(heading0_rad) * options.start_offset_y_m) {
  const CurvePoint start = Curve(options_.shape, options_.size_m, 0.0);
  rotation_ = heading0_rad - std::atan2(start.d1.y, start.d1.x);
}

ReferencePoint Trajectory::At(double t_s) const {
  // Warped time sigma(t): speed ramps up with a smoothstep over ramp_s.
  const double tr = options_.ramp_s;
  double sigma = 0, sigma_d = 0, sigma_dd = 0;
  if (t_s <= 0) {
  } else if (tr > 0 && t_s < tr) {
    const double u = t_s / tr;
    sigma = tr * (u * u * u - u * u * u * u / 2);
    sigma_d = 3 * u * u - 2 * u * u * u;
    sigma_dd = (6 * u - 6 * u * u) / tr;
  } else {
    sigma = tr / 2 + (t_s - tr);
    sigma_d = 1;
  }
  const double omega = 2 * std::numbers::pi / options_.period_s;
  const double phi = omega * sigma;
  const double phi_d = omega * sigma_d;
  const double phi_dd = omega * sigma_dd;

  const CurvePoint c = Curve(options_.shape, options_.size_m, phi);
  const CurvePoint c0 = Curve(options_.shape, options_.size_m, 0.0);
  const double n2 = Dot(c.d1, c.d1);
  const double n = std::sqrt(n2);
  // Curvature per unit phi (k = p' x p'' / |p'|^2) and its phi-derivative.
  const double k = Cross(c.d1, c.d2) / n2;
  const double dk = Cross(c.d1, c.d3) / n2 -
                    2 * Cross(c.d1, c.d2) * Dot(c.d1, c.d2) / (n2 * n2);

  const double cr = std::cos(rotation_), sr = std::sin(rotation_);
  const double px = c.p.x - c0.p.x, py = c.p.y - c0.p.y;
  ReferencePoint r;
  r.x_m = x0_ + cr * px - sr * py;
  r.y_m = y0_ + sr * px + cr * py;
  r.heading_rad = WrapAngle(std::atan2(c.d1.y, c.d1.x) + rotation_);
  r.velocity_ms = n * phi_d;
  r.yaw_rate_rads = k * phi_d;
  r.acceleration_ms2 = Dot(c.d1, c.d2) / n * phi_d * phi_d + n * phi_dd;
  r.yaw_acceleration_rads2 = dk * phi_d * phi_d + k * phi_dd;
  return r;
}

}  // namespace tether::examples
