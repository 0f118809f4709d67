// Launcher::Create in-process, before anything runs: config errors and
// missing commands or users start nothing, message types from the stack's
// schema files, --schemas files and existing channels (with a hint when a
// type is unknown), a corrupt channel left by an earlier run is refused
// saying what to run, and a launch that fails part-way takes back the
// channels it made. (A running stack's nodes: launcher_test.cc.)
#include "tools/launcher.h"

#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "capnp/message.h"
#include "examples/demo.capnp.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shm/channel_access.h"
#include "tests/tools/launch_test_util.h"
#include "tests/tools/launcher_test_fixture.h"
#include "tools/status_publisher.h"
#include "transport/channel_handle.h"
#include "transport/config.capnp.h"
#include "transport/config.h"
#include "transport/schema_registry.h"
#include "transport/typed_endpoints.h"

namespace tether::tools {
namespace {

using testing::DemoTypes;
using testing::FileExists;
using testing::ImuChannel;
using testing::LauncherTest;
using testing::ShellNode;
using testing::StackJson;
using ::testing::HasSubstr;
using ::testing::Not;

// The test runs in the runfiles root, the workspace root of the schemas.
std::string RunfilesRoot() {
  char cwd[4096];
  return ::getcwd(cwd, sizeof(cwd)) != nullptr ? cwd : ".";
}

TEST_F(LauncherTest, InvalidConfigIsReportedAndNothingStarts) {
  const std::string marker = File("started");
  absl::StatusOr<std::unique_ptr<Launcher>> launcher = Create(Options(
      R"({"channels": [{"name": "/test/imu", "type": "examples/demo.capnp:ImuSample",
           "maxSize": 256, "queueDepth": 100}],
          "nodes": [)" +
      ShellNode("n", "touch '" + marker + "'") + "]}"));
  ASSERT_FALSE(launcher.ok());
  EXPECT_THAT(launcher.status().message(), HasSubstr("stack.json"));
  EXPECT_THAT(launcher.status().message(), HasSubstr("queueDepth"));
  EXPECT_THAT(launcher.status().message(), HasSubstr("power of two"));
  // The types hint is for unknown types only.
  EXPECT_THAT(launcher.status().message(), Not(HasSubstr("knows these types")));
  EXPECT_FALSE(FileExists(marker));
  EXPECT_FALSE(FileExists(shm::Channel::PathFor(root_.options(), "/test/imu")));
}

TEST_F(LauncherTest, MissingCommandOrUserIsReportedBeforeAnyChannelOrNode) {
  const std::string marker = File("started");
  absl::StatusOr<std::unique_ptr<Launcher>> launcher = Create(Options(StackJson(
      {ImuChannel("/test/imu")},
      {ShellNode("fine", "touch '" + marker + "'"),
       R"({"name": "ghost", "command": "/nonexistent/tether-node"})",
       R"({"name": "relative", "command": "bazel-bin/examples/nothing"})",
       R"({"name": "lost", "command": "no-such-program-anywhere"})",
       ShellNode("stranger", "true", R"(, "user": "no-such-user-xyz")")})));
  ASSERT_FALSE(launcher.ok());
  const std::string message(launcher.status().message());
  EXPECT_THAT(message, HasSubstr("nothing was started"));
  EXPECT_THAT(message,
              HasSubstr("(ghost): command \"/nonexistent/tether-node\""));
  EXPECT_THAT(message, HasSubstr("relative to the working directory " + dir_));
  EXPECT_THAT(message, HasSubstr("no-such-program-anywhere\" is not in PATH"));
  EXPECT_THAT(message, HasSubstr("no user named \"no-such-user-xyz\""));
  EXPECT_FALSE(FileExists(marker));
  EXPECT_FALSE(FileExists(shm::Channel::PathFor(root_.options(), "/test/imu")));
}

