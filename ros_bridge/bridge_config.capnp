@0xea8e8b7aa00492e5;
# ros_bridge: what `tether ros-bridge --config FILE` reads (JSON, field names
# as below, enums by name). Command-line flags fill the same struct.

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("tether::ros_bridge::config");

enum Direction {
  both @0;
  rosToTether @1;
  tetherToRos @2;
}

# One ROS topic <-> one tether channel.
struct Pair {
  ros @0 :Text;
  # The ROS topic, e.g. "/cmd_vel".
  tether @1 :Text;
  # The tether channel, e.g. "/robot/cmd_vel"; empty: the ROS name.
  direction @2 :Direction;
  type @3 :Text;
  # Empty: the channel carries RosEnvelope (any ROS type, custom ones
  # included). A common type ("geometry_msgs/Twist", see
  # ros1msg/typed.h): the channel carries its Cap'n Proto twin instead.
  latch @4 :Bool;
  # Typed tether -> ROS pairs: advertise latched (envelopes say it
  # themselves).
  maxSize @5 :UInt32;
  queueDepth @6 :UInt32;
  # Channel shape when the bridge creates the channel; 0: the defaults.
}

# Every topic under a ROS prefix <-> a tether prefix, also topics that
# appear while the bridge runs.
struct Prefix {
  ros @0 :Text;
  # "/sim" bridges /sim/... ; "/" bridges everything.
  tether @1 :Text;
  # "/ros/sim": ROS /sim/a/b <-> channel /ros/sim/a/b.
  direction @2 :Direction;
}

struct Config {
  master @0 :Text;
  # ROS master URI; empty: $ROS_MASTER_URI.
  nodeName @1 :Text = "tether_bridge";
  pairs @2 :List(Pair);
  prefixes @3 :List(Prefix);
  maxSize @4 :UInt32 = 1048576;
  # Default largest envelope (bytes) of a channel the bridge creates.
  queueDepth @5 :UInt32 = 16;
  # Default depth of a channel the bridge creates.
  rosQueueSize @6 :UInt32 = 16;
  # roscpp subscriber and publisher queues.
  outboxDepth @7 :UInt32 = 16;
  # Messages per topic waiting to be published into ROS; beyond it the
  # oldest is dropped (and counted), so tether's side never waits.
  discoveryPeriodMs @8 :UInt32 = 500;
  # How often prefixes are searched for new topics and channels, and the
  # master is checked.
  statusPeriodMs @9 :UInt32 = 1000;
}
