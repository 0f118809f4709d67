// The bridge's config file (no ROS needed).
#include "ros_bridge/bridge_config.h"

#include <cstdlib>
#include <fstream>
#include <string>

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
