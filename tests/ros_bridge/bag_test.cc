// ROS bags: our reader against bags written by ROS's own Python rosbag (all
// compressions), and a bag recorded by `rosbag record` from a live graph,
// replayed with `tether replay` into tether channels and through the bridge
// back into ROS, compared byte for byte.
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "ros_bridge/ros1msg/envelope.h"
#include "ros_bridge/rosbag_reader.h"
#include "tests/ros_bridge/ros_test_env.h"
#include "tests/shm/shm_test_util.h"
#include "transport/channel_handle.h"
#include "transport/raw_endpoints.h"

namespace tether::ros_bridge {
namespace {

using namespace std::chrono_literals;
using testing::Process;
using testing::Hex;
using testing::RosGraph;

constexpr char kBlobType[] = "acme_msgs/Blob";
constexpr char kBlobMd5[] = "0123456789abcdef0123456789abcdef";
constexpr char kBlobDefinition[] = "string name\nuint8[] blob\n";
// name "bag", blob [1, 2, 3, 255]
constexpr char kBlobHex[] = "0300000062616704000000010203ff";

// Runs a Python snippet with ROS's python (not pyenv's).
int Python(const std::string& code) {
  const std::string path = testing::TmpDir() + "/fixture.py";
  std::ofstream(path) << code;
  Process p({"/usr/bin/python3", path}, {{"PATH", "/usr/bin:/bin"}},
            testing::TmpDir() + "/fixture.log");
  int c = -1;
  if (!p.Wait(60s, &c)) return -1;
  if (c != 0) ADD_FAILURE() << p.Output();
  return c;
}

TEST(RosBagReader, ReadsWhatRosWroteInEveryCompressionInTimeOrder) {
  for (const std::string comp : {"none", "bz2", "lz4"}) {
    const std::string bag = testing::TmpDir() + "/fixture_" + comp + ".bag";
    ASSERT_EQ(Python("import rosbag, rospy\n"
                     "from std_msgs.msg import String, Header\n"
                     "b = rosbag.Bag('" + bag + "', 'w', compression='" + comp + "')\n"
                     "for i in range(50):\n"
                     "  b.write('/chatter', String(data='m%d' % i), rospy.Time(100 + i, 7))\n"
                     "  b.write('/header', Header(seq=i, frame_id='f'), rospy.Time(100 + i, 9))\n"
                     "b.close()\n"),
              0);
    auto reader = OpenRosBag(bag);
    ASSERT_TRUE(reader.ok()) << reader.status();
    const auto& connections = (*reader)->connections();
    ASSERT_EQ(connections.size(), 2u);
    EXPECT_EQ((*reader)->summary().message_count, 100u);
    EXPECT_EQ((*reader)->summary().start_time_ns, 100'000'000'007);
    int chatter = 0;
    int64_t last = 0;
    ros1msg::BagMessage m;
    for (;;) {
      auto more = (*reader)->Next(&m);
      ASSERT_TRUE(more.ok()) << more.status();
      if (!*more) break;
      EXPECT_GE(m.time_ns, last);
      last = m.time_ns;
      const ros1msg::BagConnection& c = connections.at(m.connection);
      if (c.topic == "/chatter") {
        EXPECT_EQ(c.type, "std_msgs/String");
        EXPECT_EQ(c.md5sum, "992ce8a1687cec8c8bd883ec73ca41d1");
        const std::string text = "m" + std::to_string(chatter);
        std::vector<uint8_t> want = {static_cast<uint8_t>(text.size()), 0, 0, 0};
        want.insert(want.end(), text.begin(), text.end());
        EXPECT_EQ(m.data, want) << comp;
        ++chatter;
      } else {
        EXPECT_EQ(c.type, "std_msgs/Header");
        EXPECT_EQ(m.data.size(), 4u + 8 + 4 + 1);
      }
    }
    EXPECT_EQ(chatter, 50) << comp;
  }
}

TEST(RosBagReader, NotABagIsAClearError) {
  const std::string path = testing::TmpDir() + "/not.bag";
  std::ofstream(path) << "hello";
  auto reader = OpenRosBag(path);
  ASSERT_FALSE(reader.ok());
  EXPECT_NE(reader.status().message().find("not a readable ROS bag"),
            std::string::npos)
      << reader.status();
  EXPECT_TRUE(absl::IsNotFound(OpenRosBag(path + ".missing").status()));
}

class RecordedBagTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(graph_.Start()); }

  std::string Peer() { return testing::Runfile("tests/ros_bridge/ros_peer"); }