TEST_F(LauncherTest, SchemaFilesAddTypesTheLauncherDoesNotLink) {
  const std::string stack = StackJson(
      {R"({"name": "/test/joints", "type": "examples/demo.capnp:JointState",
           "maxSize": 512, "queueDepth": 4})"},
      {ShellNode("n", "exit 0")});
  auto imu_only = [] {
    auto schemas = std::make_unique<transport::SchemaRegistry>();
    schemas->Register<ImuSample>();
    return schemas;
  };
  absl::StatusOr<std::unique_ptr<Launcher>> without =
      Create(Options(stack), imu_only());
  ASSERT_FALSE(without.ok());
  EXPECT_THAT(without.status().message(), HasSubstr("JointState"));
  EXPECT_THAT(without.status().message(), HasSubstr("--schemas"));

  // A schema file as `capnp compile -o-` (or the registry) makes it.
  transport::SchemaRegistry full;
  full.Register<JointState>();
  absl::StatusOr<std::vector<std::byte>> blob =
      full.CodeGeneratorRequestFor(capnp::typeId<JointState>());
  ASSERT_TRUE(blob.ok());
  const std::string schema_file = File("joint_state.schema");
  std::ofstream(schema_file, std::ios::binary)
      .write(reinterpret_cast<const char*>(blob->data()),
             static_cast<std::streamsize>(blob->size()));
  LaunchOptions options = Options(stack);
  options.schema_files = {schema_file};
  absl::StatusOr<std::unique_ptr<Launcher>> with =
      Create(std::move(options), imu_only());
  ASSERT_TRUE(with.ok()) << with.status();
  absl::StatusOr<std::unique_ptr<transport::ChannelHandle>> channel =
      transport::ChannelHandle::Open(root_.options(), "/test/joints");
  ASSERT_TRUE(channel.ok()) << channel.status();
  EXPECT_EQ((*channel)->type_name(), "examples/demo.capnp:JointState");

  LaunchOptions bad = Options(stack);
  bad.schema_files = {File("missing.schema")};
  absl::StatusOr<std::unique_ptr<Launcher>> missing =
      Create(std::move(bad), imu_only());
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("missing.schema"));
}

TEST_F(LauncherTest, StackSchemasGiveTheTypesAndNodesOpenWithCompiledOnes) {
  // No compiled-in types at all (as `tether launch`): the stack names the
  // .capnp file, parsed with the working directory as workspace root.
  LaunchOptions options = Options(
      R"({"schemas": [")" + RunfilesRoot() + R"(/examples/demo.capnp"],
          "channels": [)" +
      ImuChannel("/test/imu") + "], \"nodes\": [" +
      ShellNode("n", "exec sleep 30") + "]}");
  options.working_directory = RunfilesRoot();
  absl::StatusOr<std::unique_ptr<Launcher>> launcher =
      Create(options, std::make_unique<transport::SchemaRegistry>());
  ASSERT_TRUE(launcher.ok()) << launcher.status();

  // A node opens the channel with its compiled type, as ChannelSet does:
  // the channel's metadata (type, schema bytes) must be the same.
  transport::SchemaRegistry compiled;
  compiled.Register<ImuSample>();
  absl::StatusOr<transport::StackConfig> stack = transport::LoadStackConfig(
      options.stack_path, compiled.known_types());
  ASSERT_TRUE(stack.ok()) << stack.status();
  absl::StatusOr<std::unique_ptr<transport::ChannelHandle>> opened =
      transport::ChannelHandle::Create(root_.options(), stack->channels()[0],
                                       compiled);
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ((*opened)->type_name(), "examples/demo.capnp:ImuSample");
  EXPECT_TRUE(transport::Publisher<ImuSample>::Create(opened->get()).ok());
}

TEST_F(LauncherTest, ExistingChannelsTeachTheirTypes) {
  // A channel left by an earlier run carries its type's schema.
  transport::SchemaRegistry compiled;
  compiled.Register<JointState>();
  const std::string joints = R"({"name": "/test/joints",
      "type": "examples/demo.capnp:JointState", "maxSize": 512,
      "queueDepth": 4})";
  absl::StatusOr<transport::StackConfig> earlier = transport::ParseStackConfig(
      R"({"channels": [)" + joints + "]}", "<earlier run>",
      compiled.known_types());
  ASSERT_TRUE(earlier.ok()) << earlier.status();
  ASSERT_TRUE(transport::ChannelHandle::Create(
                  root_.options(), earlier->channels()[0], compiled)
                  .ok());
  absl::StatusOr<std::unique_ptr<Launcher>> launcher =
      Create(Options(StackJson({joints}, {ShellNode("n", "exit 0")})),
             std::make_unique<transport::SchemaRegistry>());
  EXPECT_TRUE(launcher.ok()) << launcher.status();
}

