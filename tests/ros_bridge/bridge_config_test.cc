// The bridge's config file and master URI checks (no ROS needed).
#include "ros_bridge/bridge_config.h"

#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tether::ros_bridge {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string Write(const std::string& name, const std::string& json) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path =
      std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
  std::ofstream(path) << json;
  return path;
}

TEST(MasterUri, TheFormsRoscppCanUseAreAccepted) {
  for (const char* uri :
       {"http://localhost:11311", "http://localhost:11311/",
        "http://127.0.0.1:1", "http://my-robot.local:65535/RPC2"}) {
    EXPECT_TRUE(CheckMasterUri(uri, "--master").ok()) << uri;
  }
}

TEST(MasterUri, WhatRoscppCannotSplitOrCannotReachIsRefusedSayingWhy) {
  // roscpp's network::splitURI fails on these (and roscpp then aborts):
  // a scheme other than "http://" or "rosrpc://", in lower case, and a
  // ':' after it are required.
  using Case = std::pair<const char*, const char*>;  // URI, why refused
  for (const auto& [uri, why] : std::vector<Case>{
           {"notauri", "does not start with http://"},
           {"localhost:11311", "does not start with http://"},
           {"HTTP://localhost:11311", "does not start with http://"},
           {"https://localhost:11311", "does not start with http://"},
           {"", "it is empty"},
           {"http://localhost", "has no :PORT"},
           // roscpp splits these into a host and port that cannot work:
           // port 0, host "[", host "".
           {"http://localhost:abc", "the port \"abc\" is not 1..65535"},
           {"http://localhost:", "the port \"\" is not 1..65535"},
           {"http://localhost:99999", "the port \"99999\" is not 1..65535"},
           {"http://localhost:0", "the port \"0\" is not 1..65535"},
           {"http://[::1]:11311", "IPv6"},
           {"http://:11311", "names no host"},
           {"http://a b:11311", "not a host name"}}) {
    absl::Status s = CheckMasterUri(uri, "ROS_MASTER_URI (environment)");
    ASSERT_FALSE(s.ok()) << uri;
    EXPECT_TRUE(absl::IsInvalidArgument(s));
    EXPECT_THAT(s.message(),
                HasSubstr(std::string("ROS_MASTER_URI (environment) \"") +
                          uri + "\" is not a ROS master URI"));
    EXPECT_THAT(s.message(), HasSubstr(why)) << uri;
    EXPECT_THAT(s.message(), HasSubstr("use http://HOST:PORT")) << uri;
  }
}

TEST(BridgeConfigFile, ReadsPairsAndPrefixes) {
  const std::string path = Write("good.json", R"({
    "master": "http://127.0.0.1:11411", "nodeName": "b",
    "pairs": [{"ros": "/a", "tether": "/t/a", "direction": "tetherToRos"}],
    "prefixes": [{"ros": "/sim", "tether": "/ros/sim"}]})");
  BridgeOptions o;
  ASSERT_TRUE(LoadBridgeConfig(path, &o).ok());
  EXPECT_EQ(o.master_uri, "http://127.0.0.1:11411");
  EXPECT_EQ(o.node_name, "b");
  ASSERT_EQ(o.pairs.size(), 1u);
  EXPECT_EQ(o.pairs[0].direction, Direction::kTetherToRos);
  ASSERT_EQ(o.prefixes.size(), 1u);
  EXPECT_EQ(o.prefixes[0].tether, "/ros/sim");
}

TEST(BridgeConfigFile, UnknownFieldIsAnErrorNamingItsPlaceAndTheValidNames) {
  const std::string path = Write(
      "typo.json",
      "{\"pairs\": [\n  {\"ros\": \"/a\", \"tether\": \"/b\",\n"
      "   \"directon\": \"toRos\"}]}");
  BridgeOptions o;
  absl::Status s = LoadBridgeConfig(path, &o);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(),
              HasSubstr(path + ":3: pairs[0].directon: unknown field; did "
                               "you mean \"direction\"?"));
  EXPECT_THAT(s.message(),
              HasSubstr("ros, tether, direction, type, latch, maxSize, "
                        "queueDepth"));
  EXPECT_THAT(s.message(), Not(HasSubstr("net-bridge")));
  EXPECT_TRUE(o.pairs.empty());
}

TEST(BridgeConfigFile, WrongValuesAreNamedToo) {
  const std::string path = Write(
      "values.json",
      R"({"maxSize": "big", "prefixes": [{"ros": "/s", "direction": "up"}]})");
  BridgeOptions o;
  absl::Status s = LoadBridgeConfig(path, &o);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr(path + ":1: maxSize: expected a whole"));
  EXPECT_THAT(s.message(),
              HasSubstr("prefixes[0].direction: \"up\" is not valid; use one "
                        "of \"both\", \"rosToTether\", \"tetherToRos\""));
}

TEST(BridgeConfigFile, ANodeNameOrDepthRosOrTetherCannotTakeIsRefused) {
  const std::string name =
      Write("name.json", R"({"nodeName": "my-bridge", "pairs": [{"ros": "/a"}]})");
  BridgeOptions o;
  absl::Status s = LoadBridgeConfig(name, &o);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(),
              HasSubstr(name + ": nodeName \"my-bridge\" is not a ROS node "
                        "name: '-' is not allowed in it"));
  const std::string depth =
      Write("depth.json", R"({"queueDepth": 6, "pairs": [{"ros": "/a"}]})");
  s = LoadBridgeConfig(depth, &o);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(),
              HasSubstr(depth + ": queueDepth 6 is not a power of two >= 2"));
  EXPECT_TRUE(CheckNodeName("tether_bridge2", "x").ok());
  EXPECT_FALSE(CheckNodeName("", "x").ok());
  EXPECT_FALSE(CheckNodeName("_a", "x").ok());
}

TEST(BridgeConfigFile, ANetBridgeConfigIsRecognised) {
  const std::string path = Write(
      "net.json", R"({"name": "t1", "channels": [{"name": "/robot/imu",
                     "direction": "out"}]})");
  BridgeOptions o;
  absl::Status s = LoadBridgeConfig(path, &o);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr(path + ":1: channels: unknown field"));
  EXPECT_THAT(s.message(),
              HasSubstr("this looks like a net-bridge config (it lists "
                        "\"channels\"); run it with tether net-bridge "
                        "--config " + path));
}

}  // namespace
}  // namespace tether::ros_bridge
