// tests/ros_bridge: messages serialized by ROS itself (compiled roscpp
// message types), with ROS's MD5 sums and definitions. Built as C++17:
// ROS's generated message headers do not compile as C++20.
#ifndef TETHER_TESTS_ROS_BRIDGE_ROS_SAMPLES_H_
#define TETHER_TESTS_ROS_BRIDGE_ROS_SAMPLES_H_

#include <cstdint>
#include <string>
#include <vector>

namespace tether::ros_bridge::testing {

struct RosSample {
  std::string type;
  std::string md5sum;
  std::string definition;
  std::vector<uint8_t> bytes;  // one message, as ROS serializes it
};

// One sample per common type: std_msgs String, Float32, UInt64, Duration,
// Header; geometry_msgs Twist, TwistStamped, PoseStamped; sensor_msgs
// JointState (frame "base", names left_wheel/right_wheel, position
// {1, -2.5}, velocity {NaN, -0}), Imu (angular_velocity.z 0.25), Image
// (4x5 rgb8, data[i] = i * 13).
std::vector<RosSample> RosSamples();

}  // namespace tether::ros_bridge::testing

#endif  // TETHER_TESTS_ROS_BRIDGE_ROS_SAMPLES_H_
