// The bridge against a real ROS graph: a private roscore on a free port,
// rostopic and a compiled roscpp node (ros_peer) as the unchanged ROS side,
// the real ros_bridge binary, and tether channels read and written by the
// test (the BridgeTest fixture: bridge_test_fixture.h). Every wait is
// bounded; every process is stopped by pid. Here, what it forwards: exact
// bytes both ways (also of a type no ROS package defines), latched topics,
// typed channels, topics that appear under a prefix; and its channels'
// sizes: too large a message counted and explained, an existing channel
// used as it is, flags over the config file.
#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "ros_bridge/ros1msg/envelope.h"
#include "ros_bridge/ros1msg/geometry_msgs.capnp.h"
#include "tests/ros_bridge/bridge_test_fixture.h"
#include "tests/ros_bridge/ros_test_env.h"
#include "transport/channel_handle.h"
#include "transport/raw_endpoints.h"
#include "transport/typed_endpoints.h"

namespace tether::ros_bridge {
namespace {

using namespace std::chrono_literals;
using testing::BlobBytes;
using testing::BridgeTest;
using testing::Hex;
using testing::kBlobDefinition;
using testing::kBlobMd5;
using testing::kBlobType;
using testing::kStringMd5;

TEST_F(BridgeTest, RostopicPubReachesTetherAsAnEnvelopeWithTheExactBytes) {
  auto bridge = StartBridge({"--pair", "/chatter=/ros/chatter,dir=to-tether"});
  auto h = WaitForChannel("/ros/chatter");
  ASSERT_NE(h, nullptr);
  auto sub = transport::RawSubscriber::Create(h.get(), {.from_oldest = true});
  ASSERT_TRUE(sub.ok());
  auto pub = graph_.Spawn({"rostopic", "pub", "-r", "10", "/chatter",
                           "std_msgs/String", "data: 'hello ros1'"},
                          "rostopic");
  ros1msg::EnvelopeView v;
  std::vector<uint64_t> storage;
  ASSERT_TRUE(NextEnvelope(**sub, &v, &storage)) << bridge->Output();
  EXPECT_EQ(v.header.type, "std_msgs/String");
  EXPECT_EQ(v.header.md5sum, kStringMd5);
  EXPECT_EQ(v.header.definition, "string data\n");
  EXPECT_EQ(Hex(v.data), "0a00000068656c6c6f20726f7331");
  EXPECT_TRUE(absl::StartsWith(std::string(v.header.callerid), "/rostopic"))
      << v.header.callerid;
  EXPECT_EQ(v.header.topic, "/chatter");
  EXPECT_GT(v.header.receive_time_ns, 0);
  EXPECT_EQ(v.header.origin_bridge, "/tether_bridge");
  ros1msg::EnvelopeDecoder decoder;
  auto json = decoder.ToJson(
      {reinterpret_cast<const std::byte*>(storage.data()), storage.size() * 8});
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_NE(json->find("\"message\":{\"data\":\"hello ros1\"}"), std::string::npos)
      << *json;
  pub->Stop();
  EXPECT_EQ(bridge->Stop(), 0) << bridge->Output();
}

TEST_F(BridgeTest, CustomTypeNoPackageDefinesCrossesBothWaysByteForByte) {
  auto bridge = StartBridge({"--pair", "/blob_in=/ros/blob_in,dir=to-tether",
                             "--pair", "/blob_out=/ros/blob_out,dir=to-ros"});
  // ROS -> tether.
  auto h = WaitForChannel("/ros/blob_in");
  ASSERT_NE(h, nullptr);
  auto sub = transport::RawSubscriber::Create(h.get(), {.from_oldest = true});
  ASSERT_TRUE(sub.ok());
  const std::vector<uint8_t> blob = BlobBytes();
  auto talker = Peer({"pub", "/blob_in", kBlobType, kBlobMd5,
                      WriteDefinition(kBlobDefinition), Hex(blob), "10", "0"});
  ros1msg::EnvelopeView v;
  std::vector<uint64_t> storage;
  ASSERT_TRUE(NextEnvelope(**sub, &v, &storage)) << bridge->Output();
  EXPECT_EQ(v.header.type, kBlobType);
  EXPECT_EQ(v.header.md5sum, kBlobMd5);
  EXPECT_EQ(v.header.definition, kBlobDefinition);
  EXPECT_EQ(Hex(v.data), Hex(blob));
  ros1msg::EnvelopeDecoder decoder;
  auto json = decoder.ToJson(
      {reinterpret_cast<const std::byte*>(storage.data()), storage.size() * 8});
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_NE(json->find("{\"name\":\"hi\",\"blob\":[0,255,7],\"v\":[1.5,-2]}"),
            std::string::npos)
      << *json;

  // tether -> ROS: a roscpp subscriber gets the same bytes, type and md5.
  auto listener = Peer({"sub", "/blob_out", "1"});
  ASSERT_TRUE(testing::WaitFor(
      [&] { return listener->Output().find("subscribed") != std::string::npos; }, 10s));
  auto out = EnvelopePublisher("/ros/blob_out");
  ASSERT_NE(out, nullptr);
  std::vector<uint8_t> other = blob;
  other[4] = 'H';
  // Until the subscriber has connected to the bridge's new publication.
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        PublishEnvelope(*out, kBlobType, kBlobMd5, kBlobDefinition, other);
        return listener->Output().find("hex=") != std::string::npos;
      },
      15s))
      << listener->Output() << bridge->Output();
  const std::string line = listener->Output();
  EXPECT_NE(line.find("callerid=/tether_bridge"), std::string::npos) << line;
  EXPECT_NE(line.find(std::string("type=") + kBlobType + " md5=" + kBlobMd5 +
                      " hex=" + Hex(other)),
            std::string::npos)
      << line;
  talker->Stop();
  listener->Stop();
  EXPECT_EQ(bridge->Stop(), 0);
}

