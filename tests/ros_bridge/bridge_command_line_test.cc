// The ros_bridge binary's command line and config file, refused before it
// needs a ROS master (none runs): a bad pair, a pair that forwards a topic
// or channel again, a master URI roscpp cannot parse, a flag without its
// value, a node name ROS cannot take, an unknown config field, a config
// that bridges nothing. Every wait is bounded.
#include <chrono>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tests/ros_bridge/ros_test_env.h"

namespace tether::ros_bridge {
namespace {

using namespace std::chrono_literals;
using testing::Process;
using testing::RosGraph;

TEST(BridgeCommandLine, BadPairSaysWhatIsWrong) {
  RosGraph graph;  // not started: the bridge must fail before it needs one
  auto p = graph.Spawn({testing::Runfile("ros_bridge/ros_bridge"), "--pair",
                        "chatter"},
                       "bad");
  int code = -1;
  ASSERT_TRUE(p->Wait(10s, &code));
  EXPECT_EQ(code, 2);
  EXPECT_NE(p->Output().find("ROS=TETHER"), std::string::npos) << p->Output();
  auto q = graph.Spawn({testing::Runfile("ros_bridge/ros_bridge"), "--pair",
                        "/x=/y,type=acme_msgs/Nope", "--root",
                        testing::TmpDir() + "/shm_unused"},
                       "bad");
  ASSERT_TRUE(q->Wait(20s, &code));
  EXPECT_EQ(code, 1);
  EXPECT_NE(q->Output().find("has no typed twin"), std::string::npos) << q->Output();
}

// Runs the bridge with no ROS master (it must fail before it needs one),
// `env` added to the test's environment; its exit code and output.
struct Outcome {
  int code = -1;
  std::string output;
};
Outcome RunWithoutMaster(std::vector<std::string> args,
                         std::map<std::string, std::string> env = {}) {
  static int serial = 0;
  args.insert(args.begin(), testing::Runfile("ros_bridge/ros_bridge"));
  Process p(std::move(args), std::move(env),
            testing::TmpDir() + "/no_master_" + std::to_string(serial++) +
                ".log");
  Outcome o;
  EXPECT_TRUE(p.Wait(20s, &o.code)) << "still running";
  o.output = p.Output();
  return o;
}

std::string WriteConfig(const std::string& name, const std::string& json) {
  const std::string path = testing::TmpDir() + "/" + name;
  std::ofstream(path) << json;
  return path;
}

// A second pair for the same ROS topic into tether, or the same channel out
// to ROS, is refused at start (the bridge forwards each one way once),
// naming both pairs; pairs that differ in those are fine together.
TEST(BridgeCommandLine, APairThatForwardsATopicOrChannelAgainIsRefused) {
  const std::string root = testing::TmpDir() + "/shm_unused";
  struct Case {
    std::vector<std::string> pairs;
    std::string says;
  };
  const Case cases[] = {
      {{"/a=/x,dir=to-tether", "/a=/y,dir=to-tether"},
       "pairs /a=/x and /a=/y both forward ROS topic /a"},
      {{"/a=/x", "/b=/x"}, "pairs /a=/x and /b=/x both forward tether channel /x"},
      {{"/a=/x", "/a=/x"}, "pairs /a=/x and /a=/x both forward ROS topic /a"},
  };
  for (const Case& c : cases) {
    // A master nobody serves: the check comes before the bridge needs one.
    std::vector<std::string> args = {"--root", root, "--master",
                                      "http://127.0.0.1:9"};
    for (const std::string& p : c.pairs) {
      args.push_back("--pair");
      args.push_back(p);
    }
    Outcome o = RunWithoutMaster(args);
    EXPECT_EQ(o.code, 1) << o.output;
    EXPECT_NE(o.output.find(c.says), std::string::npos) << o.output;
  }
}

TEST(BridgeCommandLine, MasterUriRoscppCannotParseIsRefusedBeforeRoscppSeesIt) {
  const std::string root = testing::TmpDir() + "/shm_unused";
  // roscpp ROS_BREAK()s (SIGTRAP, exit 133) on these.
  Outcome flag = RunWithoutMaster(
      {"--pair", "/a=/b", "--master", "notauri", "--root", root});
  EXPECT_EQ(flag.code, 2) << flag.output;
  EXPECT_NE(flag.output.find("--master \"notauri\" is not a ROS master URI"),
            std::string::npos)
      << flag.output;
  EXPECT_NE(flag.output.find("use http://HOST:PORT"), std::string::npos)
      << flag.output;
  EXPECT_EQ(flag.output.find("BREAKPOINT"), std::string::npos) << flag.output;

  Outcome env = RunWithoutMaster({"--pair", "/a=/b", "--root", root},
                                 {{"ROS_MASTER_URI", "localhost:11311"}});
  EXPECT_EQ(env.code, 2) << env.output;
  EXPECT_NE(env.output.find("ROS_MASTER_URI (environment) "
                            "\"localhost:11311\""),
            std::string::npos)
      << env.output;
  EXPECT_NE(env.output.find("does not start with http://"), std::string::npos)
      << env.output;

  const std::string config = WriteConfig(
      "bad_master.json",
      R"({"master": "http://[::1]:11311", "pairs": [{"ros": "/a"}]})");
  Outcome file = RunWithoutMaster({"--config", config, "--root", root});
  EXPECT_EQ(file.code, 2) << file.output;
  EXPECT_NE(file.output.find(config + ": master"), std::string::npos)
      << file.output;
  EXPECT_NE(file.output.find("IPv6"), std::string::npos) << file.output;
}

TEST(BridgeCommandLine, FlagWithoutItsValueSaysSo) {
  Outcome o = RunWithoutMaster(
      {"--pair", "--root", testing::TmpDir() + "/shm_unused"});
  EXPECT_EQ(o.code, 2) << o.output;
  EXPECT_NE(o.output.find("--pair needs a value (--root is the next flag)"),
            std::string::npos)
      << o.output;
  Outcome last = RunWithoutMaster({"--pair", "/a=/b", "--master"});
  EXPECT_EQ(last.code, 2) << last.output;
  EXPECT_NE(last.output.find("--master needs a value"), std::string::npos)
      << last.output;
}

// ros::init aborts (SIGABRT) on a node name it cannot take: refused first.
TEST(BridgeCommandLine, ANodeNameRosCannotTakeIsRefusedBeforeRosSeesIt) {
  const std::string root = testing::TmpDir() + "/shm_unused";
  for (const auto& [name, why] :
       std::vector<std::pair<std::string, std::string>>{
           {"1 bad", "does not start with a letter"},
           {"ns/node", "no namespace"},
           {"bad-name", "'-' is not allowed"}}) {
    Outcome o = RunWithoutMaster({"--pair", "/a=/b", "--node-name", name,
                                  "--master", "http://localhost:1",
                                  "--root", root});
    EXPECT_EQ(o.code, 2) << o.output;
    EXPECT_NE(o.output.find("--node-name \"" + name +
                            "\" is not a ROS node name"),
              std::string::npos)
        << o.output;
    EXPECT_NE(o.output.find(why), std::string::npos) << o.output;
  }
  Outcome depth = RunWithoutMaster({"--pair", "/a=/b", "--depth", "12"});
  EXPECT_EQ(depth.code, 2) << depth.output;
  EXPECT_NE(depth.output.find("--depth 12 is not a power of two"),
            std::string::npos)
      << depth.output;
}

TEST(BridgeCommandLine, UnknownConfigFieldIsNamedWithWhereItIs) {
  const std::string config = WriteConfig(
      "typo.json",
      "{\"pairs\": [\n  {\"ros\": \"/a\", \"tether\": \"/b\",\n"
      "   \"directon\": \"toRos\"}]}");
  Outcome o = RunWithoutMaster({"--config", config});
  EXPECT_EQ(o.code, 2) << o.output;
  EXPECT_NE(o.output.find(config + ":3: pairs[0].directon: unknown field; "
                                   "did you mean \"direction\"?"),
            std::string::npos)
      << o.output;
  EXPECT_NE(o.output.find("ros, tether, direction, type, latch"),
            std::string::npos)
      << o.output;
}

TEST(BridgeCommandLine, ConfigThatBridgesNothingSaysSo) {
  const std::string net = WriteConfig(
      "net.json",
      R"({"name": "t1", "channels": [{"name": "/robot/imu"}]})");
  Outcome o = RunWithoutMaster({"--config", net});
  EXPECT_EQ(o.code, 2) << o.output;
  EXPECT_NE(o.output.find("this looks like a net-bridge config"),
            std::string::npos)
      << o.output;
  EXPECT_NE(o.output.find("tether net-bridge --config " + net),
            std::string::npos)
      << o.output;

  const std::string empty = WriteConfig("empty.json", R"({"nodeName": "x"})");
  Outcome e = RunWithoutMaster({"--config", empty});
  EXPECT_EQ(e.code, 2) << e.output;
  EXPECT_NE(e.output.find("the config file " + empty + " bridges nothing: "
                          "it has no \"pairs\" or \"prefixes\" (is it a "
                          "net-bridge config?)"),
            std::string::npos)
      << e.output;
}

}  // namespace
}  // namespace tether::ros_bridge
