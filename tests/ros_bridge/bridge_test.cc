// The bridge against a real ROS graph: a private roscore on a free port,
// rostopic and a compiled roscpp node (ros_peer) as the unchanged ROS side,
// the real ros_bridge binary, and tether channels read and written by the
// test. Every wait is bounded; every process is stopped by pid.
#include <signal.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "capnp/message.h"
#include "gtest/gtest.h"
#include "ros_bridge/bridge_status.capnp.h"
#include "ros_bridge/master_link.h"
#include "ros_bridge/ros1msg/envelope.capnp.h"
#include "ros_bridge/ros1msg/envelope.h"
#include "ros_bridge/ros1msg/geometry_msgs.capnp.h"
#include "tests/ros_bridge/ros_test_env.h"
#include "tests/shm/shm_test_util.h"
#include "transport/channel_handle.h"
#include "transport/framing.h"
#include "transport/config.capnp.h"
#include "transport/raw_endpoints.h"
#include "transport/schema_registry.h"
#include "transport/typed_endpoints.h"

namespace tether::ros_bridge {
namespace {

using namespace std::chrono_literals;
using testing::Process;
using testing::Hex;
using testing::RosGraph;

constexpr char kStringMd5[] = "992ce8a1687cec8c8bd883ec73ca41d1";
// A type no ROS package defines.
constexpr char kBlobType[] = "acme_msgs/Blob";
constexpr char kBlobMd5[] = "0123456789abcdef0123456789abcdef";
constexpr char kBlobDefinition[] =
    "string name\nuint8[] blob\nfloat64[2] v\n";

// name="hi", blob=[0, 255, 7], v=[1.5, -2]
std::vector<uint8_t> BlobBytes() {
  std::vector<uint8_t> b = {2, 0, 0, 0, 'h', 'i', 3, 0, 0, 0, 0, 0xff, 7};
  double v[2] = {1.5, -2};
  const auto* p = reinterpret_cast<const uint8_t*>(v);
  b.insert(b.end(), p, p + sizeof(v));
  return b;
}

class BridgeTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(graph_.Start()) << "roscore did not start"; }

  std::unique_ptr<Process> StartBridge(std::vector<std::string> args,
                                       const std::string& instance = "test",
                                       const std::string& node = "tether_bridge") {
    std::vector<std::string> argv = {testing::Runfile("ros_bridge/ros_bridge"),
                                     "--root", root_.root(), "--instance",
                                     instance, "--node-name", node};
    argv.insert(argv.end(), args.begin(), args.end());
    auto p = graph_.Spawn(argv, "bridge_" + node);
    // Up when its status says it joined the master.
    EXPECT_TRUE(testing::WaitFor(
        [&] { return p->Output().find("joined the ROS master") != std::string::npos; },
        20s))
        << p->Output();
    return p;
  }

  shm::ChannelOptions Instance(const std::string& instance = "test") {
    shm::ChannelOptions o = root_.options();
    o.instance = instance;
    return o;
  }

  std::unique_ptr<transport::ChannelHandle> WaitForChannel(
      const std::string& name, const std::string& instance = "test") {
    std::unique_ptr<transport::ChannelHandle> h;
    testing::WaitFor(
        [&] {
          auto opened = transport::ChannelHandle::Open(Instance(instance), name);
          if (!opened.ok()) return false;
          h = std::move(*opened);
          return true;
        },
        20s);
    return h;
  }

  // The next envelope on `sub`, within `timeout`.
  bool NextEnvelope(transport::RawSubscriber& sub, ros1msg::EnvelopeView* v,
                    std::vector<uint64_t>* storage,
                    std::chrono::milliseconds timeout = 15s) {
    transport::RawMessage m;
    const bool got = testing::WaitFor(
        [&] { return sub.Next(&m) == transport::ReceiveStatus::kOk; }, timeout);
    if (!got) return false;
    storage->assign((m.bytes.size() + 7) / 8, 0);
    std::memcpy(storage->data(), m.bytes.data(), m.bytes.size());
    sub.Release();
    std::span<const std::byte> copy(reinterpret_cast<const std::byte*>(storage->data()),
                                    m.bytes.size());
    return ros1msg::ReadEnvelope(copy, v).ok();
  }

