@0x901bdb93c7ea4c32;
# ros_bridge/ros1msg: Cap'n Proto twins of common ROS 1 sensor_msgs (see
# std_msgs.capnp for the naming rules). uint8[] fields are Data.

using Cxx = import "/capnp/c++.capnp";
using Std = import "/ros_bridge/ros1msg/std_msgs.capnp";
using Geometry = import "/ros_bridge/ros1msg/geometry_msgs.capnp";
$Cxx.namespace("tether::ros1msg::sensor_msgs");

struct JointState {
  header @0 :Std.Header;
  name @1 :List(Text);
  position @2 :List(Float64);
  velocity @3 :List(Float64);
  effort @4 :List(Float64);
}

struct Imu {
  header @0 :Std.Header;
  orientation @1 :Geometry.Quaternion;
  orientationCovariance @2 :List(Float64);
  # float64[9] in ROS: exactly 9 entries (row major).
  angularVelocity @3 :Geometry.Vector3;
  angularVelocityCovariance @4 :List(Float64);
  linearAcceleration @5 :Geometry.Vector3;
  linearAccelerationCovariance @6 :List(Float64);
}

struct Image {
  header @0 :Std.Header;
  height @1 :UInt32;
  width @2 :UInt32;
  encoding @3 :Text;
  isBigendian @4 :UInt8;
  step @5 :UInt32;
  data @6 :Data;
}