TEST_F(BridgeTest, LatchedTopicsStayLatchedBothWays) {
  // A latched ROS message published before the bridge exists.
  const std::vector<uint8_t> blob = BlobBytes();
  auto latched = Peer({"pub", "/map", kBlobType, kBlobMd5,
                       WriteDefinition(kBlobDefinition), Hex(blob), "10", "1",
                       "latch"});
  ASSERT_TRUE(testing::WaitFor(
      [&] { return latched->Output().find("published 1") != std::string::npos; }, 10s));
  // And a latched envelope sent in tether before the bridge exists.
  auto out = CreateEnvelopeChannel("/ros/config");
  PublishEnvelope(*out, kBlobType, kBlobMd5, kBlobDefinition, blob, /*latching=*/true);
  auto bridge = StartBridge({"--pair", "/map=/ros/map,dir=to-tether", "--pair",
                             "/config=/ros/config,dir=to-ros"});
  auto h = WaitForChannel("/ros/map");
  ASSERT_NE(h, nullptr);
  auto sub = transport::RawSubscriber::Create(h.get(), {.from_oldest = true});
  ASSERT_TRUE(sub.ok());
  ros1msg::EnvelopeView v;
  std::vector<uint64_t> storage;
  ASSERT_TRUE(NextEnvelope(**sub, &v, &storage)) << bridge->Output();
  EXPECT_TRUE(v.header.latching);
  EXPECT_EQ(Hex(v.data), Hex(blob));
  // Only once, although the latched message is sent on each connection.
  EXPECT_FALSE(NextEnvelope(**sub, &v, &storage, 1500ms));

  // tether -> ROS: the latched envelope sent before the bridge and any ROS
  // subscriber existed reaches a subscriber that comes later.
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        std::string info = graph_.RunTool(
            {"rostopic", "info", "/config"}, testing::kToolTimeout);
        return info.find("/tether_bridge") != std::string::npos;
      },
      15s));
  auto late = Peer({"sub", "/config", "1"});
  int code = -1;
  ASSERT_TRUE(late->Wait(15s, &code)) << late->Output();
  EXPECT_EQ(code, 0);
  EXPECT_NE(late->Output().find("latching=1"), std::string::npos) << late->Output();
  EXPECT_NE(late->Output().find("hex=" + Hex(blob)), std::string::npos);
  latched->Stop();
  EXPECT_EQ(bridge->Stop(), 0);
}