TEST_F(LauncherTest, ACorruptChannelLeftByAnEarlierRunIsRefusedSayingWhatToRun) {
  const std::string json =
      StackJson({ImuChannel("/test/imu")}, {ShellNode("n", "exit 0")});
  {
    // An earlier run's channel, then garbage over its ring (dd).
    auto schemas = DemoTypes();
    absl::StatusOr<transport::StackConfig> earlier = transport::ParseStackConfig(
        json, "<earlier run>", schemas->known_types());
    ASSERT_TRUE(earlier.ok()) << earlier.status();
    ASSERT_TRUE(transport::ChannelHandle::Create(
                    root_.options(), earlier->channels()[0], *schemas)
                    .ok());
    auto c = shm::Channel::Open(root_.options(), "/test/imu");
    ASSERT_TRUE(c.ok()) << c.status();
    for (uint32_t pos = 0; pos < (*c)->params().queue_depth; ++pos) {
      shm::internal::ChannelAccess::ring_entry(**c, pos)->store(
          0x5a5a5a5a5a5a5a5aull + pos);
    }
  }
  absl::StatusOr<std::unique_ptr<Launcher>> launcher = Create(Options(json));
  ASSERT_FALSE(launcher.ok());
  EXPECT_EQ(launcher.status().code(), absl::StatusCode::kDataLoss);
  const std::string message(launcher.status().message());
  EXPECT_THAT(message, HasSubstr("creating the stack's channels: channel "
                                 "/test/imu is corrupt: ring position "));
  EXPECT_THAT(message, HasSubstr(shm::Channel::PathFor(root_.options(),
                                                       "/test/imu")));
  EXPECT_THAT(message, HasSubstr("the launcher does not start a stack on a "
                                 "corrupt channel"));
  EXPECT_THAT(message, HasSubstr("run `tether clean --root " + root_.root() +
                                 " --instance test`"));
  EXPECT_THAT(out_.str(), Not(HasSubstr("created")));
  // Not re-created behind the user's back: the same corrupt file is there.
  auto kept = shm::Channel::Open(root_.options(), "/test/imu");
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_TRUE((*kept)->corrupt());
  kept->reset();
  // Once it is removed, the stack launches (the refusal left no lock).
  ASSERT_TRUE(shm::Channel::Remove(root_.options(), "/test/imu").ok());
  absl::StatusOr<std::unique_ptr<Launcher>> relaunched = Create(Options(json));
  EXPECT_TRUE(relaunched.ok()) << relaunched.status();
}

TEST_F(LauncherTest, UnreadableStackSchemaIsReportedAtItsEntry) {
  absl::StatusOr<std::unique_ptr<Launcher>> launcher =
      Create(Options(R"({"schemas": ["msgs/missing.capnp"], "channels": [)" +
                     ImuChannel("/test/imu") + "]}"),
             std::make_unique<transport::SchemaRegistry>());
  ASSERT_FALSE(launcher.ok());
  EXPECT_TRUE(absl::IsNotFound(launcher.status())) << launcher.status();
  EXPECT_THAT(launcher.status().message(),
              HasSubstr("stack.json:1: schemas[0]: schema file " + dir_ +
                        "/msgs/missing.capnp: cannot read it"));
  EXPECT_FALSE(FileExists(shm::Channel::PathFor(root_.options(), "/test/imu")));
}

TEST_F(LauncherTest, StackMayNotDeclareTheStatusChannel) {
  absl::StatusOr<std::unique_ptr<Launcher>> launcher = Create(Options(StackJson(
      {R"({"name": "/tether/launcher/status", "type": "examples/demo.capnp:ImuSample",
           "maxSize": 256, "queueDepth": 4})"},
      {ShellNode("n", "exit 0")})));
  ASSERT_FALSE(launcher.ok());
  EXPECT_THAT(launcher.status().message(),
              HasSubstr("the launcher's own status channel"));
}

// A launch that fails after some of its channels were made (here: the
// status channel an older launcher still uses has another shape) takes
// back the channels it made and leaves what was there.
TEST_F(LauncherTest, ALaunchThatFailsPartWayRemovesTheChannelsItMade) {
  // Still used by the older launcher's process (an unused one would be
  // made anew).
  transport::SchemaRegistry schemas;
  capnp::MallocMessageBuilder message;
  StatusPublisher::ChannelConfig(&schemas, &message);
  message.getRoot<transport::config::Channel>().setQueueDepth(16);
  auto old = transport::ChannelHandle::Create(
      root_.options(),
      message.getRoot<transport::config::Channel>().asReader(), schemas);
  ASSERT_TRUE(old.ok()) << old.status();
  absl::StatusOr<std::unique_ptr<Launcher>> launcher = Create(Options(
      StackJson({ImuChannel("/test/imu"), ImuChannel("/test/gyro")},
                {ShellNode("n", "exit 0")})));
  ASSERT_FALSE(launcher.ok());
  EXPECT_THAT(launcher.status().message(), HasSubstr(kLauncherStatusChannel));
  EXPECT_FALSE(FileExists(shm::Channel::PathFor(root_.options(), "/test/imu")));
  EXPECT_FALSE(
      FileExists(shm::Channel::PathFor(root_.options(), "/test/gyro")));
  auto names = shm::Channel::List(root_.options());
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_EQ(*names, std::vector<std::string>{kLauncherStatusChannel});
  // Nor is the launcher's lock left: the next launch is not refused for it.
  EXPECT_FALSE(FileExists(root_.root() + "/test/.launcher"));
}

}  // namespace
}  // namespace tether::tools