  // Records `seconds` of a custom type and std_msgs/String with rosbag
  // record; returns the bag's path.
  std::string Record() {
    const std::string def = testing::TmpDir() + "/blob.msg";
    std::ofstream(def) << kBlobDefinition;
    auto blob = graph_.Spawn({Peer(), "pub", "/blob", kBlobType, kBlobMd5, def,
                              kBlobHex, "50", "0"},
                             "peer");
    auto chatter = graph_.Spawn({"rostopic", "pub", "-r", "20", "/chatter",
                                 "std_msgs/String", "data: 'recorded'"},
                                "rostopic");
    const std::string bag = testing::TmpDir() + "/recorded.bag";
    // Until both publishers are up.
    EXPECT_TRUE(testing::WaitFor(
        [&] {
          return graph_.RunTool({"rostopic", "list"}, testing::kToolTimeout)
                         .find("/chatter") != std::string::npos &&
                 blob->Output().find("published 3") != std::string::npos;
        },
        20s));
    int code = -1;
    graph_.RunTool({"rosbag", "record", "-O", bag, "--duration=3", "/blob",
                    "/chatter"},
                   30s, &code);
    EXPECT_EQ(code, 0);
    blob->Stop();
    chatter->Stop();
    return bag;
  }

  std::string Tether() { return testing::Runfile("tools/tether"); }

  shm::testing::ScopedRoot root_;
  RosGraph graph_;
};

TEST_F(RecordedBagTest, ReplayIntoTetherGivesTheRecordedBytesInOrder) {
  const std::string bag = Record();
  auto reader = OpenRosBag(bag);
  ASSERT_TRUE(reader.ok()) << reader.status();
  uint64_t blobs_in_bag = 0;
  for (const auto& c : (*reader)->connections()) {
    if (c.topic == "/blob") {
      EXPECT_EQ(c.type, kBlobType);
      EXPECT_EQ(c.definition, kBlobDefinition);
      blobs_in_bag += c.message_count;
    }
  }
  ASSERT_GT(blobs_in_bag, 50u);
  // `tether replay` through the CLI, as fast as possible, into instance r.
  Process replay({Tether(), "replay", bag, "--rate", "0", "--depth", "512",
                  "--root", root_.root(), "--instance", "r"},
                 {}, testing::TmpDir() + "/replay.log");
  int code = -1;
  ASSERT_TRUE(replay.Wait(60s, &code));
  ASSERT_EQ(code, 0) << replay.Output();
  shm::ChannelOptions o = root_.options();
  o.instance = "r";
  auto h = transport::ChannelHandle::Open(o, "/blob");
  ASSERT_TRUE(h.ok()) << h.status() << replay.Output();
  auto sub = transport::RawSubscriber::Create(h->get(), {.from_oldest = true});
  ASSERT_TRUE(sub.ok());
  uint64_t n = 0;
  int64_t last = 0;
  transport::RawMessage m;
  std::vector<uint64_t> copy;
  while ((*sub)->Next(&m) == transport::ReceiveStatus::kOk) {
    EXPECT_EQ(m.context.missed, 0u);
    copy.assign((m.bytes.size() + 7) / 8, 0);
    std::memcpy(copy.data(), m.bytes.data(), m.bytes.size());
    (*sub)->Release();
    ros1msg::EnvelopeView v;
    ASSERT_TRUE(ros1msg::ReadEnvelope(
                    {reinterpret_cast<const std::byte*>(copy.data()), m.bytes.size()}, &v)
                    .ok());
    EXPECT_EQ(Hex(v.data), kBlobHex);
    EXPECT_EQ(v.header.type, kBlobType);
    EXPECT_EQ(v.header.md5sum, kBlobMd5);
    EXPECT_TRUE(v.header.origin_graph.empty());
    EXPECT_GE(v.header.receive_time_ns, last);
    last = v.header.receive_time_ns;
    ++n;
  }
  EXPECT_EQ(n, blobs_in_bag);
}

TEST_F(RecordedBagTest, ReplayGoesBackIntoRosThroughTheBridge) {
  const std::string bag = Record();
  auto bridge = graph_.Spawn(
      {testing::Runfile("ros_bridge/ros_bridge"), "--root", root_.root(),
       "--instance", "p", "--pair", "/blob=/blob,dir=to-ros"},
      "bridge");
  ASSERT_TRUE(testing::WaitFor(
      [&] { return bridge->Output().find("joined the ROS master") != std::string::npos; },
      20s));
  auto listener = graph_.Spawn({Peer(), "sub", "/blob", "20"}, "sub");
  ASSERT_TRUE(testing::WaitFor(
      [&] { return listener->Output().find("subscribed") != std::string::npos; }, 10s));
  Process replay({Tether(), "replay", bag, "--topics", "/blob", "--root",
                  root_.root(), "--instance", "p"},
                 {}, testing::TmpDir() + "/replay2.log");
  int code = -1;
  ASSERT_TRUE(listener->Wait(30s, &code)) << listener->Output() << bridge->Output();
  EXPECT_EQ(code, 0);
  const std::string out = listener->Output();
  size_t lines = 0;
  for (size_t p = out.find("hex="); p != std::string::npos; p = out.find("hex=", p + 1)) {
    EXPECT_EQ(out.compare(p, 4 + std::strlen(kBlobHex) + 1,
                          std::string("hex=") + kBlobHex + "\n"),
              0);
    ++lines;
  }
  EXPECT_EQ(lines, 20u);
  EXPECT_NE(out.find("type=acme_msgs/Blob md5=" + std::string(kBlobMd5)),
            std::string::npos);
  replay.Stop();
  EXPECT_EQ(bridge->Stop(), 0);
}

}  // namespace
}  // namespace tether::ros_bridge