TEST_F(BridgeTest, TypedTwistFromACompiledRosNodeAndTypedPoseIntoRostopic) {
  auto bridge = StartBridge(
      {"--pair", "/cmd_vel=/robot/cmd_vel,dir=to-tether,type=geometry_msgs/Twist",
       "--pair", "/pose=/robot/pose,dir=to-ros,type=geometry_msgs/Pose"});
  auto h = WaitForChannel("/robot/cmd_vel");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->type_id(), capnp::typeId<ros1msg::geometry_msgs::Twist>());
  auto sub = transport::Subscriber<ros1msg::geometry_msgs::Twist>::Create(h.get());
  ASSERT_TRUE(sub.ok()) << sub.status();
  auto teleop = Peer({"twist", "/cmd_vel", "20", "0", "0.5", "-0.25"});
  transport::Message<ros1msg::geometry_msgs::Twist> m;
  ASSERT_TRUE(testing::WaitFor(
      [&] { return (*sub)->Next(&m) == transport::ReceiveStatus::kOk; }, 15s))
      << bridge->Output();
  EXPECT_EQ(m.root.getLinear().getX(), 0.5);
  EXPECT_EQ(m.root.getAngular().getZ(), -0.25);
  (*sub)->Release();
  teleop->Stop();

  // Typed channel -> ROS: advertised at once (type known), so rostopic
  // sees the publisher before any message.
  auto hp = WaitForChannel("/robot/pose");
  ASSERT_NE(hp, nullptr);
  auto pub = transport::Publisher<ros1msg::geometry_msgs::Pose>::Create(hp.get());
  ASSERT_TRUE(pub.ok()) << pub.status();
  std::string echo;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        std::string info = graph_.RunTool(
            {"rostopic", "info", "/pose"}, testing::kToolTimeout);
        return info.find("geometry_msgs/Pose") != std::string::npos;
      },
      15s));
  auto echoer = graph_.Spawn({"rostopic", "echo", "-n", "1", "/pose"}, "echo");
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        auto loan = (*pub)->MakeLoan();
        loan.root().initPosition().setX(1.5);
        loan.root().initOrientation().setW(1.0);
        (void)(*pub)->Send(std::move(loan));
        return !echoer->running();
      },
      20s))
      << echoer->Output();
  EXPECT_NE(echoer->Output().find("x: 1.5"), std::string::npos) << echoer->Output();
  EXPECT_NE(echoer->Output().find("w: 1.0"), std::string::npos) << echoer->Output();
  EXPECT_EQ(bridge->Stop(), 0);
}

TEST_F(BridgeTest, SubscribesAtOnceAndBridgesTopicsThatAppearUnderAPrefix) {
  auto bridge = StartBridge({"--pair", "/early=/ros/early,dir=to-tether",
                             "--prefix", "/sim=/ros/sim"});
  // The subscription exists before any publisher does.
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        std::string info = graph_.RunTool(
            {"rostopic", "info", "/early"}, testing::kToolTimeout);
        return info.find("/tether_bridge") != std::string::npos;
      },
      15s));
  // A topic that appears under the prefix while the bridge runs.
  const std::vector<uint8_t> blob = BlobBytes();
  auto talker = Peer({"pub", "/sim/lidar/points", kBlobType, kBlobMd5,
                      WriteDefinition(kBlobDefinition), Hex(blob), "10", "0"});
  auto h = WaitForChannel("/ros/sim/lidar/points");
  ASSERT_NE(h, nullptr) << bridge->Output();
  auto sub = transport::RawSubscriber::Create(h.get(), {.from_oldest = true});
  ros1msg::EnvelopeView v;
  std::vector<uint64_t> storage;
  ASSERT_TRUE(NextEnvelope(**sub, &v, &storage));
  EXPECT_EQ(Hex(v.data), Hex(blob));
  talker->Stop();

  // A tether channel that appears under the prefix goes to ROS.
  auto listener = Peer({"sub", "/sim/from_tether", "1"});
  auto pub = CreateEnvelopeChannel("/ros/sim/from_tether");
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        PublishEnvelope(*pub, kBlobType, kBlobMd5, kBlobDefinition, blob);
        return !listener->running();
      },
      20s))
      << listener->Output() << bridge->Output();
  EXPECT_NE(listener->Output().find("hex=" + Hex(blob)), std::string::npos);
  EXPECT_EQ(bridge->Stop(), 0);
}

