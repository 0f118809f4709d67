// Channels from config entries and what travels with them: a type or shape
// that disagrees with an existing channel refused naming both, the config's
// mode and group applied, unknown types, the schema a channel carries
// decoding it for tools, JSON through the dynamic layer, CheckMessageDecodes
// agreeing with MessageToJson, and channel listing.
#include <grp.h>
#include <sys/stat.h>

#include <cstring>
#include <string>
#include <vector>

#include "capnp/any.h"
#include "capnp/message.h"
#include "capnp/serialize.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shm/channel.h"
#include "tests/transport/endpoints_test_util.h"
#include "tests/transport/framing_test.capnp.h"
#include "transport/channel_handle.h"
#include "transport/config.capnp.h"
#include "transport/dynamic.h"
#include "transport/raw_endpoints.h"
#include "transport/schema_registry.h"
#include "transport/typed_endpoints.h"

namespace tether::transport {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::EndpointsTest;
using testing::kSample;
using testing::kScalars;

TEST_F(EndpointsTest, WrongTypeFailsAtCreationWithBothTypeNames) {
  auto ch = MakeChannel("/typed", kSample, 256);
  auto pub = Publisher<Scalars>::Create(ch.get());
  ASSERT_EQ(pub.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(pub.status().message(), HasSubstr("framing_test.capnp:Sample"));
  EXPECT_THAT(pub.status().message(), HasSubstr("framing_test.capnp:Scalars"));
  auto sub = Subscriber<Scalars>::Create(ch.get());
  EXPECT_EQ(sub.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(EndpointsTest, ReopeningAChannelWithAnotherTypeIsRefused) {
  auto ch = MakeChannel("/clash", kSample, 256);
  auto again = CreateChannel("/clash", kScalars, 256);
  ASSERT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  // Both types by name, and how to change the channel: `ch` (this
  // process) still has it open, so removing it is not the advice.
  EXPECT_THAT(again.status().message(),
              HasSubstr(absl::StrCat("it carries ", kSample,
                                     ", this config says ", kScalars)));
  EXPECT_THAT(again.status().message(),
              HasSubstr("stop every process that uses it"));
  EXPECT_THAT(again.status().message(), HasSubstr("tether clean --root"));
  // Once nobody uses it (the stack stopped), the next start makes it anew
  // with the type its config now says.
  ch.reset();
  auto anew = CreateChannel("/clash", kScalars, 256);
  ASSERT_TRUE(anew.ok()) << anew.status();
  EXPECT_TRUE((*anew)->created());
  EXPECT_EQ((*anew)->type_name(), kScalars);
}

TEST_F(EndpointsTest, ReopeningAChannelWithAnotherMaxSizeOrRateNamesThem) {
  auto ch = MakeChannel("/rate", kSample, 256);
  // The same slots (250 rounds up to 256), another maxSize and rate.
  auto again = CreateChannel("/rate", kSample, 250, 8, 50);
  ASSERT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(again.status().message(),
              HasSubstr("its maxSize is 256, this config's 250"));
  EXPECT_THAT(again.status().message(),
              HasSubstr("its frequencyHz is 0, this config's 50"));
  EXPECT_THAT(again.status().message(), Not(HasSubstr("it carries")));
}

TEST_F(EndpointsTest, AnotherTypeAndShapeNamesBoth) {
  auto ch = MakeChannel("/both", kSample, 256);
  auto again = CreateChannel("/both", kScalars, 256, 16);
  ASSERT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(again.status().message(),
              HasSubstr(absl::StrCat("it carries ", kSample)));
  EXPECT_THAT(again.status().message(), HasSubstr("queue_depth=16"));
}

TEST_F(EndpointsTest, TheConfigsModeAndGroupAreApplied) {
  capnp::MallocMessageBuilder m;
  auto c = m.initRoot<config::Channel>();
  c.setName("/perm");
  c.setType(kScalars);
  c.setMaxSize(64);
  c.setQueueDepth(8);
  c.setMode("0640");
  struct group* own = ::getgrgid(::getegid());
  ASSERT_NE(own, nullptr);
  c.setGroup(own->gr_name);
  auto h = ChannelHandle::Create(root_.options(), c.asReader(), schemas_);
  ASSERT_TRUE(h.ok()) << h.status();
  struct stat st;
  ASSERT_EQ(::stat((*h)->path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  EXPECT_EQ(st.st_gid, ::getegid());

  c.setName("/nogroup");
  c.setGroup("no-such-group-here");
  auto bad = ChannelHandle::Create(root_.options(), c.asReader(), schemas_);
  ASSERT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("no-such-group-here"));
  EXPECT_THAT(bad.status().message(), HasSubstr("groupadd"));
}

TEST_F(EndpointsTest, UnknownTypeInConfigSaysToRegisterIt) {
  capnp::MallocMessageBuilder m;
  auto c = m.initRoot<config::Channel>();
  c.setName("/x");
  c.setType("nowhere.capnp:Nothing");
  c.setMaxSize(64);
  c.setQueueDepth(8);
  auto h = ChannelHandle::Create(root_.options(), c.asReader(), schemas_);
  ASSERT_EQ(h.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(h.status().message(), HasSubstr("Register<T>"));
}

TEST_F(EndpointsTest, ToolsDecodeAChannelWithTheSchemaItCarries) {
  auto ch = MakeChannel("/robot/sample", kSample, 512);
  auto pub = Publisher<Sample>::Create(ch.get());
  Loan<Sample> loan = (*pub)->MakeLoan();
  loan.root().setStamp(1234);
  loan.root().setLabel("hello");
  loan.root().initJoints(1)[0].setName("left");
  ASSERT_EQ((*pub)->Send(std::move(loan)).status, PublishStatus::kOk);

  // A tool that has no compiled schemas: everything from the channel file.
  auto opened = ChannelHandle::Open(root_.options(), "/robot/sample");
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ((*opened)->type_name(), kSample);
  EXPECT_EQ((*opened)->max_size(), 512u);
  SchemaRegistry tool_schemas;
  ASSERT_TRUE(tool_schemas
                  .AddCodeGeneratorRequest((*opened)->schema(),
                                           (*opened)->type_id())
                  .ok());
  auto type = tool_schemas.Find((*opened)->type_id());
  ASSERT_TRUE(type.has_value());
  auto sub = RawSubscriber::Create(opened->get(), {.pin = true, .from_oldest = true});
  ASSERT_TRUE(sub.ok());
  RawMessage raw;
  ASSERT_EQ((*sub)->Next(&raw), ReceiveStatus::kOk);
  auto json = MessageToJson(*type, raw.bytes);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_THAT(*json, HasSubstr("\"stamp\":\"1234\""));
  EXPECT_THAT(*json, HasSubstr("\"label\":\"hello\""));
  EXPECT_THAT(*json, HasSubstr("\"name\":\"left\""));

  // JSON -> message -> channel -> typed subscriber.
  auto sub2 = Subscriber<Sample>::Create(ch.get());
  auto words = JsonToMessage(*type, R"({"stamp": "77", "label": "from json",
                                        "values": [1.5, 2.5]})");
  ASSERT_TRUE(words.ok()) << words.status();
  auto raw_pub = RawPublisher::Create(opened->get());
  ASSERT_TRUE(raw_pub.ok());
  std::span<const std::byte> framed(
      reinterpret_cast<const std::byte*>(words->data()), words->size() * 8);
  ASSERT_EQ((*raw_pub)->Publish(framed).status, PublishStatus::kOk);
  Message<Sample> m;
  ASSERT_EQ((*sub2)->Next(&m), ReceiveStatus::kOk);
  EXPECT_EQ(m.root.getStamp(), 77u);
  EXPECT_STREQ(m.root.getLabel().cStr(), "from json");
  EXPECT_FLOAT_EQ(m.root.getValues()[1], 2.5f);

  auto bad = JsonToMessage(*type, R"({"stamp": "not a number"})");
  EXPECT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("Sample"));
}

// What `tether log check` uses: the same verdict as MessageToJson, without
// the JSON, for a valid message, one with an out-of-bounds root and one
// whose pointers are in bounds but of the wrong kind for Sample's fields
// (a struct where Sample has Text), deep in a list as well as at the root.
TEST_F(EndpointsTest, CheckMessageDecodesAgreesWithMessageToJson) {
  const capnp::StructSchema type = capnp::Schema::from<Sample>();
  auto framed = [](capnp::MessageBuilder& b) {
    kj::Array<capnp::word> flat = capnp::messageToFlatArray(b);
    std::vector<std::byte> bytes(flat.size() * 8 + 1);
    // One byte off the word grid: log records need not be aligned.
    std::memcpy(bytes.data() + 1, flat.begin(), flat.size() * 8);
    return bytes;
  };
  auto verdicts = [&](const std::vector<std::byte>& bytes) {
    const std::span<const std::byte> b(bytes.data() + 1, bytes.size() - 1);
    const absl::Status checked = CheckMessageDecodes(type, b);
    const absl::StatusOr<std::string> json = MessageToJson(type, b);
    EXPECT_EQ(checked.ok(), json.ok()) << checked << " / " << json.status();
    if (!json.ok()) EXPECT_EQ(checked.message(), json.status().message());
    return checked;
  };

  capnp::MallocMessageBuilder good;
  Sample::Builder g = good.initRoot<Sample>();
  g.setLabel("fine");
  g.initJoints(2)[1].setName("right");
  g.initChild().initNames(1).set(0, "nested");
  EXPECT_TRUE(verdicts(framed(good)).ok());

  std::vector<std::byte> bad_root = framed(good);
  std::memset(bad_root.data() + 1 + 8, 0xff, 8);  // 0xFFFFFFFFFFFFFFFC
  bad_root[1 + 8] = std::byte{0xfc};
  EXPECT_THAT(verdicts(bad_root).message(), HasSubstr("out-of-bounds"));

  capnp::MallocMessageBuilder wrong_kind;
  wrong_kind.initRoot<StructFirst>().initInner().setName("not text");
  EXPECT_THAT(verdicts(framed(wrong_kind)).message(), HasSubstr("text"));

  // Deep inside: Sample.child (pointer 6) built as a StructFirst, so the
  // child's label (its pointer 0) is a struct.
  capnp::MallocMessageBuilder deep_kind;
  capnp::toAny(deep_kind.initRoot<Sample>())
      .getPointerSection()[6]
      .initAs<StructFirst>()
      .initInner()
      .setName("deep");
  EXPECT_THAT(verdicts(framed(deep_kind)).message(), HasSubstr("text"));
}

TEST_F(EndpointsTest, ListShowsEveryChannelWithTypeShapeAndCounts) {
  auto a = MakeChannel("/a", kScalars, 64, 16);
  auto b = MakeChannel("/b/c", kSample, 1024, 4);
  auto pub = Publisher<Scalars>::Create(a.get());
  for (int i = 0; i < 5; ++i) {
    Loan<Scalars> l = (*pub)->MakeLoan();
    ASSERT_EQ((*pub)->Send(std::move(l)).status, PublishStatus::kOk);
  }
  auto sub = Subscriber<Sample>::Create(b.get());
  // A stray file that is not a tether channel is listed with its error.
  shm::ChannelOptions plain = root_.options();
  ASSERT_TRUE(shm::Channel::OpenOrCreate(plain, "/stray",
                                         {.slot_size = 8, .queue_depth = 2})
                  .ok());
  auto list = ListChannels(root_.options());
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->size(), 3u);
  EXPECT_EQ((*list)[0].name, "/a");
  EXPECT_EQ((*list)[0].type_name, kScalars);
  EXPECT_EQ((*list)[0].params.queue_depth, 16u);
  EXPECT_EQ((*list)[0].stats.next_queue_index, 5u);
  EXPECT_EQ((*list)[0].stats.publishers, 1);
  EXPECT_EQ((*list)[1].name, "/b/c");
  EXPECT_EQ((*list)[1].max_size, 1024u);
  EXPECT_EQ((*list)[1].stats.pinning_readers, 1);
  EXPECT_EQ((*list)[2].name, "/stray");
  EXPECT_THAT((*list)[2].error, HasSubstr("no valid tether channel info"));
}

}  // namespace
}  // namespace tether::transport
