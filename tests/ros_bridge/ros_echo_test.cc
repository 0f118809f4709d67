// `tether echo` on a channel of bridged ROS messages prints the ROS message
// as JSON: the CLI (which may not link ros_bridge/) runs the package's
// decoder, bazel-bin/ros_bridge/ros_json, next to itself. Runs the real
// binaries; needs no ROS master.
#include <sys/stat.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "capnp/message.h"
#include "gtest/gtest.h"
#include "ros_bridge/ros1msg/envelope.capnp.h"
#include "ros_bridge/ros1msg/envelope.h"
#include "tests/ros_bridge/ros_test_env.h"
#include "tests/shm/shm_test_util.h"
#include "transport/channel_handle.h"
#include "transport/config.capnp.h"
#include "transport/framing.h"
#include "transport/raw_endpoints.h"
#include "transport/schema_registry.h"

namespace tether::ros_bridge {
namespace {

using std::chrono_literals::operator""s;

constexpr char kStringMd5[] = "992ce8a1687cec8c8bd883ec73ca41d1";

// std_msgs/String as ROS serializes it: u32 length, then the bytes.
std::vector<uint8_t> RosString(const std::string& s) {
  std::vector<uint8_t> b(4 + s.size());
  const uint32_t n = s.size();
  std::memcpy(b.data(), &n, 4);
  std::memcpy(b.data() + 4, s.data(), s.size());
  return b;
}

class RosEchoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    capnp::MallocMessageBuilder msg;
    auto c = msg.initRoot<transport::config::Channel>();
    c.setName("/ros/chatter");
    c.setType("ros_bridge/ros1msg/envelope.capnp:RosEnvelope");
    c.setMaxSize(4096);
    c.setQueueDepth(8);
    transport::SchemaRegistry schemas;
    schemas.Register<ros1msg::RosEnvelope>();
    auto h = transport::ChannelHandle::Create(
        root_.options(), msg.getRoot<transport::config::Channel>().asReader(),
        schemas);
    ASSERT_TRUE(h.ok()) << h.status();
    handle_ = std::move(*h);
    auto p = transport::RawPublisher::Create(handle_.get());
    ASSERT_TRUE(p.ok()) << p.status();
    pub_ = std::move(*p);
  }

  void Publish(const std::vector<uint8_t>& data) {
    ros1msg::EnvelopeHeader h;
    h.type = "std_msgs/String";
    h.md5sum = kStringMd5;
    h.definition = "string data\n";
    h.callerid = "/talker";
    h.topic = "/chatter";
    transport::BuildArena arena(pub_->channel()->params().slot_size);
    transport::FinishResult f = ros1msg::BuildEnvelope(
        &arena, pub_->Loan(), pub_->channel()->name(), h, data.size(),
        [&](std::span<uint8_t> out) {
          std::memcpy(out.data(), data.data(), data.size());
        });
    ASSERT_TRUE(f.ok()) << f.ErrorMessage();
    ASSERT_EQ(pub_->Send(f.size, nullptr, f.offset).status,
              transport::PublishStatus::kOk);
  }

  // Runs `tether echo /ros/chatter --from-oldest ARGS...` with `tether`
  // (the runfile unless given) to its end (bounded); returns its output
  // (stdout and stderr) and sets *code.
  std::string Echo(std::vector<std::string> args, int* code,
                   std::string tether = "") {
    if (tether.empty()) tether = testing::Runfile("tools/tether");
    std::vector<std::string> argv = {tether,   "echo",         "/ros/chatter",
                                     "--root", root_.root(),   "--instance",
                                     "test",   "--from-oldest"};
    argv.insert(argv.end(), args.begin(), args.end());
    const std::string log = testing::TmpDir() + "/echo" +
                            std::to_string(serial_++) + ".log";
    testing::Process echo(argv, {}, log);
    if (!echo.Wait(20s, code)) {
      ADD_FAILURE() << "tether echo did not end: " << echo.Output();
      echo.Stop();
    }
    return echo.Output();
  }

  // A copy of the tether binary in a folder of its own, with (if
  // `decoder_script` is not empty) a fake decoder beside it.
  std::string LoneTether(const std::string& decoder_script) {
    const std::string bin = testing::TmpDir() + "/lone" +
                            std::to_string(serial_++);
    std::filesystem::create_directories(bin + "/tools");
    std::filesystem::copy_file(testing::Runfile("tools/tether"),
                               bin + "/tools/tether");
    if (!decoder_script.empty()) {
      std::filesystem::create_directories(bin + "/ros_bridge");
      std::ofstream(bin + "/ros_bridge/ros_json") << decoder_script;
      ::chmod((bin + "/ros_bridge/ros_json").c_str(), 0755);
    }
    return bin + "/tools/tether";
  }

