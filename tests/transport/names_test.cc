// Channel and instance names are refused up front, with what to change,
// before anything exists on disk.
#include "transport/names.h"

#include <sys/stat.h>

#include <string>

#include "capnp/message.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/shm/shm_test_util.h"
#include "tests/transport/framing_test.capnp.h"
#include "transport/channel_handle.h"
#include "transport/config.capnp.h"
#include "transport/schema_registry.h"

namespace tether::transport {
namespace {

using ::testing::HasSubstr;

TEST(ChannelNameTest, AcceptsPartsOfNameCharacters) {
  for (const char* name :
       {"/a", "/robot/joint_state", "/tether/launcher/status", "/a.b/c-d_e",
        "/x/1/2/3"}) {
    EXPECT_TRUE(CheckChannelName(name).ok()) << name;
  }
}

TEST(ChannelNameTest, RefusesWhatIsNotOneChannelFileSayingWhy) {
  struct Case {
    std::string name;
    const char* why;
  };
  for (const Case& c : std::initializer_list<Case>{
           {"", "it is empty"},
           {"robot/x", "does not start with '/'"},
           {"/", "it ends with '/'"},
           {"/robot/", "it ends with '/'"},
           {"/robot//x", "empty part"},
           {"/robot/../etc", "a part \"..\""},
           {"/.", "a part \".\""},
           {"/robot/x y", "the character ' '"},
           {"/robot/%2F", "the character '%'"},
       }) {
    const absl::Status s = CheckChannelName(c.name);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << c.name;
    EXPECT_THAT(s.message(), HasSubstr(c.why)) << c.name;
    EXPECT_THAT(s.message(), HasSubstr("like \"/robot/joint_state\""));
  }
}

// The recorder's own records in logs (its loss records on
// /tether/log/gaps) would be read back from a channel of that name.
TEST(ChannelNameTest, RefusesTheNamesReservedForTheRecordersRecords) {
  for (const char* name : {"/tether/log/gaps", "/tether/log/x/y"}) {
    const absl::Status s = CheckChannelName(name);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << name;
    EXPECT_THAT(s.message(), HasSubstr("is reserved")) << name;
  }
  EXPECT_TRUE(CheckChannelName("/tether/logs").ok());
  EXPECT_TRUE(CheckChannelName("/robot/tether/log/gaps").ok());
}

// The file name is the escaped name: '/' takes three bytes. The longest
// accepted one leaves room for a creator's private ".<name>.tmp.<pid>.<n>".
TEST(ChannelNameTest, LengthIsCountedAsTheFileName) {
  // "/" + 197 = 200 bytes escaped: accepted; one more is not.
  EXPECT_TRUE(CheckChannelName("/" + std::string(197, 'a')).ok());
  const absl::Status s = CheckChannelName("/" + std::string(198, 'a'));
  EXPECT_THAT(s.message(), HasSubstr("file name is 201 bytes"));
  // Many short parts: 40 x "/ab" is 120 characters but 200 bytes escaped.
  std::string parts;
  for (int i = 0; i < 40; ++i) parts += "/ab";
  EXPECT_TRUE(CheckChannelName(parts).ok());
  EXPECT_FALSE(CheckChannelName(parts + "/c").ok());
  // The reproducer of the issue: 254-300 characters once failed on disk.
  for (size_t n : {254u, 280u, 300u}) {
    EXPECT_THAT(CheckChannelName("/" + std::string(n, 'x')).message(),
                HasSubstr("is too long"));
  }
}

TEST(InstanceNameTest, RefusesPathsAndDotNames) {
  for (const char* ok : {"default", "demo", "robot-1", "a_b.c", "X9"}) {
    EXPECT_TRUE(CheckInstanceName(ok).ok()) << ok;
  }
  for (const std::string bad :
       {std::string(""), std::string("."), std::string(".."),
        std::string(".hidden"), std::string("a/b"), std::string("../x"),
        std::string("a b"), std::string(129, 'i')}) {
    const absl::Status s = CheckInstanceName(bad);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << bad;
    EXPECT_THAT(s.message(), HasSubstr("is not an instance name")) << bad;
  }
}

// Creates channel `name` in `options`; returns the status.
absl::Status CreateChannel(const shm::ChannelOptions& options,
                           const std::string& name) {
  SchemaRegistry schemas;
  schemas.Register<Scalars>();
  capnp::MallocMessageBuilder m;
  auto c = m.initRoot<config::Channel>();
  c.setName(name);
  c.setType("tests/transport/framing_test.capnp:Scalars");
  c.setMaxSize(64);
  c.setQueueDepth(4);
  return ChannelHandle::Create(options, c.asReader(), schemas).status();
}

// Through the library: nothing is created for a bad name, not even the
// instance folder.
TEST(NamesOnDiskTest, CreateRefusesBadNamesLeavingNothing) {
  shm::testing::ScopedRoot root;
  shm::ChannelOptions options = root.options();
  for (const std::string instance : {"..", "", "a/b"}) {
    options.instance = instance;
    EXPECT_THAT(CreateChannel(options, "/a").message(),
                HasSubstr("is not an instance name"))
        << instance;
  }
  options.instance = "ok";
  EXPECT_THAT(CreateChannel(options, "/" + std::string(280, 'n')).message(),
              HasSubstr("is too long"));
  struct stat st;
  EXPECT_NE(::stat((options.root + "/ok").c_str(), &st), 0)
      << "a refused channel left its folder behind";
  EXPECT_NE(::stat((options.root + "/a").c_str(), &st), 0);
  EXPECT_NE(::stat((options.root + "/%2Fa").c_str(), &st), 0)
      << "instance \"..\" or \"\" wrote into the root itself";
  EXPECT_TRUE(CreateChannel(options, "/a").ok());
}

}  // namespace
}  // namespace tether::transport
