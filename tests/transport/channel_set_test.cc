// ChannelSet: the instance folder is made for the whole stack (whichever
// channel comes first), and a Create that fails part-way takes back what
// it made -- channels and folders -- while leaving channels it only opened.
#include "transport/channel_set.h"

#include <grp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "capnp/message.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shm/channel.h"
#include "tests/shm/shm_test_util.h"
#include "tests/transport/framing_test.capnp.h"
#include "transport/config.capnp.h"
#include "transport/config.h"
#include "transport/schema_registry.h"

namespace tether::transport {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

// A Scalars channel entry; `extra` is more JSON members (with a comma).
std::string Channel(const std::string& name, int depth,
                    const std::string& extra = "") {
  return "{\"name\": \"" + name +
         "\", \"type\": \"tests/transport/framing_test.capnp:Scalars\", "
         "\"maxSize\": 256, \"queueDepth\": " +
         std::to_string(depth) + extra + "}";
}

std::string Stack(const std::vector<std::string>& channels) {
  std::string out = "{\"channels\": [";
  for (size_t i = 0; i < channels.size(); ++i) {
    out += (i == 0 ? "" : ", ") + channels[i];
  }
  return out + "]}";
}

class ChannelSetTest : public ::testing::Test {
 protected:
  void SetUp() override { schemas_.Register<Scalars>(); }

  StackConfig Parse(const std::string& json) {
    absl::StatusOr<StackConfig> stack =
        ParseStackConfig(json, "<test stack>", schemas_.known_types());
    EXPECT_TRUE(stack.ok()) << stack.status();
    return std::move(*stack);
  }

  std::string Dir() const { return root_.root() + "/test"; }

  shm::testing::ScopedRoot root_;
  SchemaRegistry schemas_;
};

// The name of this process's group (which it may give its files).
std::string OwnGroup() {
  struct group* g = ::getgrgid(::getegid());
  return g != nullptr ? g->gr_name : "";
}

TEST_F(ChannelSetTest, MakesTheInstanceFolderForTheWholeStack) {
  const std::string group = OwnGroup();
  if (group.empty()) GTEST_SKIP() << "this process's group has no name";
  // The first channel is private; the second lets the stack's group publish.
  StackConfig stack = Parse(Stack(
      {Channel("/private", 4, R"(, "mode": "0600")"),
       Channel("/shared", 4, R"(, "mode": "0660", "group": ")" + group +
                                  R"(")")}));
  auto set = ChannelSet::Create(root_.options(), stack, schemas_);
  ASSERT_TRUE(set.ok()) << set.status();
  struct stat st;
  ASSERT_EQ(::stat(Dir().c_str(), &st), 0);
  // The group's publishers may create files there (their channel), and
  // they inherit the group (setgid), as docs/security.md says.
  EXPECT_EQ(st.st_mode & 07777, static_cast<mode_t>(S_ISGID | 0770))
      << std::oct << (st.st_mode & 07777);
  EXPECT_EQ(st.st_gid, ::getegid());
  ASSERT_EQ(::stat(root_.root().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, static_cast<mode_t>(S_ISVTX | 0777))
      << std::oct << (st.st_mode & 07777);
}

TEST_F(ChannelSetTest, ACreateThatFailsPartWayRemovesTheChannelsItMadeOnly) {
  // A running stack's /b (in use: an unused one would be made anew).
  auto earlier = ChannelSet::Create(
      root_.options(), Parse(Stack({Channel("/b", 8)})), schemas_);
  ASSERT_TRUE(earlier.ok()) << earlier.status();
  // /a is made, then /b exists with another depth: the stack is refused.
  auto set = ChannelSet::Create(
      root_.options(),
      Parse(Stack({Channel("/a", 8), Channel("/b", 16), Channel("/c", 8)})),
      schemas_);
  ASSERT_FALSE(set.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(set.status())) << set.status();
  EXPECT_THAT(std::string(set.status().message()), HasSubstr("/b"));
  // /a, which this Create made, is gone with its reader-state file; /b,
  // which it only opened, is as it was.
  auto names = shm::Channel::List(root_.options());
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_THAT(*names, ElementsAre("/b"));
  for (const std::string& f : {std::string("%2Fa"), std::string("%2Fc")}) {
    EXPECT_NE(::access((Dir() + "/" + f).c_str(), F_OK), 0) << f;
  }
  auto b = shm::Channel::Open(root_.options(), "/b");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)->params().queue_depth, 8u);
  EXPECT_TRUE((*b)->CheckConsistency().ok());
}

TEST_F(ChannelSetTest, ACreateThatFailsPartWayRemovesTheFoldersItMade) {
  // `more` names /a again with another shape: /a is made (and the folders
  // for it), then refused as the second entry's.
  capnp::MallocMessageBuilder message;
  auto again = message.initRoot<config::Channel>();
  again.setName("/a");
  again.setType("tests/transport/framing_test.capnp:Scalars");
  again.setMaxSize(256);
  again.setQueueDepth(16);
  const config::Channel::Reader more[] = {again.asReader()};
  auto set = ChannelSet::Create(root_.options(),
                                Parse(Stack({Channel("/a", 8)})), schemas_,
                                more);
  ASSERT_FALSE(set.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(set.status())) << set.status();
  EXPECT_NE(::access(root_.root().c_str(), F_OK), 0)
      << root_.root() << " was left behind";
}

TEST_F(ChannelSetTest, MoreChannelsAreCreatedAndFoundWithTheStacks) {
  capnp::MallocMessageBuilder message;
  auto extra = message.initRoot<config::Channel>();
  extra.setName("/extra");
  extra.setType("tests/transport/framing_test.capnp:Scalars");
  extra.setMaxSize(256);
  extra.setQueueDepth(4);
  const config::Channel::Reader more[] = {extra.asReader()};
  auto set = ChannelSet::Create(root_.options(),
                                Parse(Stack({Channel("/a", 8)})), schemas_,
                                more);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_TRUE((*set)->Find("/a").ok());
  auto found = (*set)->Find("/extra");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_TRUE((*found)->created());
  EXPECT_EQ((*found)->params().queue_depth, 4u);
  // Abandon takes back what Create made.
  (*set)->Abandon();
  EXPECT_NE(::access(root_.root().c_str(), F_OK), 0);
}

TEST_F(ChannelSetTest, AMissingChannelGetsTheFixThatWorks) {
  auto set = ChannelSet::Create(root_.options(),
                                Parse(Stack({Channel("/ping", 8)})), schemas_);
  ASSERT_TRUE(set.ok()) << set.status();
  // A name without its leading slash: adding "ping" to the config would be
  // refused, so the advice is the slash.
  auto relative = (*set)->Find("ping");
  ASSERT_EQ(relative.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(relative.status().message(),
              HasSubstr("channel names start with \"/\"; did you mean "
                        "\"/ping\"?"));
  EXPECT_THAT(relative.status().message(),
              Not(HasSubstr("add it to the config")));
  auto typo = (*set)->Find("/pnig");
  EXPECT_THAT(typo.status().message(),
              HasSubstr("add it to the config's channels; did you mean "
                        "\"/ping\"?"));
  auto other = (*set)->Find("/camera");
  EXPECT_THAT(other.status().message(),
              HasSubstr("(channels: \"/ping\"): add it to the config's "
                        "channels"));
  EXPECT_THAT(other.status().message(), Not(HasSubstr("did you mean")));
}

}  // namespace
}  // namespace tether::transport
