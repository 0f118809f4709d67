// What `./tether demo --ros` shows, as a test: the demo stack with the
// bridge (ros_bridge/config/ros_demo_stack.json, through the real launcher)
// driven by an unchanged compiled ROS teleop node publishing
// geometry_msgs/Twist on /cmd_vel, while `rostopic echo /robot/pose` shows
// the robot, as a tether node estimates it, turning and moving as told.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <regex>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "tests/ros_bridge/ros_test_env.h"
#include "tests/shm/shm_test_util.h"

namespace tether::ros_bridge {
namespace {

using namespace std::chrono_literals;

struct Pose {
  double x = 0, y = 0, heading = 0;
};

bool EchoPose(testing::RosGraph& graph, Pose* pose) {
  int code = -1;
  const std::string out =
      graph.RunTool({"rostopic", "echo", "-n", "1", "/robot/pose"}, 15s, &code);
  std::smatch m;
  const std::regex position(R"(position:\s*\n\s*x: (\S+)\s*\n\s*y: (\S+))");
  const std::regex orientation(
      R"(orientation:\s*\n\s*x: \S+\s*\n\s*y: \S+\s*\n\s*z: (\S+)\s*\n\s*w: (\S+))");
  if (code != 0 || !std::regex_search(out, m, position)) return false;
  pose->x = std::stod(m[1]);
  pose->y = std::stod(m[2]);
  if (!std::regex_search(out, m, orientation)) return false;
  pose->heading = 2 * std::atan2(std::stod(m[1]), std::stod(m[2]));
  return true;
}

TEST(RosDemo, AnUnchangedRosTeleopNodeDrivesTheDemoAndRostopicSeesItMove) {
  shm::testing::ScopedRoot root;
  testing::RosGraph graph;
  ASSERT_TRUE(graph.Start());
  // The configs name binaries bazel-bin/<pkg>/<name> and include each other
  // relative to the repo root; in runfiles they are <pkg>/<name>.
  char cwd[4096];
  ASSERT_NE(::getcwd(cwd, sizeof(cwd)), nullptr);
  const std::string work = root.root() + "-work";
  ASSERT_EQ(::mkdir(work.c_str(), 0755), 0);
  ASSERT_EQ(::symlink(cwd, (work + "/bazel-bin").c_str()), 0);
  for (const char* pkg : {"examples", "ros_bridge"}) {
    ASSERT_EQ(::symlink((std::string(cwd) + "/" + pkg).c_str(),
                        (work + "/" + pkg).c_str()),
              0);
  }
  auto launch = graph.Spawn(
      {testing::Runfile("tools/tether"), "launch",
       work + "/ros_bridge/config/ros_demo_stack.json", "--root", root.root(),
       "--instance", "demo", "--duration", "30", "--workdir", work},
      "launch");
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        return graph
                   .RunTool({"rostopic", "info", "/cmd_vel"},
                            testing::kToolTimeout)
                   .find("/tether_bridge") != std::string::npos;
      },
      30s))
      << launch->Output();
  auto teleop = graph.Spawn({testing::Runfile("tests/ros_bridge/ros_peer"), "twist",
                             "/cmd_vel", "20", "0", "0.3", "0.5"},
                            "teleop");
  Pose a, b;
  ASSERT_TRUE(testing::WaitFor([&] { return EchoPose(graph, &a); }, 20s))
      << launch->Output();
  std::this_thread::sleep_for(3s);
  ASSERT_TRUE(EchoPose(graph, &b));
  const double moved = std::hypot(b.x - a.x, b.y - a.y);
  double turned = b.heading - a.heading;
  while (turned < 0) turned += 2 * M_PI;  // counter-clockwise, as commanded
  // v = 0.3 m/s, w = 0.5 rad/s for >= 3 s (plus rostopic's own start-up):
  // a chord of a 0.6 m circle and more than a radian, loosely.
  EXPECT_GT(moved, 0.3) << a.x << "," << a.y << " -> " << b.x << "," << b.y;
  EXPECT_GT(turned, 1.0) << a.heading << " -> " << b.heading;
  EXPECT_LT(turned, 2 * M_PI - 0.1);
  teleop->Stop();
  launch->Stop(15s);
  const std::string out = launch->Output();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      out, m, std::regex(R"(\[controller\] controller: .* (\d+) cycles driven by velocity commands)")))
      << out;
  EXPECT_GT(std::stol(m[1]), 1000);
  EXPECT_NE(out.find("[ros_bridge] ros-bridge: stopping"), std::string::npos) << out;
  if (std::system(("rm -rf '" + work + "'").c_str()) != 0) ADD_FAILURE();
}

}  // namespace
}  // namespace tether::ros_bridge
