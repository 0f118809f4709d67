// tests/ros_bridge: the BridgeTest fixture of the bridge tests against a real
// ROS graph (bridge_test, bridge_graph_test): a private roscore per test,
// the real ros_bridge binary and ros_peer started in it, tether channels of
// envelopes read and written by the test, the bridge's status; and a
// message of a type no ROS package defines.
#ifndef TETHER_TESTS_ROS_BRIDGE_BRIDGE_TEST_FIXTURE_H_
#define TETHER_TESTS_ROS_BRIDGE_BRIDGE_TEST_FIXTURE_H_

#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "capnp/message.h"
#include "gtest/gtest.h"
#include "ros_bridge/bridge_status.capnp.h"
#include "ros_bridge/ros1msg/envelope.capnp.h"
#include "ros_bridge/ros1msg/envelope.h"
#include "tests/ros_bridge/ros_test_env.h"
#include "tests/shm/shm_test_util.h"
#include "transport/channel_handle.h"
#include "transport/config.capnp.h"
#include "transport/framing.h"
#include "transport/raw_endpoints.h"
#include "transport/schema_registry.h"

namespace tether::ros_bridge::testing {

inline constexpr char kStringMd5[] = "992ce8a1687cec8c8bd883ec73ca41d1";
// A type no ROS package defines.
inline constexpr char kBlobType[] = "acme_msgs/Blob";
inline constexpr char kBlobMd5[] = "0123456789abcdef0123456789abcdef";
inline constexpr char kBlobDefinition[] =
    "string name\nuint8[] blob\nfloat64[2] v\n";

// name="hi", blob=[0, 255, 7], v=[1.5, -2]
inline std::vector<uint8_t> BlobBytes() {
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
        std::chrono::seconds(20)))
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
        std::chrono::seconds(20));
    return h;
  }

  // The next envelope on `sub`, within `timeout`.
  bool NextEnvelope(transport::RawSubscriber& sub, ros1msg::EnvelopeView* v,
                    std::vector<uint64_t>* storage,
                    std::chrono::milliseconds timeout =
                        std::chrono::seconds(15)) {
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

}  // namespace tether::ros_bridge::testing

#endif  // TETHER_TESTS_ROS_BRIDGE_BRIDGE_TEST_FIXTURE_H_
