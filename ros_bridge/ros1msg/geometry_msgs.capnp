@0x8c5544cd85fe6c9b;
# ros_bridge/ros1msg: Cap'n Proto twins of common ROS 1 geometry_msgs (see
# std_msgs.capnp for the naming rules).

using Cxx = import "/capnp/c++.capnp";
using Std = import "/ros_bridge/ros1msg/std_msgs.capnp";
$Cxx.namespace("tether::ros1msg::geometry_msgs");

struct Vector3 {
  x @0 :Float64;
  y @1 :Float64;
  z @2 :Float64;
}

struct Point {
  x @0 :Float64;
  y @1 :Float64;
  z @2 :Float64;
}

struct Quaternion {
  x @0 :Float64;
  y @1 :Float64;
  z @2 :Float64;
  w @3 :Float64;
}

struct Pose {
  position @0 :Point;
  orientation @1 :Quaternion;
}

struct PoseStamped {
  header @0 :Std.Header;
  pose @1 :Pose;
}

struct Twist {
  linear @0 :Vector3;
  angular @1 :Vector3;
}

struct TwistStamped {
  header @0 :Std.Header;
  twist @1 :Twist;
}
