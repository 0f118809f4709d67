// Two tether instances on one ROS graph, joined by a net bridge: a typed
// ROS topic taken into instance a by a's ROS bridge, carried to instance b
// by the net bridges, and published into ROS by b's ROS bridge. b's bridge
// must not publish into the graph what came from it (ROS has it already;
// a's bridge would take b's copy in again and the net bridge would carry it
// back: a storm). A typed message carries no ROS metadata, so only the
// message's origin tag (shm SendTimes::origin), set by a's bridge and
// passed on by the net bridge, can tell b. And two graphs that share an
// address (two robots, each with its master at 127.0.0.1:port), joined the
// same way: a's messages must reach b's graph (the tag is the graph's id,
// /tether/graph, not its master's URI).
//
// In the first test roscore and the ROS bridges run in this host's network
// namespace (ROS on 127.0.0.1); in the second each graph runs in its
// robot's namespace. The two net bridges run in two namespaces joined by a
// veth (tests/net/two_hosts.h), so DDS crosses only that veth. Needs root
// (no sandbox); skipped otherwise. Every wait is bounded; nothing asserts
// on timing.
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "ros_bridge/master_link.h"
#include "ros_bridge/ros1msg/geometry_msgs.capnp.h"
#include "tests/net/two_hosts.h"
#include "tests/ros_bridge/ros_test_env.h"
#include "tests/shm/shm_test_util.h"
#include "transport/channel_handle.h"
#include "transport/typed_endpoints.h"

namespace tether::ros_bridge {
namespace {

using namespace std::chrono_literals;
using Twist = ros1msg::geometry_msgs::Twist;
using testing::Process;
using testing::RosGraph;

constexpr char kChannel[] = "/robot/cmd_vel";

// Lines of a `ros_peer sub` output from `from` on whose callerid starts
// with `caller`.
int Lines(const std::string& output, size_t from, const std::string& caller) {
  int n = 0;
  const std::string key = "callerid=" + caller;
  for (size_t p = output.find(key, from); p != std::string::npos;
       p = output.find(key, p + 1)) {
    ++n;
  }
  return n;
}

class RosNetLoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<net::testing::TwoHosts>> h =
        net::testing::TwoHosts::Create();
    if (!h.ok()) GTEST_SKIP() << h.status();
    hosts_ = std::move(*h);
    ASSERT_TRUE(graph_.Start()) << "roscore did not start";
  }

  void TearDown() override {
    if (HasFailure()) {
      for (const std::string& log : logs_) {
        std::cerr << "--- " << log << " ---\n" << testing::ReadFile(log);
      }
    }
    ros_bridges_.clear();
    hosts_.reset();  // stops the net bridges, deletes the namespaces
  }

  shm::ChannelOptions Instance(int host) const {
    shm::ChannelOptions o = root_.options();
    o.instance = host == 0 ? "a" : "b";
    return o;
  }

  void StartRosBridge(RosGraph& graph, int host, const std::string& direction) {
    const std::string node = host == 0 ? "bridge_a" : "bridge_b";
    auto p = graph.Spawn(
        {testing::Runfile("ros_bridge/ros_bridge"), "--root", root_.root(),
         "--instance", Instance(host).instance, "--node-name", node, "--pair",
         absl::StrCat("/cmd_vel=", kChannel, ",dir=", direction,
                      ",type=geometry_msgs/Twist")},
        node);
    logs_.push_back(p->log());
    ASSERT_TRUE(testing::WaitFor(
        [&] {
          return p->Output().find("joined the ROS master") != std::string::npos;
        },
        20s))
        << p->Output();
    ros_bridges_.push_back(std::move(p));
  }

  void StartNetBridge(int host, const std::string& direction) {
    const std::string name = host == 0 ? "net_a" : "net_b";
    const std::string config = absl::StrCat(
        "{\"name\": \"", name, "\", \"domain\": 7, \"partition\": \"loop\", ",
        "\"interface\": \"", hosts_->interface(host), "\", \"peers\": [\"",
        hosts_->address(1 - host), "\"], \"leaseSeconds\": 1, ",
        "\"announceSeconds\": 0.2, \"channels\": [{\"name\": \"", kChannel,
        "\", \"direction\": \"", direction, "\"}]}");
    const std::string dir = testing::TmpDir();
    const std::string path = absl::StrCat(dir, "/", name, ".json");
    std::ofstream(path) << config;
    const std::string log = absl::StrCat(dir, "/", name, ".log");
    logs_.push_back(log);
    const pid_t pid = hosts_->Spawn(
        host,
        {testing::Runfile("net/net_bridge"), "--config", path, "--root",
         root_.root(), "--instance", Instance(host).instance,
         "--status-interval", "0.1", "--print-interval", "0"},
        log);
    ASSERT_GT(pid, 0);
  }

