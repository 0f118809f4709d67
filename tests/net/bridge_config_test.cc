#include "net/bridge_config.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tether::net {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(BridgeConfig, DefaultsStayOnLoopback) {
  absl::StatusOr<BridgeOptions> o = ParseBridgeConfig(
      R"({"channels": [{"name": "/robot/imu", "direction": "out"}]})", "t.json");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->name, "net-bridge");
  EXPECT_EQ(o->dds.domain, 0u);
  EXPECT_EQ(o->dds.partition, "tether");
  EXPECT_EQ(o->dds.interface, "lo");
  ASSERT_EQ(o->channels.size(), 1u);
  EXPECT_EQ(o->channels[0].reliability, Reliability::kDefault);
  const std::string xml = CycloneConfigXml(o->dds);
  EXPECT_THAT(xml, HasSubstr("<NetworkInterface name=\"lo\"/>"));
  EXPECT_THAT(xml, HasSubstr("<AllowMulticast>false</AllowMulticast>"));
  EXPECT_THAT(xml, HasSubstr("<Peer address=\"127.0.0.1\"/>"));
  EXPECT_THAT(xml, HasSubstr("<SharedMemory><Enable>false</Enable>"));
}

TEST(BridgeConfig, ReadsEveryField) {
  absl::StatusOr<BridgeOptions> o = ParseBridgeConfig(R"({
    "name": "base", "domain": 12, "partition": "robot1/net",
    "interface": "eth1", "peers": ["10.0.0.2", "robot2.local"],
    "leaseSeconds": 2, "announceSeconds": 0.5,
    "channels": [
      {"name": "/robot/imu", "direction": "out", "reliability": "bestEffort",
       "historyDepth": 4, "deadlineMs": 5},
      {"name": "/base/cmd", "direction": "in", "reliability": "reliable"}]})",
                                                      "t.json");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->name, "base");
  EXPECT_EQ(o->dds.domain, 12u);
  EXPECT_EQ(o->dds.partition, "robot1/net");
  EXPECT_EQ(o->dds.peers.size(), 2u);
  EXPECT_EQ(o->channels[0].reliability, Reliability::kBestEffort);
  EXPECT_EQ(o->channels[0].history_depth, 4u);
  EXPECT_EQ(o->channels[0].deadline_ms, 5);
  EXPECT_EQ(o->channels[1].direction, Direction::kIn);
  const std::string xml = CycloneConfigXml(o->dds);
  EXPECT_THAT(xml, HasSubstr("<NetworkInterface name=\"eth1\"/>"));
  EXPECT_THAT(xml, HasSubstr("<Peer address=\"10.0.0.2\"/>"));
  EXPECT_THAT(xml, HasSubstr("<Peer address=\"robot2.local\"/>"));
  EXPECT_THAT(xml, Not(HasSubstr("127.0.0.1")));
  EXPECT_THAT(xml, HasSubstr("<LeaseDuration>2000ms</LeaseDuration>"));
  EXPECT_THAT(xml, HasSubstr("<SPDPInterval>500ms</SPDPInterval>"));
}

TEST(BridgeConfig, MulticastOnlyOnANamedInterfaceWithoutPeers) {
  DdsOptions d;
  d.interface = "eth1";
  EXPECT_THAT(CycloneConfigXml(d),
              HasSubstr("<AllowMulticast>true</AllowMulticast>"));
  d.multicast = false;
  EXPECT_THAT(CycloneConfigXml(d),
              HasSubstr("<AllowMulticast>false</AllowMulticast>"));
}

TEST(BridgeConfig, ListsEveryProblemWithItsField) {
  absl::StatusOr<BridgeOptions> o = ParseBridgeConfig(R"({
    "name": "a b", "domain": 300, "interface": "eth0\"/><x", "peers": [""],
    "leaseSeconds": 0, "channels": [
      {"name": "robot"}, {"name": "/a", "historyDepth": 5000},
      {"name": "/a"}, {"name": "/tether/net/x/status"},
      {"name": "/b", "deadlineMs": -1}]})",
                                                      "t.json");
  ASSERT_FALSE(o.ok());
  const std::string m(o.status().message());
  for (const char* field :
       {"t.json: name:", "t.json: domain:", "t.json: interface:",
        "t.json: peers[0]:", "t.json: leaseSeconds:", "channels[0].name:",
        "channels[1].historyDepth:", "channels[2]: /a is listed twice",
        "channels[3].name:", "channels[4].deadlineMs:"}) {
    EXPECT_THAT(m, HasSubstr(field));
  }
}

TEST(BridgeConfig, UnknownFieldsAndValuesAreErrors) {
  EXPECT_FALSE(ParseBridgeConfig(R"({"channel": []})", "t.json").ok());
  absl::StatusOr<BridgeOptions> o = ParseBridgeConfig(
      R"({"channels": [{"name": "/a", "direction": "sideways"}]})", "t.json");
  ASSERT_FALSE(o.ok());
  EXPECT_THAT(o.status().message(), HasSubstr("t.json"));
  EXPECT_THAT(o.status().message(), HasSubstr("sideways"));
}

TEST(BridgeConfig, UnknownFieldIsNamedWithItsFileLineAndTheValidNames) {
  absl::StatusOr<BridgeOptions> o = ParseBridgeConfig(
      "{\"name\": \"t1\",\n \"channels\": [{\"name\": \"/a\",\n"
      "   \"directon\": \"in\", \"bogus\": 1}]}",
      "t.json");
  ASSERT_FALSE(o.ok());
  const std::string m(o.status().message());
  EXPECT_THAT(m, HasSubstr("t.json:3: channels[0].directon: unknown field; "
                           "did you mean \"direction\"?"));
  EXPECT_THAT(m, HasSubstr("t.json:3: channels[0].bogus: unknown field "
                           "(fields of Channel in channels[0]: name, "
                           "direction, reliability, historyDepth, "
                           "deadlineMs)"));
  EXPECT_THAT(m, HasSubstr("net/bridge_config.capnp"));
  // Not Cap'n Proto's own exception text.
  EXPECT_THAT(m, Not(HasSubstr("field.getName()")));
}

TEST(BridgeConfig, EmptyChannelListSaysWhatToWrite) {
  absl::StatusOr<BridgeOptions> o = ParseBridgeConfig("{}", "t.json");
  ASSERT_FALSE(o.ok());
  EXPECT_THAT(o.status().message(), HasSubstr("channels: empty"));
}

TEST(BridgeConfig, MissingFileIsNotFound) {
  EXPECT_TRUE(absl::IsNotFound(
      LoadBridgeConfig("/nonexistent/net.json").status()));
}

}  // namespace
}  // namespace tether::net
