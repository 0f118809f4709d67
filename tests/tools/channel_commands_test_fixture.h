// Test fixture for the channel command tests (channel_commands_test.cc,
// channel_clean_test.cc): Scalars channels of a chosen shape in a unique
// shm root, messages sent on them, echo options for a channel, and output
// split into lines.
#ifndef TETHER_TESTS_TOOLS_CHANNEL_COMMANDS_TEST_FIXTURE_H_
#define TETHER_TESTS_TOOLS_CHANNEL_COMMANDS_TEST_FIXTURE_H_

#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "capnp/message.h"
#include "gtest/gtest.h"
#include "tests/shm/shm_test_util.h"
#include "tests/transport/framing_test.capnp.h"
#include "tools/echo.h"
#include "transport/channel_handle.h"
#include "transport/config.capnp.h"
#include "transport/schema_registry.h"
#include "transport/typed_endpoints.h"

namespace tether::tools::testing {

class ChannelCommandsTest : public ::testing::Test {
 protected:
  ChannelCommandsTest() { schemas_.Register<Scalars>(); }

  std::unique_ptr<transport::ChannelHandle> MakeChannel(
      const std::string& name, uint32_t depth = 16, uint32_t publishers = 2,
      uint32_t pinned = 2, uint32_t max_size = 256) {
    capnp::MallocMessageBuilder m;
    auto c = m.initRoot<transport::config::Channel>();
    c.setName(name);
    c.setType("tests/transport/framing_test.capnp:Scalars");
    c.setMaxSize(max_size);
    c.setFrequencyHz(1000);
    c.setQueueDepth(depth);
    c.setMaxPublishers(publishers);
    c.setMaxPinned(pinned);
    auto ch = transport::ChannelHandle::Create(root_.options(), c.asReader(),
                                               schemas_);
    EXPECT_TRUE(ch.ok()) << ch.status();
    return ch.ok() ? std::move(*ch) : nullptr;
  }

  void Send(transport::ChannelHandle* ch, int64_t first, int n) {
    auto pub = transport::Publisher<Scalars>::Create(ch);
    ASSERT_TRUE(pub.ok()) << pub.status();
    for (int i = 0; i < n; ++i) {
      auto loan = (*pub)->MakeLoan();
      loan.root().setI64(first + i);
      ASSERT_EQ((*pub)->Send(std::move(loan)).status,
                transport::PublishStatus::kOk);
    }
  }

  EchoOptions Echo(const std::string& name) {
    EchoOptions o;
    o.channels = root_.options();
    o.channel = name;
    return o;
  }

  static std::vector<std::string> Lines(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }

  shm::testing::ScopedRoot root_;
  transport::SchemaRegistry schemas_;
};

}  // namespace tether::tools::testing

#endif  // TETHER_TESTS_TOOLS_CHANNEL_COMMANDS_TEST_FIXTURE_H_
