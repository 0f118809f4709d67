@0xe4c1a7d35b9f2c08;
# The demo control stack's messages: a two-wheel base (plant) sampled by a
# sensor node, estimated, controlled at 1 kHz and actuated.

struct Vector3 {
  x @0 :Float64;
  y @1 :Float64;
  z @2 :Float64;
}

struct ImuSample {
  sampleTimeNs @0 :Int64;
  angularVelocity @1 :Vector3;
  linearAcceleration @2 :Vector3;
  temperatureC @3 :Float32;
}

struct JointState {
  sampleTimeNs @0 :Int64;
  leftPositionRad @1 :Float64;
  rightPositionRad @2 :Float64;
  leftVelocityRadS @3 :Float64;
  rightVelocityRadS @4 :Float64;
  leftEffortNm @5 :Float64;
  rightEffortNm @6 :Float64;
}

struct StateEstimate {
  sampleTimeNs @0 :Int64;
  x @1 :Float64;
  y @2 :Float64;
  heading @3 :Float64;
  forwardVelocity @4 :Float64;
  yawRate @5 :Float64;
  covarianceTrace @6 :Float64;
}

# A control command of about twenty scalars: what a 1 kHz controller sends.
struct JointCommand {
  cycle @0 :UInt64;
  sampleTimeNs @1 :Int64;
  leftEffortNm @2 :Float64;
  rightEffortNm @3 :Float64;
  leftVelocityTarget @4 :Float64;
  rightVelocityTarget @5 :Float64;
  leftPositionTarget @6 :Float64;
  rightPositionTarget @7 :Float64;
  kp @8 :Float32;
  ki @9 :Float32;
  kd @10 :Float32;
  feedForward @11 :Float32;
  trackingErrorX @12 :Float64;
  trackingErrorY @13 :Float64;
  trackingErrorHeading @14 :Float64;
  referenceX @15 :Float64;
  referenceY @16 :Float64;
  referenceHeading @17 :Float64;
  saturated @18 :Bool;
  enabled @19 :Bool;
  mode @20 :Mode;

  enum Mode {
    idle @0;
    velocity @1;
    effort @2;
    emergencyStop @3;
  }
}

# A velocity target for the base (teleoperation, e.g. a ROS geometry_msgs/
# Twist through the ROS bridge). While fresh, the controller follows it
# instead of its trajectory.
struct VelocityCommand {
  sampleTimeNs @0 :Int64;
  forwardMs @1 :Float64;
  # Forward speed, m/s.
  yawRateRads @2 :Float64;
  # Turn rate, rad/s (counter-clockwise).
}

# Published by the monitor node at 10 Hz: totals since the monitor started.
struct MonitorStatus {
  timeNs @0 :Int64;
  channels @1 :List(ChannelHealth);
  note @2 :Text;
  # Empty when every channel is healthy; else what is wrong, briefly.
  tracking @3 :TrackingHealth;
  # The controller's tracking as its JointCommands report it.
  elapsedS @4 :Float64;
  # Seconds since the monitor started.

  struct ChannelHealth {
    name @0 :Text;
    received @1 :UInt64;
    missed @2 :UInt64;
    latencyP50Us @3 :Float64;
    latencyP99Us @4 :Float64;
    # Send -> receive (the monitor's receive) latency percentiles.
    sent @5 :UInt64;
    # Messages sent on the channel while the monitor watched it (from queue
    # indices: received + missed when nothing is lost silently).
    latencyMaxUs @6 :Float64;
    rateHz @7 :Float64;
    # Received messages per second since the channel's first message.
    malformed @8 :UInt64;
    # Messages skipped because their bytes failed the typed check.
  }

  struct TrackingHealth {
    cycles @0 :UInt64;
    # Controller cycles seen (JointCommands received).
    missedCycles @1 :UInt64;
    # Phase points the controller skipped (gaps in JointCommand.cycle).
    trackedCycles @2 :UInt64;
    # Cycles with tracking enabled (the error statistics cover these).
    rmsErrorM @3 :Float64;
    maxErrorM @4 :Float64;
    rmsHeadingErrorRad @5 :Float64;
    saturatedCycles @6 :UInt64;
  }
}
