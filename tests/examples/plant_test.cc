// The demo plant's physics: mass matrix, kinematics, motor limits, friction.
#include "examples/plant.h"

#include <cmath>

#include "gtest/gtest.h"

namespace tether::examples {
namespace {

TEST(DiffDrivePlant, FirstStepFromRestFollowsTheMassMatrix) {
  const PlantParams p;
  DiffDrivePlant plant(p);
  const double h = 1e-5;
  // At rest friction is zero: alpha = M^-1 tau exactly in the first step.
  plant.Step(1.0, 0.5, h);
  double al = 0, ar = 0;
  WheelAccelerations(p, 1.0, 0.5, &al, &ar);
  EXPECT_NEAR(plant.state().left_velocity_rads, al * h, 1e-12);
  EXPECT_NEAR(plant.state().right_velocity_rads, ar * h, 1e-12);
  // And M (M^-1 tau) = tau.
  double tl = 0, tr = 0;
  WheelTorques(p, al, ar, &tl, &tr);
  EXPECT_NEAR(tl, 1.0, 1e-12);
  EXPECT_NEAR(tr, 0.5, 1e-12);
  // Common mode: (a + c) = Jw + r^2 m / 2.
  double ac = 0, unused = 0;
  WheelAccelerations(p, 1.0, 1.0, &ac, &unused);
  EXPECT_NEAR(ac, 1.0 / (p.wheel_inertia_kgm2 + p.wheel_radius_m *
                                                     p.wheel_radius_m *
                                                     p.mass_kg / 2),
              1e-9);
}

TEST(DiffDrivePlant, EqualTorquesDriveStraightOppositeTorquesTurnInPlace) {
  DiffDrivePlant straight;
  for (int i = 0; i < 1000; ++i) straight.Step(1.0, 1.0, 1e-3, 4);
  EXPECT_GT(straight.state().x_m, 0.1);
  EXPECT_NEAR(straight.state().y_m, 0.0, 1e-12);
  EXPECT_NEAR(straight.state().heading_rad, 0.0, 1e-12);

  DiffDrivePlant spin;
  for (int i = 0; i < 1000; ++i) spin.Step(-1.0, 1.0, 1e-3, 4);
  EXPECT_GT(spin.state().heading_rad, 0.5);  // counter-clockwise
  EXPECT_NEAR(spin.state().x_m, 0.0, 1e-9);
  EXPECT_NEAR(spin.state().y_m, 0.0, 1e-9);
  const PlantState& s = spin.state();
  EXPECT_NEAR(YawRate(spin.params(), s.left_velocity_rads,
                      s.right_velocity_rads),
              2 * spin.params().wheel_radius_m * s.right_velocity_rads /
                  spin.params().track_width_m,
              1e-12);
}

TEST(DiffDrivePlant, MotorsStayBelowTheirNoLoadSpeed) {
  const PlantParams p;
  DiffDrivePlant plant(p);
  bool saturated = false;
  for (int i = 0; i < 10000; ++i) saturated |= plant.Step(100.0, 100.0, 1e-3, 4);
  EXPECT_TRUE(saturated);
  // Top speed: where the torque-speed line meets friction,
  // stall (1 - w / no_load) = viscous w + coulomb.
  const double top = (p.stall_torque_nm - p.coulomb_friction_nm) /
                     (p.stall_torque_nm / p.no_load_speed_rads +
                      p.viscous_friction_nms);
  EXPECT_NEAR(plant.state().left_velocity_rads, top, 0.01);
  EXPECT_LT(top, p.no_load_speed_rads);
  EXPECT_LE(std::abs(plant.state().left_effort_nm), p.stall_torque_nm);
  // Braking gets the full stall torque; driving at speed does not.
  EXPECT_EQ(LimitMotorTorque(p, -100.0, 10.0), -p.stall_torque_nm);
  EXPECT_LT(LimitMotorTorque(p, 100.0, 10.0), p.stall_torque_nm);
}

TEST(DiffDrivePlant, FrictionBringsACoastingBaseToRest) {
  PlantState moving;
  moving.left_velocity_rads = moving.right_velocity_rads = 5.0;
  DiffDrivePlant plant({}, moving);
  for (int i = 0; i < 5000; ++i) {
    EXPECT_FALSE(plant.Step(0.0, 0.0, 1e-3, 4));
  }
  EXPECT_LT(std::abs(plant.state().left_velocity_rads), 0.05);
  EXPECT_GT(plant.state().x_m, 0.1);
  EXPECT_NEAR(plant.state().time_s, 5.0, 1e-9);
}

}  // namespace
}  // namespace tether::examples
