// Reference trajectories: start at rest on the robot, and the analytic
// velocities and accelerations (the controller's feedforward) agree with
// the positions they come from.
#include "examples/trajectory.h"

#include <cmath>
#include <numbers>

#include "gtest/gtest.h"

namespace tether::examples {
namespace {

class TrajectoryTest : public ::testing::TestWithParam<TrajectoryShape> {};

TEST_P(TrajectoryTest, StartsAtRestOnTheRobotPoseAndHeading) {
  TrajectoryOptions o;
  o.shape = GetParam();
  const Trajectory t(o, 1.0, -2.0, 0.3);
  const ReferencePoint r = t.At(0.0);
  EXPECT_NEAR(r.x_m, 1.0, 1e-12);
  EXPECT_NEAR(r.y_m, -2.0, 1e-12);
  EXPECT_NEAR(r.heading_rad, 0.3, 1e-12);
  EXPECT_EQ(r.velocity_ms, 0.0);
  EXPECT_EQ(r.yaw_rate_rads, 0.0);
  // Before the start it waits there.
  EXPECT_NEAR(t.At(-1.0).x_m, 1.0, 1e-12);
}

TEST_P(TrajectoryTest, StartOffsetIsInTheRobotsFrame) {
  TrajectoryOptions o;
  o.shape = GetParam();
  o.start_offset_y_m = 0.1;  // to the left of a robot facing +y
  const Trajectory t(o, 0.0, 0.0, std::numbers::pi / 2);
  EXPECT_NEAR(t.At(0.0).x_m, -0.1, 1e-12);
  EXPECT_NEAR(t.At(0.0).y_m, 0.0, 1e-12);
}

TEST_P(TrajectoryTest, DerivativesMatchFiniteDifferences) {
  TrajectoryOptions o;
  o.shape = GetParam();
  const Trajectory t(o, 0.5, 0.5, -1.0);
  const double h = 1e-5;
  for (double time : {0.3, 0.7, 1.0, 2.2, 4.9, 7.5, 11.0}) {
    SCOPED_TRACE(time);
    const ReferencePoint a = t.At(time - h), r = t.At(time), b = t.At(time + h);
    const double vx = (b.x_m - a.x_m) / (2 * h), vy = (b.y_m - a.y_m) / (2 * h);
    EXPECT_NEAR(std::hypot(vx, vy), r.velocity_ms, 1e-6);
    EXPECT_NEAR(std::atan2(vy, vx), r.heading_rad, 1e-6);
    EXPECT_NEAR(WrapAngle(b.heading_rad - a.heading_rad) / (2 * h),
                r.yaw_rate_rads, 1e-5);
    EXPECT_NEAR((b.velocity_ms - a.velocity_ms) / (2 * h), r.acceleration_ms2,
                1e-4);
    EXPECT_NEAR((b.yaw_rate_rads - a.yaw_rate_rads) / (2 * h),
                r.yaw_acceleration_rads2, 1e-4);
  }
}

TEST_P(TrajectoryTest, ClosesAfterOnePeriodPlusHalfTheRamp) {
  TrajectoryOptions o;
  o.shape = GetParam();
  const Trajectory t(o, 0.0, 0.0, 0.0);
  const ReferencePoint end = t.At(o.period_s + o.ramp_s / 2);
  EXPECT_NEAR(end.x_m, 0.0, 1e-9);
  EXPECT_NEAR(end.y_m, 0.0, 1e-9);
  EXPECT_NEAR(WrapAngle(end.heading_rad), 0.0, 1e-9);
  // A quarter of the way it is far from the start.
  const ReferencePoint quarter = t.At(o.period_s / 4 + o.ramp_s / 2);
  EXPECT_GT(std::hypot(quarter.x_m, quarter.y_m), 0.9 * o.size_m);
}

INSTANTIATE_TEST_SUITE_P(Shapes, TrajectoryTest,
                         ::testing::Values(TrajectoryShape::kFigureEight,
                                           TrajectoryShape::kCircle));

TEST(Trajectory, ParsesShapeNames) {
  TrajectoryShape s = TrajectoryShape::kCircle;
  EXPECT_TRUE(ParseTrajectoryShape("figure8", &s));
  EXPECT_EQ(s, TrajectoryShape::kFigureEight);
  EXPECT_TRUE(ParseTrajectoryShape("circle", &s));
  EXPECT_EQ(s, TrajectoryShape::kCircle);
  EXPECT_FALSE(ParseTrajectoryShape("square", &s));
}

}  // namespace
}  // namespace tether::examples