  // Publishes an envelope made in tether (origin empty).
  void PublishEnvelope(transport::RawPublisher& pub, const std::string& type,
                       const std::string& md5, const std::string& definition,
                       const std::vector<uint8_t>& data, bool latching = false,
                       const std::string& origin_graph = "") {
    ros1msg::EnvelopeHeader h;
    h.type = type;
    h.md5sum = md5;
    h.definition = definition;
    h.latching = latching;
    h.callerid = "tether_test";
    h.origin_graph = origin_graph;
    transport::BuildArena arena(pub.channel()->params().slot_size);
    transport::FinishResult f = ros1msg::BuildEnvelope(
        &arena, pub.Loan(), pub.channel()->name(), h, data.size(),
        [&](std::span<uint8_t> out) { std::memcpy(out.data(), data.data(), data.size()); });
    ASSERT_TRUE(f.ok()) << f.ErrorMessage();
    ASSERT_EQ(pub.Send(f.size, nullptr, f.offset).status,
              transport::PublishStatus::kOk);
  }

  // A channel of envelopes made by the test (as a tether node's stack
  // would make it), before or without the bridge.
  std::unique_ptr<transport::RawPublisher> CreateEnvelopeChannel(
      const std::string& name) {
    capnp::MallocMessageBuilder msg;
    auto c = msg.initRoot<transport::config::Channel>();
    c.setName(name);
    c.setType("ros_bridge/ros1msg/envelope.capnp:RosEnvelope");
    c.setMaxSize(4096);
    c.setQueueDepth(8);
    c.setMaxPublishers(4);
    transport::SchemaRegistry schemas;
    schemas.Register<ros1msg::RosEnvelope>();
    auto h = transport::ChannelHandle::Create(Instance(), msg.getRoot<transport::config::Channel>().asReader(), schemas);
    EXPECT_TRUE(h.ok()) << h.status();
    handles_.push_back(std::move(*h));
    auto p = transport::RawPublisher::Create(handles_.back().get());
    EXPECT_TRUE(p.ok()) << p.status();
    return std::move(*p);
  }

  std::unique_ptr<transport::RawPublisher> EnvelopePublisher(
      const std::string& name, const std::string& instance = "test") {
    auto h = WaitForChannel(name, instance);
    EXPECT_NE(h, nullptr) << name;
    handles_.push_back(std::move(h));
    auto p = transport::RawPublisher::Create(handles_.back().get());
    EXPECT_TRUE(p.ok()) << p.status();
    return std::move(*p);
  }

  // The bridge's newest status (copied out).
  struct Status {
    bool up = false;
    uint32_t changes = 0, reregistrations = 0;
    std::string note;
    uint64_t too_large = 0;
    std::string error;
  };
  bool LatestStatus(Status* out, const std::string& node = "tether_bridge") {
    auto h = transport::ChannelHandle::Open(
        Instance(), "/tether/ros_bridge/" + node + "/status");
    if (!h.ok()) return false;
    auto sub = transport::RawSubscriber::Create(h->get(),
                                               {.pin = false, .from_oldest = true});
    if (!sub.ok()) return false;
    transport::RawMessage m;
    if ((*sub)->Latest(&m) != transport::ReceiveStatus::kOk) return false;
    std::vector<uint64_t> copy((m.bytes.size() + 7) / 8);
    std::memcpy(copy.data(), m.bytes.data(), m.bytes.size());
    transport::SlotMessageReader reader(
        {reinterpret_cast<const std::byte*>(copy.data()), m.bytes.size()});
    return transport::VisitRoot<BridgeStatus>(reader, [&](BridgeStatus::Reader s) {
             out->up = s.getMasterUp();
             out->changes = s.getMasterChanges();
             out->reregistrations = s.getReregistrations();
             out->note = s.getNote().cStr();
             for (auto r : s.getRoutes()) {
               out->too_large += r.getDroppedTooLarge();
               if (r.getError().size() > 0) out->error = r.getError().cStr();
             }
           }) == transport::FramingStatus::kOk;
  }

  std::string WriteDefinition(const std::string& text) {
    const std::string path = testing::TmpDir() + "/def_" + std::to_string(defs_++);
    std::ofstream(path) << text;
    return path;
  }

  std::unique_ptr<Process> Peer(std::vector<std::string> args) {
    std::vector<std::string> argv = {testing::Runfile("tests/ros_bridge/ros_peer")};
    argv.insert(argv.end(), args.begin(), args.end());
    return graph_.Spawn(argv, "peer");
  }

  shm::testing::ScopedRoot root_;
  RosGraph graph_;
  std::vector<std::unique_ptr<transport::ChannelHandle>> handles_;
  int defs_ = 0;
};

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
