// The bridge against a real ROS graph (the BridgeTest fixture:
// bridge_test_fixture.h), as one of several in it: a latched message taken
// in from this graph is not sent back; two bridges, of two tether instances
// or of one, never echo or loop a message; the graph's id is kept true and
// a change of it followed; a restart of the ROS master is survived and
// stated in the bridge's status.
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "ros_bridge/master_link.h"
#include "ros_bridge/ros1msg/envelope.h"
#include "tests/ros_bridge/bridge_test_fixture.h"
#include "tests/ros_bridge/ros_test_env.h"
#include "transport/raw_endpoints.h"

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

TEST_F(BridgeTest, ALatchedMessageFromThisGraphIsNotSentBackAtStart) {
  // The graph's id as an earlier run of the bridge set it, and a latched
  // envelope that run took in from ROS (its origin graph is that id).
  const std::string id = "abcdef0123456789";
  int code = -1;
  graph_.RunTool({"rosparam", "set", "/tether/graph", id}, testing::kToolTimeout,
                 &code);
  ASSERT_EQ(code, 0);
  const std::vector<uint8_t> blob = BlobBytes();
  auto out = CreateEnvelopeChannel("/ros/config");
  PublishEnvelope(*out, kBlobType, kBlobMd5, kBlobDefinition, blob,
                  /*latching=*/true, id);
  // The bridge starts with its provisional id and replays the latched
  // message before it has read the graph's: ROS has it already, so it must
  // not go back in.
  auto bridge = StartBridge({"--pair", "/config=/ros/config,dir=to-ros"});
  auto late = Peer({"sub", "/config", "1"});
  EXPECT_FALSE(late->Wait(4s, &code)) << late->Output() << bridge->Output();
  // A tether node's latched message does go in (and the late subscriber
  // gets it, not the earlier one).
  std::vector<uint8_t> other = blob;
  other[4] = 'H';
  PublishEnvelope(*out, kBlobType, kBlobMd5, kBlobDefinition, other,
                  /*latching=*/true);
  ASSERT_TRUE(late->Wait(15s, &code)) << late->Output() << bridge->Output();
  EXPECT_EQ(code, 0);
  EXPECT_NE(late->Output().find("hex=" + Hex(other)), std::string::npos)
      << late->Output();
  EXPECT_EQ(late->Output().find("hex=" + Hex(blob)), std::string::npos)
      << late->Output();
  EXPECT_EQ(bridge->Stop(), 0) << bridge->Output();
}

