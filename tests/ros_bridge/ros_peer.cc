// tests/ros_bridge: the "unchanged ROS node" of the bridge tests — a plain
// roscpp program that knows nothing of tether.
//   ros_peer pub TOPIC TYPE MD5 DEFINITION_FILE HEX RATE_HZ COUNT [latch]
//       publishes the serialized bytes HEX as TYPE (ShapeShifter, any type,
//       also types no package defines); COUNT 0: until SIGINT.
//   ros_peer sub TOPIC COUNT
//       prints one line per message: "callerid=.. latching=0|1 type=..
//       md5=.. hex=..", exits 0 after COUNT messages.
//   ros_peer twist TOPIC RATE_HZ COUNT VX WZ
//       a compiled geometry_msgs/Twist publisher (a teleop node).
// Stops on SIGINT (ros's own handler).
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "geometry_msgs/Twist.h"
#include "ros/ros.h"
#include "tests/ros_bridge/ros_test_env.h"
#include "topic_tools/shape_shifter.h"

namespace {

using tether::ros_bridge::testing::FromHex;
using tether::ros_bridge::testing::Hex;

int received = 0;
int wanted = 0;

void OnMessage(const ros::MessageEvent<topic_tools::ShapeShifter const>& e) {
  // ros::spin() runs every callback already queued before it sees the
  // shutdown: print exactly `wanted`.
  if (received >= wanted) return;
  const topic_tools::ShapeShifter& m = *e.getConstMessage();
  std::vector<uint8_t> b(m.size());
  ros::serialization::OStream os(b.data(), b.size());
  m.write(os);
  auto& header = e.getConnectionHeader();
  std::printf("callerid=%s latching=%s type=%s md5=%s hex=%s\n",
              e.getPublisherName().c_str(),
              header.count("latching") ? header["latching"].c_str() : "0",
              m.getDataType().c_str(), m.getMD5Sum().c_str(), Hex(b).c_str());
  std::fflush(stdout);
  if (++received >= wanted) ros::shutdown();
}

}  // namespace

int main(int argc, char** argv) {
  ros::init(argc, argv, "ros_peer", ros::init_options::AnonymousName);
  std::vector<std::string> a(argv + 1, argv + argc);
  if (a.empty()) return 2;
  ros::NodeHandle nh;
  if (a[0] == "pub" && a.size() >= 8) {
    std::ifstream f(a[4]);
    std::stringstream def;
    def << f.rdbuf();
    const bool latch = a.size() > 8 && a[8] == "latch";
    topic_tools::ShapeShifter s;
    s.morph(a[3], a[2], def.str(), latch ? "1" : "0");
    std::vector<uint8_t> bytes = FromHex(a[5]);
    ros::serialization::IStream is(bytes.data(), bytes.size());
    s.read(is);
    ros::Publisher p = s.advertise(nh, a[1], 10, latch);
    ros::Rate rate(std::stod(a[6]));
    const int count = std::stoi(a[7]);
    for (int i = 0; ros::ok() && (count == 0 || i < count); ++i) {
      p.publish(s);
      std::printf("published %d\n", i + 1);
      std::fflush(stdout);
      rate.sleep();
    }
    // Latched: stay up so late subscribers get it.
    while (latch && ros::ok()) ros::Duration(0.05).sleep();
    return 0;
  }
  if (a[0] == "sub" && a.size() >= 3) {
    wanted = std::stoi(a[2]);
    ros::Subscriber s = nh.subscribe(a[1], 100, &OnMessage);
    std::printf("subscribed\n");
    std::fflush(stdout);
    ros::spin();
    return received >= wanted ? 0 : 1;
  }
  if (a[0] == "twist" && a.size() >= 6) {
    ros::Publisher p = nh.advertise<geometry_msgs::Twist>(a[1], 10);
    ros::Rate rate(std::stod(a[2]));
    const int count = std::stoi(a[3]);
    geometry_msgs::Twist t;
    t.linear.x = std::stod(a[4]);
    t.angular.z = std::stod(a[5]);
    for (int i = 0; ros::ok() && (count == 0 || i < count); ++i) {
      p.publish(t);
      rate.sleep();
    }
    return 0;
  }
  std::fprintf(stderr, "ros_peer: bad arguments\n");
  return 2;
}
