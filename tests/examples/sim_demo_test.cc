// The demo stack -- actuator (with the plant), sensors, estimator,
// controller, monitor -- on a virtual clock, loaded from the real
// examples/config/example_stack.json.
//
// Tracking bound. Position error sources in this simulation: the one-period
// loop delay (sensors sample at 0.1 ms, the command acts from the next 1 ms
// step: at the reference's top speed of 0.74 m/s that is under 1.5 mm of
// travel, which the feedforward mostly cancels), sensor noise (encoders
// 16384 counts/rev, 0.01 rad/s velocity noise, a gyro bias the estimator
// learns), and a controller model 15-25% off the plant (taken up by the
// wheel PI loops). Together they stay at a few tenths of a millimetre
// (measured: 0.3 mm RMS, 0.7 mm max against the true pose). The bounds below
// (2 mm RMS, 5 mm max) leave room for retuning, yet a broken link -- a stale
// estimate, a wrong sign, a lost command stream, a missing feedforward --
// gives errors of centimetres or more.
#include "examples/sim_demo.h"

#include <chrono>
#include <cmath>
#include <cstdio>

#include "examples/summary.h"
#include "examples/trajectory.h"
#include "gtest/gtest.h"

namespace tether::examples {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kConfig[] = "examples/config/example_stack.json";

std::unique_ptr<SimulatedDemo> MakeDemo(
    const SimulatedDemoOptions& options = {}) {
  auto demo = SimulatedDemo::Create(kConfig, options);
  EXPECT_TRUE(demo.ok()) << demo.status();
  return demo.ok() ? std::move(*demo) : nullptr;
}

// The true position error now: plant pose vs the reference for the plant's
// last step.
double FinalTrueError(const SimulatedDemo& demo) {
  const PlantState& truth = demo.actuator().plant().state();
  const auto& trajectory = demo.controller().trajectory();
  if (!trajectory.has_value()) return INFINITY;
  // RunFor ends on a whole millisecond: the plant's last step was then.
  const double t =
      std::chrono::duration<double>(demo.now() - demo.controller().start_time())
          .count();
  const ReferencePoint ref = trajectory->At(t);
  return std::hypot(ref.x_m - truth.x_m, ref.y_m - truth.y_m);
}

TEST(SimulatedDemo, EveryChannelFlowsAtItsRateWithoutLoss) {
  auto demo = MakeDemo();
  ASSERT_NE(demo, nullptr);
  demo->RunFor(seconds(5));
  const SimulatedDemoSummary s = demo->summary();
  std::printf("%s", FormatSummaryTable(s.monitor).c_str());

  // The monitor watches what the config says it reads: every 1 kHz channel.
  ASSERT_EQ(s.monitor.channels.size(), 5u);
  for (const ChannelSummary& c : s.monitor.channels) {
    SCOPED_TRACE(c.name);
    // 5 s at 1 kHz; the sensor chain starts one period after the plant.
    EXPECT_GE(c.received, 4999u);
    EXPECT_LE(c.received, 5000u);
    EXPECT_EQ(c.missed, 0u);
    EXPECT_EQ(c.sent, c.received);
    EXPECT_NEAR(c.rate_hz, 1000.0, 0.01);
    // Virtual time: delivery at the send time.
    EXPECT_EQ(c.latency_max_us, 0.0);
  }
  EXPECT_EQ(s.status_published, 50u);  // 10 Hz

  // Each node did its part every period and lost nothing.
  EXPECT_EQ(s.actuator.steps, 5000u);
  EXPECT_EQ(s.actuator.missed_steps, 0u);
  EXPECT_EQ(s.actuator.missed_commands, 0u);
  // The controller's first (idle) command comes before the first step.
  EXPECT_EQ(s.actuator.stale_steps, 0u);
  EXPECT_EQ(s.actuator.publish_failures, 0u);
  EXPECT_EQ(s.sensors.samples, 4999u);
  EXPECT_EQ(s.sensors.skipped_samples, 1u);  // before the first plant state
  EXPECT_EQ(s.sensors.publish_failures, 0u);
  EXPECT_EQ(s.estimator.updates, 4999u);
  EXPECT_EQ(s.estimator.updates_without_imu, 0u);
  EXPECT_EQ(s.estimator.missed_inputs, 0u);
  EXPECT_EQ(s.controller.cycles, 5000u);
  EXPECT_EQ(s.controller.missed_cycles, 0u);
  EXPECT_EQ(s.controller_stale_cycles, 0u);
}

TEST(SimulatedDemo, ControllerTracksAFullFigureEight) {
  auto demo = MakeDemo();
  ASSERT_NE(demo, nullptr);
  // One whole figure: 12 s of curve time, which the 1 s ramp stretches to
  // 12.5 s; tracking starts 1.5 ms in (the first estimate).
  demo->RunFor(milliseconds(12502));
  const SimulatedDemoSummary s = demo->summary();
  std::printf("controller: %s\ntrue:       %s\nestimation: %s\n",
              FormatTracking(s.controller).c_str(),
              FormatTracking(s.true_tracking).c_str(),
              FormatTracking(s.estimation).c_str());

  // Against the truth (the referee), and as the controller saw it.
  EXPECT_GT(s.true_tracking.tracked_cycles, 12400u);
  EXPECT_LT(s.true_tracking.rms_error_m, 0.002);
  EXPECT_LT(s.true_tracking.max_error_m, 0.005);
  EXPECT_LT(s.true_tracking.rms_heading_error_rad, 0.005);
  EXPECT_LT(s.controller.rms_error_m, 0.002);
  EXPECT_LT(s.controller.max_error_m, 0.005);
  EXPECT_EQ(s.controller.missed_cycles, 0u);
  EXPECT_EQ(s.controller.saturated_cycles, 0u);
  // The estimator follows the truth and learnt the gyro's bias (0.01 rad/s).
  EXPECT_LT(s.estimation.rms_error_m, 0.001);
  EXPECT_NEAR(demo->estimator().gyro_bias_estimate(), 0.01, 0.002);

  // The robot really drove the figure: back at the start after one loop,
  // with about 6 m of wheel travel.
  const PlantState& truth = demo->actuator().plant().state();
  EXPECT_LT(std::hypot(truth.x_m, truth.y_m), 0.01);
  EXPECT_GT(truth.left_position_rad, 50.0);
  EXPECT_GT(truth.right_position_rad, 50.0);
}

TEST(SimulatedDemo, MonitorSeesTheTrackingTheControllerMeasured) {
  auto demo = MakeDemo();
  ASSERT_NE(demo, nullptr);
  demo->RunFor(seconds(3));
  const SimulatedDemoSummary s = demo->summary();
  // The monitor decodes every JointCommand: the same numbers.
  EXPECT_EQ(s.monitor.tracking.cycles, s.controller.cycles);
  EXPECT_EQ(s.monitor.tracking.tracked_cycles, s.controller.tracked_cycles);
  EXPECT_EQ(s.monitor.tracking.missed_cycles, 0u);
  EXPECT_DOUBLE_EQ(s.monitor.tracking.rms_error_m, s.controller.rms_error_m);
  EXPECT_DOUBLE_EQ(s.monitor.tracking.max_error_m, s.controller.max_error_m);
}

TEST(SimulatedDemo, PositionFeedbackPullsTheRobotOntoAnOffsetCurve) {
  // The curve starts 10 cm to the robot's left.
  SimulatedDemoOptions options;
  options.controller.trajectory.start_offset_y_m = 0.1;
  auto demo = MakeDemo(options);
  ASSERT_NE(demo, nullptr);
  demo->RunFor(seconds(6));
  EXPECT_NEAR(demo->summary().controller.max_error_m, 0.1, 0.01);
  EXPECT_LT(FinalTrueError(*demo), 0.005);

  // Without pose feedback (velocity mode) the offset stays.
  options.controller.mode = ControllerMode::kVelocity;
  auto open_loop = MakeDemo(options);
  ASSERT_NE(open_loop, nullptr);
  open_loop->RunFor(seconds(6));
  EXPECT_GT(FinalTrueError(*open_loop), 0.05);
}

void ExpectSameTracking(const TrackingSummary& a, const TrackingSummary& b) {
  EXPECT_EQ(a.cycles, b.cycles);
  EXPECT_EQ(a.tracked_cycles, b.tracked_cycles);
  // Bit for bit: same events, same order, same noise.
  EXPECT_EQ(a.rms_error_m, b.rms_error_m);
  EXPECT_EQ(a.max_error_m, b.max_error_m);
  EXPECT_EQ(a.rms_heading_error_rad, b.rms_heading_error_rad);
}

TEST(SimulatedDemo, TwoRunsGiveIdenticalResults) {
  auto first = MakeDemo();
  auto second = MakeDemo();
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  first->RunFor(seconds(3));
  second->RunFor(milliseconds(1234));  // in pieces: the same events
  second->RunFor(seconds(3) - milliseconds(1234));
  const SimulatedDemoSummary a = first->summary();
  const SimulatedDemoSummary b = second->summary();
  ExpectSameTracking(a.controller, b.controller);
  ExpectSameTracking(a.true_tracking, b.true_tracking);
  ExpectSameTracking(a.estimation, b.estimation);
  const PlantState& pa = first->actuator().plant().state();
  const PlantState& pb = second->actuator().plant().state();
  EXPECT_EQ(pa.x_m, pb.x_m);
  EXPECT_EQ(pa.y_m, pb.y_m);
  EXPECT_EQ(pa.heading_rad, pb.heading_rad);
  EXPECT_EQ(pa.left_velocity_rads, pb.left_velocity_rads);
  EXPECT_EQ(first->estimator().gyro_bias_estimate(),
            second->estimator().gyro_bias_estimate());

  // Another noise seed: another run (so the comparison above could fail).
  SimulatedDemoOptions reseeded;
  reseeded.sensors.seed = 2;
  auto third = MakeDemo(reseeded);
  ASSERT_NE(third, nullptr);
  third->RunFor(seconds(3));
  EXPECT_NE(third->summary().controller.rms_error_m, a.controller.rms_error_m);
}

}  // namespace
}  // namespace tether::examples
