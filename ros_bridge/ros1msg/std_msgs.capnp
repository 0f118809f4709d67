@0xb2f54f43d3468df5;
# ros_bridge/ros1msg: Cap'n Proto twins of ROS 1 std_msgs, so tether nodes
# read bridged topics as typed messages. Field names are the ROS names in
# camelCase (frame_id -> frameId); typed.h converts both ways, bit for bit.
# Structs whose ROS name is a Cap'n Proto built-in type (Bool, Int8, ...)
# carry a "Msg" suffix.

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("tether::ros1msg::std_msgs");

# The ROS primitive `time`: seconds and nanoseconds since the epoch.
struct RosTime {
  sec @0 :UInt32;
  nsec @1 :UInt32;
}

# The ROS primitive `duration`.
struct RosDuration {
  sec @0 :Int32;
  nsec @1 :Int32;
}

struct BoolMsg { data @0 :Bool; }
struct Int8Msg { data @0 :Int8; }
struct UInt8Msg { data @0 :UInt8; }
struct Int16Msg { data @0 :Int16; }
struct UInt16Msg { data @0 :UInt16; }
struct Int32Msg { data @0 :Int32; }
struct UInt32Msg { data @0 :UInt32; }
struct Int64Msg { data @0 :Int64; }
struct UInt64Msg { data @0 :UInt64; }
struct Float32Msg { data @0 :Float32; }
struct Float64Msg { data @0 :Float64; }
struct String { data @0 :Text; }
struct TimeMsg { data @0 :RosTime; }
struct DurationMsg { data @0 :RosDuration; }

struct Header {
  seq @0 :UInt32;
  stamp @1 :RosTime;
  frameId @2 :Text;
}