TEST_F(BridgeTest, TwoBridgesOfTwoTetherInstancesNeverEchoAMessage) {
  // Instance a and instance b both bridge /chatter <-> /ros/chatter, both
  // ways, through one ROS graph: a message made in a reaches ROS once and b
  // once, and nothing comes back.
  auto a = StartBridge({"--pair", "/chatter=/ros/chatter"}, "a", "bridge_a");
  auto b = StartBridge({"--pair", "/chatter=/ros/chatter"}, "b", "bridge_b");
  auto listener = Peer({"sub", "/chatter", "1000"});
  ASSERT_TRUE(testing::WaitFor(
      [&] { return listener->Output().find("subscribed") != std::string::npos; }, 10s));
  auto hb = WaitForChannel("/ros/chatter", "b");
  auto ha = WaitForChannel("/ros/chatter", "a");
  ASSERT_NE(hb, nullptr);
  ASSERT_NE(ha, nullptr);
  auto sub_a = transport::RawSubscriber::Create(ha.get());
  auto sub_b = transport::RawSubscriber::Create(hb.get());
  ASSERT_TRUE(sub_a.ok() && sub_b.ok());
  auto out = EnvelopePublisher("/ros/chatter", "a");
  // Wait until the whole path is connected, then count exactly.
  ros1msg::EnvelopeView v;
  std::vector<uint64_t> storage;
  std::vector<uint8_t> hello = {1, 0, 0, 0, '0'};
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        PublishEnvelope(*out, "std_msgs/String", kStringMd5, "string data\n", hello);
        return NextEnvelope(**sub_b, &v, &storage, 200ms);
      },
      20s))
      << a->Output() << b->Output();
  std::this_thread::sleep_for(1s);
  while (NextEnvelope(**sub_b, &v, &storage, 100ms)) {
  }
  const size_t ros_before = listener->Output().size();
  // Drain a: it has our own messages only.
  int own = 0;
  while (NextEnvelope(**sub_a, &v, &storage, 100ms)) ++own;
  constexpr int kMessages = 10;  // fewer than the channels' depth (16)
  for (int i = 0; i < kMessages; ++i) {
    hello[4] = static_cast<uint8_t>('A' + i);
    PublishEnvelope(*out, "std_msgs/String", kStringMd5, "string data\n", hello);
    std::this_thread::sleep_for(20ms);
  }
  int in_b = 0;
  while (NextEnvelope(**sub_b, &v, &storage, 2000ms)) {
    ++in_b;
    EXPECT_EQ(v.header.origin_bridge, "/bridge_b");
    EXPECT_EQ(v.header.callerid, "/bridge_a");
  }
  EXPECT_EQ(in_b, kMessages);
  int in_a = 0;
  while (NextEnvelope(**sub_a, &v, &storage, 500ms)) {
    ++in_a;
    EXPECT_TRUE(v.header.origin_graph.empty()) << "an echo came back into a";
  }
  EXPECT_EQ(in_a, kMessages);  // exactly the ones we sent
  const std::string ros_lines = listener->Output().substr(ros_before);
  int in_ros = 0;
  for (size_t p = ros_lines.find("callerid="); p != std::string::npos;
       p = ros_lines.find("callerid=", p + 1)) {
    ++in_ros;
    EXPECT_EQ(ros_lines.compare(p, 19, "callerid=/bridge_a "), 0)
        << ros_lines.substr(p, 40);
  }
  EXPECT_EQ(in_ros, kMessages);
  listener->Stop();
  EXPECT_EQ(a->Stop(), 0);
  EXPECT_EQ(b->Stop(), 0);
}

TEST_F(BridgeTest, TwoBridgesOfOneInstanceDoNotLoop) {
  // A misconfiguration (both bridge the same pair), but it must not loop:
  // each forwards the ROS message once, neither takes the other's copy.
  auto a = StartBridge({"--pair", "/chatter=/ros/chatter"}, "test", "bridge_a");
  auto b = StartBridge({"--pair", "/chatter=/ros/chatter"}, "test", "bridge_b");
  auto h = WaitForChannel("/ros/chatter");
  auto sub = transport::RawSubscriber::Create(h.get());
  ASSERT_TRUE(sub.ok());
  const std::vector<uint8_t> blob = BlobBytes();
  auto talker = Peer({"pub", "/chatter", kBlobType, kBlobMd5,
                      WriteDefinition(kBlobDefinition), Hex(blob), "20", "0"});
  ros1msg::EnvelopeView v;
  std::vector<uint64_t> storage;
  ASSERT_TRUE(NextEnvelope(**sub, &v, &storage));
  std::this_thread::sleep_for(2s);
  talker->Stop();
  std::this_thread::sleep_for(1s);
  int n = 0;
  while (NextEnvelope(**sub, &v, &storage, 300ms)) {
    ++n;
    EXPECT_TRUE(absl::StartsWith(std::string(v.header.callerid), "/ros_peer"))
        << "forwarded a bridge's copy: " << v.header.callerid;
  }
  EXPECT_GT(n, 0);
  // After the talker stopped nothing circulates.
  EXPECT_FALSE(NextEnvelope(**sub, &v, &storage, 1000ms));
  EXPECT_EQ(a->Stop(), 0);
  EXPECT_EQ(b->Stop(), 0);
}

