// `tether net-bridge --check` and the command line: the real binary, no DDS
// started, no network needed.
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "capnp/message.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/shm/shm_test_util.h"
#include "tests/transport/framing_test.capnp.h"
#include "tests/util/run_command.h"
#include "transport/channel_handle.h"
#include "transport/config.capnp.h"
#include "transport/schema_registry.h"

namespace tether::net {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

struct Outcome {
  int code = -1;
  std::string output;  // stdout and stderr
};

class NetBridgeCheckTest : public ::testing::Test {
 protected:
  std::string Config(const std::string& json) {
    const std::string path =
        std::string(std::getenv("TEST_TMPDIR")) + "/net" +
        std::to_string(serial_++) + ".json";
    std::ofstream(path) << json;
    return path;
  }

  Outcome Run(const std::string& args) {
    const std::string binary = std::string(std::getenv("TEST_SRCDIR")) + "/" +
                               std::getenv("TEST_WORKSPACE") +
                               "/net/net_bridge";
    int status = -1;
    Outcome o;
    o.output = tether::testing::RunCommand(
        binary + " --root " + root_.root() + " --instance check " + args +
            " 2>&1",
        &status);
    o.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return o;
  }

  std::unique_ptr<transport::ChannelHandle> MakeChannel(
      const std::string& name) {
    shm::ChannelOptions o = root_.options();
    o.instance = "check";
    transport::SchemaRegistry schemas;
    schemas.Register<Sample>();
    capnp::MallocMessageBuilder message;
    auto c = message.initRoot<transport::config::Channel>();
    c.setName(name);
    c.setType("tests/transport/framing_test.capnp:Sample");
    c.setMaxSize(1024);
    c.setFrequencyHz(100);
    c.setQueueDepth(16);
    auto h = transport::ChannelHandle::Create(o, c.asReader(), schemas);
    EXPECT_TRUE(h.ok()) << h.status();
    return h.ok() ? std::move(*h) : nullptr;
  }

  shm::testing::ScopedRoot root_;
  int serial_ = 0;
};

TEST_F(NetBridgeCheckTest, AnInterfaceThatDoesNotExistFailsTheCheck) {
  auto imu = MakeChannel("/robot/imu");
  const std::string config = Config(
      R"({"name": "t1", "interface": "nosuch0",
          "channels": [{"name": "/robot/imu", "direction": "out"}]})");
  Outcome o = Run("--config " + config + " --check");
  EXPECT_EQ(o.code, 1) << o.output;
  EXPECT_THAT(o.output, HasSubstr("interface nosuch0 does not exist on this "
                                  "host (there: "));
  EXPECT_THAT(o.output, HasSubstr("lo"));
}

// A peer that is no address (and, digits only, no name either) fails the
// check, naming it; an address with a port passes.
TEST_F(NetBridgeCheckTest, APeerThatIsNoAddressFailsTheCheck) {
  const std::string bad = Config(
      R"({"name": "t1", "peers": ["127.0.0.1:7410", "10.0.0.300"],
          "channels": [{"name": "/robot/cmd", "direction": "in"}]})");
  Outcome o = Run("--config " + bad + " --check");
  EXPECT_EQ(o.code, 1) << o.output;
  EXPECT_THAT(o.output, HasSubstr("peers[1] \"10.0.0.300\" is not an address "
                                  "and does not resolve"));
  const std::string good = Config(
      R"({"name": "t1", "peers": ["127.0.0.1:7410", "127.0.0.2"],
          "channels": [{"name": "/robot/cmd", "direction": "in"}]})");
  o = Run("--config " + good + " --check");
  EXPECT_EQ(o.code, 0) << o.output;
}

TEST_F(NetBridgeCheckTest, AnOutChannelNotThereYetIsNotedButPasses) {
  const std::string config = Config(
      R"({"name": "t1", "channels": [
            {"name": "/robot/imu", "direction": "out"},
            {"name": "/robot/cmd", "direction": "in"}]})");
  Outcome missing = Run("--config " + config + " --check");
  EXPECT_EQ(missing.code, 0) << missing.output;
  EXPECT_THAT(missing.output,
              HasSubstr("note: channel /robot/imu does not exist in " +
                        root_.root() + "/check"));
  EXPECT_THAT(missing.output, HasSubstr("a run now would fail"));
  // An in channel is created by the run: nothing to note.
  EXPECT_THAT(missing.output, Not(HasSubstr("/robot/cmd does not exist")));

  auto imu = MakeChannel("/robot/imu");
  Outcome there = Run("--config " + config + " --check");
  EXPECT_EQ(there.code, 0) << there.output;
  EXPECT_THAT(there.output, Not(HasSubstr("note:")));
  EXPECT_THAT(there.output, HasSubstr("out  /robot/imu"));
}

TEST_F(NetBridgeCheckTest, AChannelListedOutAndInIsSaidToGoBothWays) {
  auto imu = MakeChannel("/robot/imu");
  const std::string config = Config(
      R"({"name": "t1", "channels": [
            {"name": "/robot/imu", "direction": "out"},
            {"name": "/robot/imu", "direction": "in"}]})");
  Outcome o = Run("--config " + config + " --check");
  EXPECT_EQ(o.code, 0) << o.output;
  EXPECT_THAT(o.output, HasSubstr("/robot/imu is forwarded both ways"));
}

TEST_F(NetBridgeCheckTest, UnknownFieldNamesTheFileTheFieldAndTheValidNames) {
  const std::string config = Config(
      R"({"name": "t1", "bogus": 1,
          "channels": [{"name": "/robot/imu", "direction": "out"}]})");
  Outcome o = Run("--config " + config + " --check");
  EXPECT_EQ(o.code, 1) << o.output;
  EXPECT_THAT(o.output, HasSubstr(config + ":1: bogus: unknown field"));
  EXPECT_THAT(o.output, HasSubstr("name, domain, partition, interface"));
  EXPECT_THAT(o.output, Not(HasSubstr("field.getName()")));
}

TEST_F(NetBridgeCheckTest, AFlagInsteadOfAValueSaysWhichFlagNeedsOne) {
  Outcome o = Run("--config --check");
  EXPECT_EQ(o.code, 2) << o.output;
  EXPECT_THAT(o.output,
              HasSubstr("--config needs a value (--check is the next flag)"));
}

}  // namespace
}  // namespace tether::net
