// loop/node_main.h as a node's main() uses it: the environment the launcher
// sets, the stack and its channels opened with the node's own types or the
// stack's schema files, errors that say what to fix, and a stop signal
// ending Run().
#include "loop/node_main.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/shm/shm_test_util.h"
#include "tests/transport/framing_test.capnp.h"
#include "tests/util/test_dir.h"
#include "transport/channel_handle.h"

namespace tether::loop {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// A stack with one Sample channel and the node "talker"; `schemas` is the
// JSON of its "schemas" list.
fs::path WriteStack(const fs::path& dir, const std::string& schemas) {
  const fs::path path = dir / "stack.json";
  std::ofstream(path) << R"({"schemas": )" << schemas << R"(,
  "channels": [{"name": "/test/samples",
                "type": "tests/transport/framing_test.capnp:Sample",
                "maxSize": 1024, "queueDepth": 8}],
  "nodes": [{"name": "talker", "command": "/bin/true",
             "writes": ["/test/samples"]}]})";
  return path;
}

transport::NodeEnvironment Environment(const fs::path& stack,
                                       const shm::ChannelOptions& channels) {
  transport::NodeEnvironment env;
  env.node_name = "talker";
  env.config_path = stack.string();
  env.channels = channels;
  return env;
}

TEST(NodeEnvironmentFromProcess, ReadsTheLaunchersVariablesAndTheFlagWins) {
  ::setenv(transport::kEnvNode, "estimator", 1);
  ::setenv(transport::kEnvStack, "/run/stack.json", 1);
  ::setenv(transport::kEnvRoot, "/dev/shm/elsewhere", 1);
  ::setenv(transport::kEnvInstance, "robot1", 1);
  transport::NodeEnvironment env =
      NodeEnvironmentFromProcess("default-name", "default.json");
  EXPECT_EQ(env.node_name, "estimator");
  EXPECT_EQ(env.config_path, "/run/stack.json");
  EXPECT_EQ(env.channels.root, "/dev/shm/elsewhere");
  EXPECT_EQ(env.channels.instance, "robot1");
  EXPECT_EQ(NodeEnvironmentFromProcess("n", "d.json", "--config-given.json")
                .config_path,
            "--config-given.json");
  for (const char* name : {transport::kEnvNode, transport::kEnvStack,
                           transport::kEnvRoot, transport::kEnvInstance}) {
    ::unsetenv(name);
  }
  env = NodeEnvironmentFromProcess("sensors", "examples/stack.json");
  EXPECT_EQ(env.node_name, "sensors");
  EXPECT_EQ(env.config_path, "examples/stack.json");
}

TEST(NodeMain, OpensTheStacksChannelsWithTheNodesOwnTypes) {
  shm::testing::ScopedRoot root;
  const fs::path stack = WriteStack(tether::testing::FreshTestDir(), "[]");
  absl::StatusOr<std::unique_ptr<NodeMain>> main = NodeMain::Start(
      Environment(stack, root.options()),
      [](transport::SchemaRegistry* r) { r->Register<Sample>(); });
  ASSERT_TRUE(main.ok()) << main.status();
  ASSERT_NE((*main)->loop(), nullptr);
  ASSERT_TRUE((*main)->node_config().has_value());
  EXPECT_EQ(std::string((*main)->node_config()->getName().cStr()), "talker");
  EXPECT_TRUE(
      fs::exists(shm::Channel::PathFor(root.options(), "/test/samples")));
  EXPECT_TRUE((*main)->loop()->MakeSender<Sample>("/test/samples").ok());
}

TEST(NodeMain, TypesItDoesNotLinkComeFromTheStacksSchemaFiles) {
  shm::testing::ScopedRoot root;
  // The test runs in the runfiles root: the workspace root of the schema.
  const fs::path stack = WriteStack(
      tether::testing::FreshTestDir(),
      "[\"" +
          (fs::current_path() / "tests/transport/framing_test.capnp").string() +
          "\"]");
  absl::StatusOr<std::unique_ptr<NodeMain>> main =
      NodeMain::Start(Environment(stack, root.options()), nullptr);
  ASSERT_TRUE(main.ok()) << main.status();
  absl::StatusOr<std::unique_ptr<transport::ChannelHandle>> channel =
      transport::ChannelHandle::Open(root.options(), "/test/samples");
  ASSERT_TRUE(channel.ok()) << channel.status();
  EXPECT_EQ((*channel)->type_name(),
            "tests/transport/framing_test.capnp:Sample");
}

TEST(NodeMain, ErrorsNameTheStackAndHowToPassAnother) {
  shm::testing::ScopedRoot root;
  const fs::path dir = tether::testing::FreshTestDir();
  absl::StatusOr<std::unique_ptr<NodeMain>> missing = NodeMain::Start(
      Environment(dir / "missing.json", root.options()), nullptr);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("missing.json (pass --config=FILE or set "
                        "TETHER_STACK)"));
  // A type neither linked nor in a schema file.
  absl::StatusOr<std::unique_ptr<NodeMain>> unknown = NodeMain::Start(
      Environment(WriteStack(dir, "[]"), root.options()), nullptr);
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(std::string(unknown.status().message()),
              HasSubstr("framing_test.capnp:Sample"));
  // A schema file that does not exist, named at its entry.
  absl::StatusOr<std::unique_ptr<NodeMain>> no_schema = NodeMain::Start(
      Environment(WriteStack(dir, R"(["nope.capnp"])"), root.options()),
      nullptr);
  ASSERT_FALSE(no_schema.ok());
  EXPECT_THAT(std::string(no_schema.status().message()),
              HasSubstr("schemas[0]: schema file "));
}

TEST(NodeMain, AStopSignalEndsRun) {
  shm::testing::ScopedRoot root;
  absl::StatusOr<std::unique_ptr<NodeMain>> main = NodeMain::Start(
      Environment(WriteStack(tether::testing::FreshTestDir(), "[]"),
                  root.options()),
      [](transport::SchemaRegistry* r) { r->Register<Sample>(); });
  ASSERT_TRUE(main.ok()) << main.status();
  ASSERT_EQ(::raise(SIGTERM), 0);  // Caught by its StopSignals.
  EXPECT_EQ((*main)->Run(), 0);
}

}  // namespace
}  // namespace tether::loop