  std::unique_ptr<transport::ChannelHandle> WaitForChannel(int host) {
    std::unique_ptr<transport::ChannelHandle> h;
    testing::WaitFor(
        [&] {
          auto opened = transport::ChannelHandle::Open(Instance(host), kChannel);
          if (opened.ok()) h = std::move(*opened);
          return h != nullptr;
        },
        20s);
    return h;
  }

  // ROS (graph `ros_a`) -> a's ROS bridge -> instance a -> net bridges ->
  // instance b -> b's ROS bridge -> ROS (graph `ros_b`), on kChannel; the
  // channel's handles in a and b.
  void StartPathFromAToB(RosGraph& ros_a, RosGraph& ros_b,
                         std::unique_ptr<transport::ChannelHandle>* ha,
                         std::unique_ptr<transport::ChannelHandle>* hb) {
    ASSERT_NO_FATAL_FAILURE(StartRosBridge(ros_a, 0, "to-tether"));
    ASSERT_NO_FATAL_FAILURE(StartRosBridge(ros_b, 1, "to-ros"));
    *ha = WaitForChannel(0);
    *hb = WaitForChannel(1);
    ASSERT_NE(*ha, nullptr);
    ASSERT_NE(*hb, nullptr);
    ASSERT_NO_FATAL_FAILURE(StartNetBridge(0, "out"));
    ASSERT_NO_FATAL_FAILURE(StartNetBridge(1, "in"));
  }

  std::unique_ptr<Process> Peer(std::vector<std::string> args) {
    return Peer(graph_, std::move(args));
  }
  std::unique_ptr<Process> Peer(RosGraph& graph, std::vector<std::string> args) {
    std::vector<std::string> argv = {testing::Runfile("tests/ros_bridge/ros_peer")};
    argv.insert(argv.end(), args.begin(), args.end());
    auto p = graph.Spawn(argv, "peer");
    logs_.push_back(p->log());
    return p;
  }

  // The graph's id as its bridges set it (the ROS parameter /tether/graph),
  // 0 if there is none.
  static uint64_t GraphOf(RosGraph& graph) {
    return ParseGraphName(graph.Param("/tether/graph")).value_or(0);
  }

  shm::testing::ScopedRoot root_;
  std::unique_ptr<net::testing::TwoHosts> hosts_;
  RosGraph graph_;
  std::vector<std::unique_ptr<Process>> ros_bridges_;
  std::vector<std::string> logs_;
};

