// ChannelSet: the instance folder is made for the whole stack, whichever
// channel comes first.
#include "transport/channel_set.h"

#include <grp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shm/channel.h"
#include "tests/shm/shm_test_util.h"
#include "tests/transport/framing_test.capnp.h"
#include "transport/config.h"
#include "transport/schema_registry.h"

namespace tether::transport {
namespace {


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

}  // namespace
}  // namespace tether::transport
