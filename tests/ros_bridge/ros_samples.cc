#include "tests/ros_bridge/ros_samples.h"

#include <limits>

#include "geometry_msgs/PoseStamped.h"
#include "geometry_msgs/Twist.h"
#include "geometry_msgs/TwistStamped.h"
#include "ros/serialization.h"
#include "sensor_msgs/Image.h"
#include "sensor_msgs/Imu.h"
#include "sensor_msgs/JointState.h"
#include "std_msgs/Duration.h"
#include "std_msgs/Float32.h"
#include "std_msgs/Header.h"
#include "std_msgs/String.h"
#include "std_msgs/UInt64.h"

namespace tether::ros_bridge::testing {
namespace {

template <typename M>
RosSample Sample(const M& m) {
  RosSample s;
  s.type = ros::message_traits::DataType<M>::value();
  s.md5sum = ros::message_traits::MD5Sum<M>::value();
  s.definition = ros::message_traits::Definition<M>::value();
  s.bytes.resize(ros::serialization::serializationLength(m));
  ros::serialization::OStream os(s.bytes.data(), s.bytes.size());
  ros::serialization::serialize(os, m);
  return s;
}

}  // namespace

std::vector<RosSample> RosSamples() {
  std::vector<RosSample> out;
  std_msgs::String str;
  str.data = "hello \xc3\xa9";
  out.push_back(Sample(str));
  std_msgs::Float32 f;
  f.data = -1.25f;
  out.push_back(Sample(f));
  std_msgs::UInt64 u;
  u.data = std::numeric_limits<uint64_t>::max();
  out.push_back(Sample(u));
  std_msgs::Duration d;
  d.data = ros::Duration(-3, 500);
  out.push_back(Sample(d));
  std_msgs::Header h;
  h.seq = 9;
  h.stamp = ros::Time(1700000000, 123);
  h.frame_id = "odom";
  out.push_back(Sample(h));
  geometry_msgs::Twist t;
  t.linear.x = 0.5;
  t.angular.z = -0.25;
  out.push_back(Sample(t));
  geometry_msgs::TwistStamped ts;
  ts.header = h;
  ts.twist = t;
  out.push_back(Sample(ts));
  geometry_msgs::PoseStamped ps;
  ps.header.frame_id = "map";
  ps.pose.position.x = 3;
  ps.pose.orientation.w = 1;
  out.push_back(Sample(ps));
  sensor_msgs::JointState js;
  js.header.seq = 7;
  js.header.stamp = ros::Time(1700000000, 123);
  js.header.frame_id = "base";
  js.name = {"left_wheel", "right_wheel"};
  js.position = {1.0, -2.5};
  js.velocity = {std::numeric_limits<double>::quiet_NaN(), -0.0};
  out.push_back(Sample(js));
  sensor_msgs::Imu imu;
  imu.orientation.w = 1;
  imu.angular_velocity.z = 0.25;
  for (int i = 0; i < 9; ++i) imu.linear_acceleration_covariance[i] = i * 0.1;
  out.push_back(Sample(imu));
  sensor_msgs::Image img;
  img.height = 4;
  img.width = 5;
  img.encoding = "rgb8";
  img.step = 15;
  img.data.resize(60);
  for (size_t i = 0; i < img.data.size(); ++i) img.data[i] = static_cast<uint8_t>(i * 13);
  out.push_back(Sample(img));
  return out;
}

}  // namespace tether::ros_bridge::testing
