// `tether list` output over real channels: the table and the JSON name every
// channel with its type, shape and traffic, and unreadable files show their
// error instead of vanishing.
#include "tools/list.h"

#include "capnp/message.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/shm/shm_test_util.h"
#include "tests/tools/json_test_parser.h"
#include "tests/transport/framing_test.capnp.h"
#include "transport/config.capnp.h"
#include "transport/schema_registry.h"
#include "transport/typed_endpoints.h"

namespace tether::tools {
namespace {

using ::testing::HasSubstr;
using test::JsonValue;
using test::ParseJson;

const JsonValue& Get(const JsonValue& v, const char* key) {
  const JsonValue* found = v.Find(key);
  static const JsonValue kMissing;
  return found ? *found : kMissing;
}

TEST(List, TableAndJsonShowEveryChannel) {
  shm::testing::ScopedRoot root;
  transport::SchemaRegistry schemas;
  schemas.Register<Scalars>();
  capnp::MallocMessageBuilder m;
  auto c = m.initRoot<transport::config::Channel>();
  c.setName("/robot/scalars");
  c.setType("tests/transport/framing_test.capnp:Scalars");
  c.setMaxSize(256);
  c.setFrequencyHz(1000);
  c.setQueueDepth(32);
  c.setMaxPublishers(1);
  c.setMaxPinned(2);
  auto ch = transport::ChannelHandle::Create(root.options(), c.asReader(), schemas);
  ASSERT_TRUE(ch.ok()) << ch.status();
  auto pub = transport::Publisher<Scalars>::Create(ch->get());
  ASSERT_TRUE(pub.ok());
  for (int i = 0; i < 3; ++i) {
    auto loan = (*pub)->MakeLoan();
    ASSERT_EQ((*pub)->Send(std::move(loan)).status, transport::PublishStatus::kOk);
  }
  ASSERT_TRUE(shm::Channel::OpenOrCreate(root.options(), "/junk",
                                         {.slot_size = 8, .queue_depth = 2})
                  .ok());
  auto list = transport::ListChannels(root.options());
  ASSERT_TRUE(list.ok());

  std::string table = FormatChannelTable(*list);
  EXPECT_THAT(table, HasSubstr("CHANNEL"));
  EXPECT_THAT(table, HasSubstr("/robot/scalars"));
  EXPECT_THAT(table, HasSubstr("framing_test.capnp:Scalars"));
  EXPECT_THAT(table, HasSubstr("256 B"));
  EXPECT_THAT(table, HasSubstr("error: channel file"));

  auto json = ParseJson(FormatChannelJson(*list));
  ASSERT_TRUE(json.ok()) << json.status();
  const JsonValue& channels = Get(*json, "channels");
  ASSERT_EQ(channels.array.size(), 2u);
  const JsonValue& first = channels.array[1];
  EXPECT_EQ(Get(first, "name").string, "/robot/scalars");
  EXPECT_EQ(Get(first, "messages").number, 3);
  EXPECT_EQ(Get(first, "queue_depth").number, 32);
  EXPECT_EQ(Get(first, "publishers").number, 1);
  EXPECT_EQ(Get(first, "frequency_hz").number, 1000);
  EXPECT_FALSE(Get(channels.array[0], "error").string.empty());
}

TEST(List, NoChannelsSaysSo) {
  EXPECT_EQ(FormatChannelTable({}), "no channels\n");
}

}  // namespace
}  // namespace tether::tools