TEST_F(BridgeTest, TheGraphIdIsKeptTrueAndAChangeIsFollowed) {
  auto bridge = StartBridge({"--pair", "/in=/ros/in,dir=to-tether"});
  auto hin = WaitForChannel("/ros/in");
  ASSERT_NE(hin, nullptr);
  auto sub = transport::RawSubscriber::Create(hin.get());
  ASSERT_TRUE(sub.ok());
  const std::string id = graph_.Param("/tether/graph");
  ASSERT_TRUE(ParseGraphName(id).has_value()) << "/tether/graph: " << id;
  auto set_param = [&](const std::string& value) {
    int code = -1;
    const std::string out = graph_.RunTool(
        {"rosparam", "set", "/tether/graph", value}, testing::kToolTimeout, &code);
    return code == 0 ? std::string() : out;
  };

  // Not an id: the bridge sets its own again.
  ASSERT_EQ(set_param("not-an-id"), "");
  ASSERT_TRUE(testing::WaitFor(
      [&] { return graph_.Param("/tether/graph") == id; }, 20s))
      << bridge->Output();
  EXPECT_NE(bridge->Output().find("setting it again"), std::string::npos)
      << bridge->Output();

  // Another id (as when two bridges set it at once): followed, and the
  // bridge's /tether/bridges record names it, not the old one.
  const std::string other =
      id == "abcdef0123456789" ? "abcdef012345678a" : "abcdef0123456789";
  ASSERT_EQ(set_param(other), "");
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        return bridge->Output().find("ROS graph id " + other) != std::string::npos;
      },
      20s))
      << bridge->Output();
  std::string listed;
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        listed = graph_.Param("/tether/bridges");
        return listed.find(other) != std::string::npos;
      },
      20s))
      << listed;
  EXPECT_EQ(listed.find(id), std::string::npos) << listed;

  // What it takes in from ROS now is tagged with the new id.
  auto talker = Peer({"pub", "/in", kBlobType, kBlobMd5,
                      WriteDefinition(kBlobDefinition), Hex(BlobBytes()), "10", "0"});
  ros1msg::EnvelopeView v;
  std::vector<uint64_t> storage;
  ASSERT_TRUE(NextEnvelope(**sub, &v, &storage)) << bridge->Output();
  EXPECT_EQ(v.header.origin_graph, other);
  talker->Stop();
  EXPECT_EQ(bridge->Stop(), 0);
}

TEST_F(BridgeTest, MasterRestartIsSurvivedAndStatedInTheStatus) {
  auto bridge = StartBridge({"--pair", "/in=/ros/in,dir=to-tether", "--pair",
                             "/out=/ros/out,dir=to-ros"});
  auto hin = WaitForChannel("/ros/in");
  ASSERT_NE(hin, nullptr);
  auto sub = transport::RawSubscriber::Create(hin.get());
  ASSERT_TRUE(sub.ok());
  auto out = EnvelopePublisher("/ros/out");
  const std::string id = graph_.Param("/tether/graph");
  ASSERT_TRUE(ParseGraphName(id).has_value()) << "/tether/graph: " << id;

  graph_.StopMaster();
  Status st;
  ASSERT_TRUE(testing::WaitFor([&] { return LatestStatus(&st) && !st.up; }, 15s))
      << bridge->Output();
  EXPECT_NE(st.note.find("went away"), std::string::npos) << st.note;
  ASSERT_TRUE(graph_.Start());
  ASSERT_TRUE(testing::WaitFor(
      [&] { return LatestStatus(&st) && st.up && st.reregistrations >= 1; }, 20s))
      << bridge->Output();
  EXPECT_NE(st.note.find("restarted"), std::string::npos) << st.note;
  EXPECT_GE(st.changes, 1u);

  // ROS nodes that start after the restart find the bridge both ways.
  const std::vector<uint8_t> blob = BlobBytes();
  auto talker = Peer({"pub", "/in", kBlobType, kBlobMd5,
                      WriteDefinition(kBlobDefinition), Hex(blob), "10", "0"});
  ros1msg::EnvelopeView v;
  std::vector<uint64_t> storage;
  ASSERT_TRUE(NextEnvelope(**sub, &v, &storage)) << bridge->Output();
  EXPECT_EQ(Hex(v.data), Hex(blob));
  // The graph keeps its id: the bridge set it again in the new master.
  EXPECT_EQ(v.header.origin_graph, id);
  EXPECT_EQ(graph_.Param("/tether/graph"), id);
  auto listener = Peer({"sub", "/out", "1"});
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        PublishEnvelope(*out, kBlobType, kBlobMd5, kBlobDefinition, blob);
        return !listener->running();
      },
      20s))
      << listener->Output() << bridge->Output();
  EXPECT_NE(listener->Output().find("hex=" + Hex(blob)), std::string::npos);
  talker->Stop();
  EXPECT_EQ(bridge->Stop(), 0);
}

}  // namespace
}  // namespace tether::ros_bridge
