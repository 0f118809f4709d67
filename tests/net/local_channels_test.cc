#include "net/local_channels.h"

#include "capnp/message.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/shm/shm_test_util.h"
#include "tests/transport/framing_test.capnp.h"
#include "transport/config.capnp.h"

namespace tether::net {
namespace {

using ::testing::HasSubstr;

class LocalChannelsTest : public ::testing::Test {
 protected:
  LocalChannelsTest() {
    sender_ = root_.options();
    sender_.instance = "sender";
    receiver_ = root_.options();
    receiver_.instance = "receiver";
    schemas_.Register<Sample>();
    schemas_.Register<Scalars>();
  }
  std::unique_ptr<transport::ChannelHandle> Make(
      const shm::ChannelOptions& o, const std::string& name,
      const std::string& type, uint32_t max_size = 1024) {
    capnp::MallocMessageBuilder message;
    auto c = message.initRoot<transport::config::Channel>();
    c.setName(name);
    c.setType(type);
    c.setMaxSize(max_size);
    c.setFrequencyHz(250);
    c.setQueueDepth(64);
    c.setMaxPublishers(3);
    c.setMaxPinned(5);
    auto h = transport::ChannelHandle::Create(o, c.asReader(), schemas_);
    EXPECT_TRUE(h.ok()) << h.status();
    return std::move(*h);
  }

  shm::testing::ScopedRoot root_;
  shm::ChannelOptions sender_, receiver_;
  transport::SchemaRegistry schemas_;
};

constexpr char kSample[] = "tests/transport/framing_test.capnp:Sample";
constexpr char kScalars[] = "tests/transport/framing_test.capnp:Scalars";

TEST_F(LocalChannelsTest, CreatesTheSendersChannelFromItsDescription) {
  auto sent = Make(sender_, "/robot/scan", kSample);
  const ChannelDescription d = Describe(*sent, "bridge a on host x");
  EXPECT_EQ(d.schema_hash, SchemaHash(sent->schema()));
  auto made = OpenOrCreateFor(receiver_, d, "bridge b on host y");
  ASSERT_TRUE(made.ok()) << made.status();
  const transport::ChannelHandle& r = **made;
  EXPECT_EQ(r.type_id(), sent->type_id());
  EXPECT_EQ(r.type_name(), sent->type_name());
  EXPECT_EQ(r.max_size(), sent->max_size());
  EXPECT_EQ(r.frequency_hz(), sent->frequency_hz());
  EXPECT_EQ(r.params(), sent->params());
  // The schema is carried byte for byte, so hashes agree on both hosts.
  EXPECT_TRUE(std::equal(r.schema().begin(), r.schema().end(),
                         sent->schema().begin(), sent->schema().end()));
  // A second announcement opens the same channel.
  EXPECT_TRUE(OpenOrCreateFor(receiver_, d, "bridge b on host y").ok());
}

TEST_F(LocalChannelsTest, RefusesAnotherTypeNamingBothSides) {
  auto sent = Make(sender_, "/robot/pose", kSample);
  Make(receiver_, "/robot/pose", kScalars);
  auto made = OpenOrCreateFor(receiver_, Describe(*sent, "bridge a on host x"),
                              "bridge b on host y");
  ASSERT_FALSE(made.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(made.status()));
  const std::string m(made.status().message());
  EXPECT_THAT(m, HasSubstr("/robot/pose refused"));
  EXPECT_THAT(m, HasSubstr("bridge a on host x sends"));
  EXPECT_THAT(m, HasSubstr("Sample"));
  EXPECT_THAT(m, HasSubstr("bridge b on host y has"));
  EXPECT_THAT(m, HasSubstr("Scalars"));
}

TEST_F(LocalChannelsTest, RefusesADifferentSchemaOfTheSameType) {
  auto sent = Make(sender_, "/robot/scan", kSample);
  Make(receiver_, "/robot/scan", kSample);
  ChannelDescription d = Describe(*sent, "bridge a on host x");
  d.schema_hash ^= 1;  // as if built from another version of the .capnp
  auto made = OpenOrCreateFor(receiver_, d, "bridge b on host y");
  ASSERT_FALSE(made.ok());
  EXPECT_THAT(made.status().message(), HasSubstr("different schemas"));
}

TEST_F(LocalChannelsTest, RefusesAChannelSmallerThanTheSendersMessages) {
  auto sent = Make(sender_, "/robot/scan", kSample, 4096);
  Make(receiver_, "/robot/scan", kSample, 1024);
  auto made = OpenOrCreateFor(receiver_, Describe(*sent, "a"), "b");
  ASSERT_FALSE(made.ok());
  EXPECT_THAT(made.status().message(), HasSubstr("smaller"));
}

TEST_F(LocalChannelsTest, AcceptsALargerChannelWithItsOwnDepth) {
  auto sent = Make(sender_, "/robot/scan", kSample, 1024);
  Make(receiver_, "/robot/scan", kSample, 4096);
  EXPECT_TRUE(OpenOrCreateFor(receiver_, Describe(*sent, "a"), "b").ok());
}

TEST_F(LocalChannelsTest, ChannelSetOpensExistingChannelsAsTheyAre) {
  auto sent = Make(sender_, "/robot/scan", kSample);
  transport::SchemaRegistry schemas;  // knows nothing compiled in
  schemas.Register<Scalars>();
  OwnChannel own{.name = "/tether/net/a/status",
                 .type_id = capnp::typeId<Scalars>(),
                 .max_size = 512,
                 .frequency_hz = 1,
                 .queue_depth = 4};
  auto set = OpenChannelSet(sender_, {"/robot/scan"}, {own}, schemas);
  ASSERT_TRUE(set.ok()) << set.status();
  auto scan = (*set)->Find("/robot/scan");
  ASSERT_TRUE(scan.ok());
  EXPECT_EQ((*scan)->type_id(), sent->type_id());
  EXPECT_EQ((*scan)->params(), sent->params());
  EXPECT_TRUE((*set)->Find("/tether/net/a/status").ok());
}

TEST_F(LocalChannelsTest, ChannelSetNamesAMissingChannelAndWhatIsThere) {
  Make(sender_, "/robot/scan", kSample);
  transport::SchemaRegistry schemas;
  auto set = OpenChannelSet(sender_, {"/robot/scna"}, {}, schemas);
  ASSERT_FALSE(set.ok());
  EXPECT_TRUE(absl::IsNotFound(set.status()));
  EXPECT_THAT(set.status().message(), HasSubstr("/robot/scna does not exist"));
  EXPECT_THAT(set.status().message(), HasSubstr("there: /robot/scan"));
}

}  // namespace
}  // namespace tether::net