  shm::testing::ScopedRoot root_;
  std::unique_ptr<transport::ChannelHandle> handle_;
  std::unique_ptr<transport::RawPublisher> pub_;
  static inline int serial_ = 0;  // file names unique across the tests
};

TEST_F(RosEchoTest, PrintsTheRosMessageAsJson) {
  Publish(RosString("hello ros1"));
  int code = -1;
  const std::string out = Echo({"--count", "1"}, &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("{\"type\":\"std_msgs/String\",\"md5sum\":\"" +
                     std::string(kStringMd5) +
                     "\",\"topic\":\"/chatter\",\"callerid\":\"/talker\""),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("\"message\":{\"data\":\"hello ros1\"}}"),
            std::string::npos)
      << out;
}

TEST_F(RosEchoTest, ContextWrapsTheRosMessage) {
  Publish(RosString("with context"));
  int code = -1;
  const std::string out = Echo({"--count", "1", "--context"}, &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("{\"queue_index\":0,"), std::string::npos) << out;
  EXPECT_NE(out.find("\"message\":{\"type\":\"std_msgs/String\""),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("{\"data\":\"with context\"}"), std::string::npos) << out;
}

TEST_F(RosEchoTest, UndecodableRosDataIsCountedAndEchoGoesOn) {
  Publish({200, 0, 0, 0, 'x'});  // says 200 bytes of string, has 1
  Publish(RosString("after the bad one"));
  int code = -1;
  const std::string out = Echo({"--count", "1"}, &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("tether echo: queue index 0: "), std::string::npos)
      << out;
  EXPECT_NE(out.find("{\"data\":\"after the bad one\"}"), std::string::npos)
      << out;
  EXPECT_NE(out.find("1 printed, missed 0, 1 undecodable"), std::string::npos)
      << out;
}

// Only bad ROS data (each envelope sound, what it carries not): the summary
// says what the decoder found, not that the envelope type does not decode.
TEST_F(RosEchoTest, OnlyBadRosDataIsSaidToBeTheDataNotTheEnvelope) {
  Publish({200, 0, 0, 0, 'x'});  // says 200 bytes of string, has 1
  Publish({9, 0, 0, 0});
  std::vector<std::string> argv = {testing::Runfile("tools/tether"),
                                   "echo",       "/ros/chatter",
                                   "--root",     root_.root(),
                                   "--instance", "test",
                                   "--from-oldest"};
  testing::Process echo(argv, {},
                        testing::TmpDir() + "/echo-bad" +
                            std::to_string(serial_++) + ".log");
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        return echo.Output().find("queue index 1: ") != std::string::npos;
      },
      std::chrono::milliseconds(20000)))
      << echo.Output();
  EXPECT_EQ(echo.Stop(), 1);
  const std::string out = echo.Output();
  EXPECT_NE(out.find("0 printed, missed 0, 2 undecodable"), std::string::npos)
      << out;
  EXPECT_NE(out.find("none of the 2 messages received could be decoded by "
                     "ros_bridge/ros_json (the first: "),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("decodes as"), std::string::npos) << out;
}

TEST_F(RosEchoTest, WithoutTheDecoderItSaysWhatToBuild) {
  Publish(RosString("unseen"));
  int code = -1;
  const std::string out = Echo({"--count", "1"}, &code, LoneTether(""));
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("tether echo: /ros/chatter: its messages are RosEnvelope"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("bazel build //ros_bridge:ros_json"), std::string::npos)
      << out;
  EXPECT_EQ(out.find("unseen"), std::string::npos) << out;
}

TEST_F(RosEchoTest, ADecoderThatDiesIsReportedWithHowItEnded) {
  Publish(RosString("one"));
  int code = -1;
  const std::string out =
      Echo({"--count", "1"}, &code, LoneTether("#!/bin/sh\nexit 3\n"));
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("the decoder of RosEnvelope"), std::string::npos) << out;
  EXPECT_NE(out.find("exited with status 3"), std::string::npos) << out;
  EXPECT_NE(out.find("0 printed"), std::string::npos) << out;
}

}  // namespace
}  // namespace tether::ros_bridge