TEST_F(BridgeTest, MessageLargerThanTheChannelIsCountedAndExplained) {
  auto bridge = StartBridge({"--pair", "/big=/ros/big,dir=to-tether,max_size=256"});
  std::vector<uint8_t> big = {4, 0, 0, 0, 'b', 'i', 'g', '!'};
  big.push_back(0x00);
  big.push_back(0x04);
  big.push_back(0);
  big.push_back(0);  // 1024 bytes of blob
  big.resize(big.size() + 1024, 0xab);
  big.resize(big.size() + 16, 0);
  auto talker = Peer({"pub", "/big", kBlobType, kBlobMd5,
                      WriteDefinition(kBlobDefinition), Hex(big), "20", "0"});
  Status st;
  ASSERT_TRUE(testing::WaitFor([&] { return LatestStatus(&st) && st.too_large > 0; },
                               15s))
      << bridge->Output();
  EXPECT_NE(st.error.find("maxSize"), std::string::npos) << st.error;
  // The channel is the bridge's own: the fix names the bridge's settings.
  EXPECT_NE(st.error.find("max_size= on the pair (or --max-size)"),
            std::string::npos)
      << st.error;
  EXPECT_NE(st.error.find("tether clean --root"), std::string::npos) << st.error;
  talker->Stop();
  EXPECT_EQ(bridge->Stop(), 0);
}

// A channel that exists keeps its size: a bridge that asks for a larger
// one says so at start, with the fix; one that asks nothing says nothing.
TEST_F(BridgeTest, AnExistingSmallerChannelIsUsedAsItIsAndTheBridgeSaysSo) {
  auto keep = CreateEnvelopeChannel("/ros/small");  // maxSize 4096, depth 8
  auto asked = StartBridge({"--pair", "/small=/ros/small,max_size=65536"});
  EXPECT_EQ(asked->Stop(), 0) << asked->Output();
  EXPECT_NE(asked->Output().find("channel /ros/small exists with maxSize 4096 "
                                 "and queueDepth 8, less than the 65536 and 16 "
                                 "asked for"),
            std::string::npos)
      << asked->Output();
  EXPECT_NE(asked->Output().find("tether clean --root"), std::string::npos)
      << asked->Output();
  auto plain = StartBridge({"--pair", "/small=/ros/small"});
  EXPECT_EQ(plain->Stop(), 0) << plain->Output();
  EXPECT_EQ(plain->Output().find("exists with maxSize"), std::string::npos)
      << plain->Output();
}

// The flags given on the command line win over the --config file's
// settings (maxSize and queueDepth were reset by the file).
TEST_F(BridgeTest, FlagsWinOverTheConfigFile) {
  const std::string config = testing::TmpDir() + "/flags_win.json";
  std::ofstream(config) << R"({"maxSize": 4096, "queueDepth": 4,
      "pairs": [{"ros": "/cfg", "tether": "/ros/cfg",
                 "direction": "rosToTether"}]})";
  auto bridge = StartBridge(
      {"--config", config, "--max-size", "8192", "--depth", "32"});
  auto h = WaitForChannel("/ros/cfg");
  ASSERT_NE(h, nullptr) << bridge->Output();
  EXPECT_EQ(h->max_size(), 8192u);
  EXPECT_EQ(h->params().queue_depth, 32u);
  EXPECT_EQ(bridge->Stop(), 0) << bridge->Output();
}

}  // namespace
}  // namespace tether::ros_bridge
