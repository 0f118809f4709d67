// ros_bridge: a tether node for `./tether demo --ros` that speaks the ROS
// twins to the demo stack: it follows /ros/cmd_vel (geometry_msgs Twist,
// bridged from ROS's /cmd_vel) with /robot/velocity_command for the
// controller, and publishes the estimator's pose as /ros/pose
// (geometry_msgs PoseStamped, bridged to ROS's /robot/pose) at 20 Hz.
// Usage: demo_adapter --config=ros_bridge/config/ros_demo_adapter.json
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "examples/demo.capnp.h"
#include "examples/demo_schemas.h"
#include "loop/signals.h"
#include "loop/uring_event_loop.h"
#include "ros_bridge/bridge_config.h"
#include "ros_bridge/ros1msg/geometry_msgs.capnp.h"
#include "ros_bridge/ros1msg/typed.h"
#include "transport/channel_set.h"
#include "transport/config.h"
#include "transport/schema_registry.h"

namespace {

namespace geo = tether::ros1msg::geometry_msgs;

int Fail(const std::string& what) {
  std::fprintf(stderr, "demo_adapter: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tether;
  std::string config = "ros_bridge/config/ros_demo_adapter.json";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--config=", 0) == 0) {
      config = a.substr(9);
    } else {
      return Fail("usage: demo_adapter [--config=FILE]");
    }
  }
  const shm::ChannelOptions channel_options =
      ros_bridge::ChannelOptionsFromEnvironment();
  auto signals = loop::StopSignals::Install();
  if (!signals.ok()) return Fail(std::string(signals.status().message()));
  transport::SchemaRegistry schemas;
  examples::RegisterDemoSchemas(&schemas);
  ros1msg::RegisterRosSchemas(&schemas);
  auto stack = transport::LoadStackConfig(config, schemas.known_types());
  if (!stack.ok()) return Fail(std::string(stack.status().message()));
  auto channels = transport::ChannelSet::Create(channel_options, *stack, schemas);
  if (!channels.ok()) return Fail(std::string(channels.status().message()));
  loop::UringEventLoopOptions loop_options;
  loop_options.stop_fd = (*signals)->fd();
  auto loop = loop::UringEventLoop::Create("demo_adapter", channels->get(), loop_options);
  if (!loop.ok()) return Fail(std::string(loop.status().message()));

  auto command = (*loop)->MakeSender<VelocityCommand>("/robot/velocity_command");
  auto pose = (*loop)->MakeSender<geo::PoseStamped>("/ros/pose");
  auto estimate = (*loop)->MakeFetcher<StateEstimate>("/robot/state_estimate");
  if (!command.ok()) return Fail(std::string(command.status().message()));
  if (!pose.ok()) return Fail(std::string(pose.status().message()));
  if (!estimate.ok()) return Fail(std::string(estimate.status().message()));
  uint64_t commands = 0, poses = 0;
  auto watched = (*loop)->MakeWatcher<geo::Twist>(
      "/ros/cmd_vel", [&](geo::Twist::Reader t, const transport::MessageContext& c) {
        auto loan = (*command)->MakeLoan();
        if (!loan.valid()) return;
        loan.root().setSampleTimeNs(c.monotonic_send_ns);
        loan.root().setForwardMs(t.getLinear().getX());
        loan.root().setYawRateRads(t.getAngular().getZ());
        if ((*command)->Send(std::move(loan)).status == transport::PublishStatus::kOk) {
          ++commands;
        }
      });
  if (!watched.ok()) return Fail(std::string(watched.status().message()));
  uint32_t seq = 0;
  (*loop)->AddPhasedLoop(
      [&](int) {
        transport::Message<StateEstimate> m;
        if ((*estimate)->Latest(&m) != transport::ReceiveStatus::kOk) return;
        const double x = m.root.getX(), y = m.root.getY(), h = m.root.getHeading();
        (*estimate)->Release();
        auto loan = (*pose)->MakeLoan();
        if (!loan.valid()) return;
        const int64_t now = (*loop)->realtime_now_ns();
        auto header = loan.root().initHeader();
        header.setSeq(seq++);
        header.initStamp().setSec(static_cast<uint32_t>(now / 1000000000));
        header.getStamp().setNsec(static_cast<uint32_t>(now % 1000000000));
        header.setFrameId("odom");
        auto p = loan.root().initPose();
        p.initPosition().setX(x);
        p.getPosition().setY(y);
        auto q = p.initOrientation();
        q.setZ(std::sin(h / 2));
        q.setW(std::cos(h / 2));
        if ((*pose)->Send(std::move(loan)).status == transport::PublishStatus::kOk) ++poses;
      },
      std::chrono::milliseconds(50));
  std::fprintf(stderr, "demo_adapter: /ros/cmd_vel -> /robot/velocity_command, "
                       "/robot/state_estimate -> /ros/pose (20 Hz)\n");
  (*loop)->Run();
  std::fprintf(stderr, "demo_adapter: %llu velocity commands, %llu poses\n",
               static_cast<unsigned long long>(commands),
               static_cast<unsigned long long>(poses));
  return 0;
}
