// The real `tether` binary (a data dependency): pub a JSON message, then
// echo --count 1 --from-oldest prints it; stat and clean run end to end.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "capnp/message.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/tools/run_tether.h"
#include "tests/shm/shm_test_util.h"
#include "tests/tools/json_test_parser.h"
#include "tests/transport/framing_test.capnp.h"
#include "transport/channel_handle.h"
#include "transport/config.capnp.h"
#include "transport/schema_registry.h"

namespace tether::tools {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

using test::Outcome;
using test::RunTether;

// A command run inside a node (or a shell with the launcher's variables)
// sees that node's stack; flags win over the variables; names that would
// escape the root are refused before anything is read or removed.
TEST(ChannelCommandsBinary, RootAndInstanceComeFromTheLaunchersVariables) {
  shm::testing::ScopedRoot root;
  transport::SchemaRegistry schemas;
  schemas.Register<Scalars>();
  capnp::MallocMessageBuilder m;
  auto c = m.initRoot<transport::config::Channel>();
  c.setName("/robot/scalars");
  c.setType("tests/transport/framing_test.capnp:Scalars");
  c.setMaxSize(256);
  c.setQueueDepth(8);
  shm::ChannelOptions options = root.options();
  options.instance = "stack-a";
  auto ch = transport::ChannelHandle::Create(options, c.asReader(), schemas);
  ASSERT_TRUE(ch.ok()) << ch.status();

  ASSERT_EQ(::setenv("TETHER_ROOT", root.root().c_str(), 1), 0);
  ASSERT_EQ(::setenv("TETHER_INSTANCE", "stack-a", 1), 0);
  Outcome list = RunTether({"list"});
  EXPECT_EQ(list.code, 0) << list.err;
  EXPECT_THAT(list.out, HasSubstr("/robot/scalars"));
  Outcome other = RunTether({"list", "--instance", "stack-b"});
  EXPECT_THAT(other.out + other.err, Not(HasSubstr("/robot/scalars")));
  Outcome stat = RunTether({"stat", "/robot/scalars", "--duration", "0.2"});
  EXPECT_EQ(stat.code, 0) << stat.err;

  for (const char* bad : {"..", "", "../stack-a", "."}) {
    Outcome o = RunTether({"clean", "--instance", bad});
    EXPECT_EQ(o.code, 2) << bad;
    EXPECT_THAT(o.err, HasSubstr("is not an instance name")) << bad;
  }
  ::unsetenv("TETHER_ROOT");
  ::unsetenv("TETHER_INSTANCE");
  // The channel and its folder are still there.
  EXPECT_TRUE(transport::ChannelHandle::Open(options, "/robot/scalars").ok());
}

TEST(ChannelCommandsBinary, PubThenEchoPrintsTheMessage) {
  shm::testing::ScopedRoot root;
  transport::SchemaRegistry schemas;
  schemas.Register<Scalars>();
  capnp::MallocMessageBuilder m;
  auto c = m.initRoot<transport::config::Channel>();
  c.setName("/robot/scalars");
  c.setType("tests/transport/framing_test.capnp:Scalars");
  c.setMaxSize(256);
  c.setQueueDepth(8);
  c.setMaxPublishers(1);
  c.setMaxPinned(2);
  {
    auto ch = transport::ChannelHandle::Create(root.options(), c.asReader(),
                                               schemas);
    ASSERT_TRUE(ch.ok()) << ch.status();
  }
  const std::vector<std::string> where = {"--root", root.root(), "--instance",
                                          "test"};
  auto with = [&](std::vector<std::string> args) {
    args.insert(args.end(), where.begin(), where.end());
    return args;
  };

  // Bad input first: each is refused with what is wrong, and nothing sent.
  Outcome empty = RunTether(with({"pub", "", "{}"}));
  EXPECT_NE(empty.code, 0);
  EXPECT_THAT(empty.err, HasSubstr("\"\" is not a channel name: it is empty"));
  Outcome fast = RunTether(
      with({"pub", "/robot/scalars", "{}", "--rate", "1e12"}));
  EXPECT_EQ(fast.code, 2);
  EXPECT_THAT(fast.err, HasSubstr("--rate 1e12 is too large (at most 1e9)"));

  Outcome pub = RunTether(
      with({"pub", "/robot/scalars", R"({"i64": "7", "f64": 2.5})"}));
  ASSERT_EQ(pub.code, 0) << pub.err;
  EXPECT_THAT(pub.out, HasSubstr("published 1 message on /robot/scalars"));

  Outcome echo = RunTether(
      with({"echo", "/robot/scalars", "--count", "1", "--from-oldest"}));
  ASSERT_EQ(echo.code, 0) << echo.err;
  auto json = test::ParseJson(echo.out);
  ASSERT_TRUE(json.ok()) << json.status() << "\n" << echo.out;
  EXPECT_EQ(json->Find("i64")->string, "7");
  EXPECT_EQ(json->Find("f64")->number, 2.5);
  EXPECT_THAT(echo.err, HasSubstr("1 printed, missed 0"));

  Outcome bad = RunTether(with({"pub", "/robot/scalars", R"({"i64": })"}));
  EXPECT_EQ(bad.code, 2);
  EXPECT_THAT(bad.err, HasSubstr("not valid JSON (line 1, column 9)"));
  // A typo in a field name is an error in the user's words, not a default.
  Outcome typo = RunTether(with({"pub", "/robot/scalars", R"({"i46": 1})"}));
  EXPECT_EQ(typo.code, 2);
  EXPECT_THAT(typo.err, HasSubstr("i46: unknown field; did you mean \"i64\"?"));
  EXPECT_THAT(typo.err, Not(HasSubstr("impl->")));
  // A number that overflows a double is not published as infinity.
  Outcome inf = RunTether(with({"pub", "/robot/scalars", R"({"f64": 1e400})"}));
  EXPECT_EQ(inf.code, 2);
  EXPECT_THAT(inf.err, HasSubstr("f64: the number is too large for a double"));

  Outcome stat = RunTether(
      with({"stat", "--duration", "0.2", "--interval", "0.1"}));
  EXPECT_EQ(stat.code, 0) << stat.err;
  EXPECT_THAT(stat.out, HasSubstr("=== summary over"));
  EXPECT_THAT(stat.out, HasSubstr("/robot/scalars"));

  Outcome clean = RunTether(with({"clean"}));
  EXPECT_EQ(clean.code, 0) << clean.err;
  EXPECT_THAT(clean.out, HasSubstr("removed /robot/scalars"));
  EXPECT_THAT(clean.out, HasSubstr("removed empty directory"));

  for (const char* cmd : {"echo", "pub", "stat", "clean"}) {
    Outcome help = RunTether({cmd, "--help"});
    EXPECT_EQ(help.code, 0) << cmd;
    EXPECT_THAT(help.out, HasSubstr(std::string("usage: tether ") + cmd));
  }
  Outcome top = RunTether({"--help"});
  for (const char* cmd : {"echo", "pub", "stat", "clean"}) {
    EXPECT_THAT(top.out, HasSubstr(cmd));
  }
}

}  // namespace
}  // namespace tether::tools