TEST_F(RosNetLoopTest, ATypedRosMessageCarriedToAnotherInstanceIsNotPublishedBack) {
  std::unique_ptr<transport::ChannelHandle> ha, hb;
  ASSERT_NO_FATAL_FAILURE(StartPathFromAToB(graph_, graph_, &ha, &hb));
  auto sub = transport::Subscriber<Twist>::Create(hb.get());
  ASSERT_TRUE(sub.ok()) << sub.status();
  auto listener = Peer({"sub", "/cmd_vel", "100000"});
  ASSERT_TRUE(testing::WaitFor(
      [&] { return listener->Output().find("subscribed") != std::string::npos; },
      10s));

  // The path a -> net -> b -> ROS works for what a tether node made: it
  // reaches the graph through b's bridge (origin 0).
  auto node = transport::Publisher<Twist>::Create(ha.get());
  ASSERT_TRUE(node.ok()) << node.status();
  transport::Message<Twist> m;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        auto loan = (*node)->MakeLoan();
        loan.root().initLinear().setX(7.0);
        (void)(*node)->Send(std::move(loan));
        std::this_thread::sleep_for(50ms);
        return Lines(listener->Output(), 0, "/bridge_b") > 0;
      },
      30s))
      << "a tether node's message never reached ROS through b";
  // Drain b and let the last ones land. b has the node's messages (origin
  // 0) and, once more, those a's bridge took back from ROS (b's bridge
  // published them, another instance's bridge to a's): tagged with the
  // graph, so b's bridge did not publish them again and they stop there.
  const uint64_t origin = GraphOf(graph_);
  ASSERT_NE(origin, 0u) << "no /tether/graph";
  std::this_thread::sleep_for(1s);
  int made_in_a = 0;
  while ((*sub)->Next(&m) == transport::ReceiveStatus::kOk) {
    if (m.context.origin == 0) ++made_in_a;
    else EXPECT_EQ(m.context.origin, origin);
    (*sub)->Release();
  }
  EXPECT_GT(made_in_a, 0);
  const size_t ros_before = listener->Output().size();

  // A ROS node's messages: into a, across to b, and not back into ROS.
  constexpr int kMessages = 20;
  auto teleop = Peer({"twist", "/cmd_vel", "20", std::to_string(kMessages),
                      "0.5", "-0.25"});
  int in_b = 0;
  testing::WaitFor(
      [&] {
        while ((*sub)->Next(&m) == transport::ReceiveStatus::kOk) {
          ++in_b;
          EXPECT_EQ(m.root.getLinear().getX(), 0.5);
          EXPECT_EQ(m.context.origin, origin);
          (*sub)->Release();
        }
        return !teleop->running();
      },
      30s);
  // The teleop node is done; what a loop brought round would keep coming.
  std::this_thread::sleep_for(2s);
  int after = 0;
  while ((*sub)->Next(&m) == transport::ReceiveStatus::kOk) {
    ++after;
    // A late one is still the ROS node's, tagged with a's graph.
    EXPECT_EQ(m.root.getLinear().getX(), 0.5);
    EXPECT_EQ(m.context.origin, origin);
    (*sub)->Release();
  }
  const std::string out = listener->Output();
  // ROS has them from the teleop node only (its first ones may go before
  // its subscribers connect); b's bridge published none of them.
  const int in_ros = Lines(out, ros_before, "/ros_peer");
  EXPECT_GT(in_ros, 0);
  EXPECT_LE(in_ros, kMessages);
  EXPECT_EQ(Lines(out, ros_before, "/bridge_b"), 0) << out.substr(ros_before);
  // b got each at most once (the last ones may land after the teleop node
  // exited) and nothing came round again.
  EXPECT_GT(in_b, 0);
  EXPECT_LE(in_b + after, kMessages);
  listener->Stop();
}

// Two robots, each with its own ROS graph at 127.0.0.1:<port> (one address,
// two graphs), joined by a net bridge: robot a's ROS messages reach robot
// b's ROS. An id made from the master's URI is one id for both graphs, and
// b's bridge dropped every message from a as one that came from its own
// graph.
TEST_F(RosNetLoopTest, TwoGraphsAtOneAddressAreTwoGraphs) {
  RosGraph graph_a(graph_.port(), hosts_->netns(0));
  RosGraph graph_b(graph_.port(), hosts_->netns(1));
  ASSERT_TRUE(graph_a.Start()) << "roscore did not start in " << hosts_->netns(0);
  ASSERT_TRUE(graph_b.Start()) << "roscore did not start in " << hosts_->netns(1);
  std::unique_ptr<transport::ChannelHandle> ha, hb;
  ASSERT_NO_FATAL_FAILURE(StartPathFromAToB(graph_a, graph_b, &ha, &hb));
  const uint64_t id_a = GraphOf(graph_a);
  const uint64_t id_b = GraphOf(graph_b);
  ASSERT_NE(id_a, 0u);
  ASSERT_NE(id_b, 0u);
  EXPECT_NE(id_a, id_b);

  auto sub = transport::Subscriber<Twist>::Create(hb.get());
  ASSERT_TRUE(sub.ok()) << sub.status();
  auto listener = Peer(graph_b, {"sub", "/cmd_vel", "100000"});
  ASSERT_TRUE(testing::WaitFor(
      [&] { return listener->Output().find("subscribed") != std::string::npos; },
      10s));
  auto teleop = Peer(graph_a, {"twist", "/cmd_vel", "20", "100000", "0.5", "-0.25"});
  int in_b = 0;
  transport::Message<Twist> m;
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        while ((*sub)->Next(&m) == transport::ReceiveStatus::kOk) {
          ++in_b;
          EXPECT_EQ(m.context.origin, id_a);
          (*sub)->Release();
        }
        return in_b > 0 && Lines(listener->Output(), 0, "/bridge_b") > 0;
      },
      30s))
      << in_b << " in b; robot b's ROS: " << listener->Output();
  teleop->Stop();
  listener->Stop();
}

}  // namespace
}  // namespace tether::ros_bridge
