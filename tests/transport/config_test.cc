// Tests for transport/config.h: loading valid stack configs (JSON +
// includes, schema files), every field decoded, warnings, QueueParams
// derivation, and the example stack. Configs that must fail are in
// config_errors_test.cc.
#include "transport/config.h"

#include <filesystem>
#include <string>
#include <vector>

#include "capnp/compat/json.h"
#include "capnp/message.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shm/queue_params.h"
#include "tests/transport/config_test_util.h"

namespace tether::transport {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;
using testing::Channel;
using testing::LoadFiles;
using testing::Node;
using testing::Stack;
using testing::TestDir;
using testing::TestTypes;
using testing::WriteFile;

// ---------------------------------------------------------------------------
// Valid configs.

const char kValidStack[] = R"({
  "channels": [
    {"name": "/robot/joint_state", "type": "test.capnp:JointState",
     "maxSize": 1000, "frequencyHz": 1000, "historySeconds": 0.5},
    {"name": "/robot/command", "type": "0x9eb32e19f86ee174", "maxSize": 64,
     "queueDepth": 8, "maxPublishers": 2, "maxPinned": 3, "mode": "0640",
     "group": "robot"}
  ],
  "nodes": [
    {"name": "driver", "command": "/usr/bin/driver", "args": ["-v", "--x=1"],
     "scheduling": {"policy": "fifo", "priority": 80, "realtime": "required"},
     "cpus": [2, 3], "user": "robot",
     "restart": {"policy": "onFailure", "backoffMs": 100, "maxBackoffMs": 800,
                 "maxRestarts": 4},
     "env": [{"name": "LOG", "value": "debug"}],
     "writes": ["/robot/joint_state"], "reads": ["/robot/command"]},
    {"name": "controller", "command": "ctl", "startAfter": ["driver"],
     "scheduling": {"policy": "other", "nice": -5},
     "reads": ["/robot/joint_state"], "writes": ["/robot/command"]}
  ]
}
)";

void ExpectValidStack(const StackConfig& config) {
  ASSERT_THAT(config.channels(), SizeIs(2));
  ASSERT_THAT(config.nodes(), SizeIs(2));
  config::Channel::Reader state = config.channels()[0];
  EXPECT_EQ(state.getName(), "/robot/joint_state");
  EXPECT_EQ(state.getType(), "test.capnp:JointState");
  EXPECT_EQ(state.getMaxSize(), 1000u);
  EXPECT_EQ(state.getQueueDepth(), 512u);   // ceil(1000 * 0.5) -> 512
  EXPECT_EQ(state.getMaxPublishers(), 1u);  // defaults
  EXPECT_EQ(state.getMaxPinned(), 8u);
  EXPECT_EQ(state.getMode(), "0660");
  config::Channel::Reader command = config.channels()[1];
  EXPECT_EQ(command.getType(), "0x9eb32e19f86ee174");
  EXPECT_EQ(command.getQueueDepth(), 8u);
  EXPECT_EQ(command.getMaxPublishers(), 2u);
  EXPECT_EQ(command.getMaxPinned(), 3u);
  EXPECT_EQ(command.getMode(), "0640");
  EXPECT_EQ(command.getGroup(), "robot");

  config::Node::Reader driver = config.nodes()[0];
  EXPECT_EQ(driver.getName(), "driver");
  EXPECT_EQ(driver.getCommand(), "/usr/bin/driver");
  ASSERT_THAT(driver.getArgs(), SizeIs(2));
  EXPECT_EQ(driver.getArgs()[1], "--x=1");
  EXPECT_EQ(driver.getScheduling().getPolicy(), config::Policy::FIFO);
  EXPECT_EQ(driver.getScheduling().getPriority(), 80);
  EXPECT_EQ(driver.getScheduling().getRealtime(), config::Realtime::REQUIRED);
  ASSERT_THAT(driver.getCpus(), SizeIs(2));
  EXPECT_EQ(driver.getCpus()[1], 3);
  EXPECT_EQ(driver.getUser(), "robot");
  EXPECT_EQ(driver.getRestart().getPolicy(), config::RestartPolicy::ON_FAILURE);
  EXPECT_EQ(driver.getRestart().getBackoffMs(), 100u);
  EXPECT_EQ(driver.getRestart().getMaxBackoffMs(), 800u);
  EXPECT_EQ(driver.getRestart().getMaxRestarts(), 4u);
  ASSERT_THAT(driver.getEnv(), SizeIs(1));
  EXPECT_EQ(driver.getEnv()[0].getValue(), "debug");
  config::Node::Reader controller = config.nodes()[1];
  EXPECT_EQ(controller.getScheduling().getPolicy(), config::Policy::OTHER);
  EXPECT_EQ(controller.getScheduling().getNice(), -5);
  EXPECT_EQ(controller.getScheduling().getRealtime(),
            config::Realtime::BEST_EFFORT);
  EXPECT_EQ(controller.getRestart().getPolicy(), config::RestartPolicy::NEVER);
  EXPECT_EQ(controller.getRestart().getBackoffMs(), 500u);
  ASSERT_THAT(controller.getStartAfter(), SizeIs(1));
  EXPECT_EQ(controller.getStartAfter()[0], "driver");
  EXPECT_THAT(config.warnings(), IsEmpty());
}

TEST(LoadStackConfig, ValidConfigDecodesEveryField) {
  absl::StatusOr<StackConfig> config = LoadFiles({{"stack.json", kValidStack}});
  ASSERT_TRUE(config.ok()) << config.status();
  ExpectValidStack(*config);
  EXPECT_EQ(config->channel_origin(1).index, 1u);
  EXPECT_THAT(config->channel_origin(1).file, HasSubstr("stack.json"));
  ASSERT_TRUE(config->FindChannel("/robot/command").has_value());
  EXPECT_EQ(config->FindChannel("/robot/command")->getQueueDepth(), 8u);
  EXPECT_FALSE(config->FindChannel("/robot/nope").has_value());
  ASSERT_TRUE(config->FindNode("controller").has_value());
  EXPECT_FALSE(config->FindNode("ctl").has_value());
}

TEST(LoadStackConfig, LoadedConfigRoundTripsThroughJson) {
  absl::StatusOr<StackConfig> config = LoadFiles({{"stack.json", kValidStack}});
  ASSERT_TRUE(config.ok()) << config.status();
  capnp::JsonCodec codec;
  codec.setPrettyPrint(true);
  const std::string json = codec.encode(config->stack()).cStr();

  const fs::path again = TestDir() / "again.json";
  WriteFile(again, json);
  absl::StatusOr<StackConfig> reloaded = LoadStackConfig(again, TestTypes());
  ASSERT_TRUE(reloaded.ok()) << reloaded.status() << "\n" << json;
  ExpectValidStack(*reloaded);
  EXPECT_EQ(std::string(codec.encode(reloaded->stack()).cStr()), json);
}

TEST(LoadStackConfig, IncludesMergeOnceEachRelativeToTheIncludingFile) {
  // stack.json includes sub/b.json and c.json; sub/b.json includes ../c.json
  // too (a diamond, not a cycle): c.json is merged once.
  absl::StatusOr<StackConfig> config = LoadFiles({
      {"stack.json",
       Stack({Channel("/top")}, {Node("top", R"("reads": ["/c"])")},
             R"("includes": ["sub/b.json", "c.json"])")},
      {"sub/b.json", Stack({Channel("/b")}, {Node("b", R"("writes": ["/c"])")},
                           R"("includes": ["../c.json"])")},
      {"c.json", Stack({Channel("/c")})},
  });
  ASSERT_TRUE(config.ok()) << config.status();
  std::vector<std::string> names;
  for (auto channel : config->channels()) names.emplace_back(channel.getName());
  // Included files first (depth first), then the including file's own.
  EXPECT_THAT(names, ElementsAre("/c", "/b", "/top"));
  EXPECT_THAT(config->channel_origin(0).file, HasSubstr("c.json"));
  EXPECT_THAT(config->channel_origin(1).file, HasSubstr("sub/b.json"));
  EXPECT_THAT(config->node_origin(0).file, HasSubstr("sub/b.json"));
  EXPECT_EQ(config->stack().getIncludes().size(), 0u);
  EXPECT_THAT(config->warnings(), IsEmpty());
}

TEST(LoadStackConfig, SchemaFilesAreRelativeToTheFileNamingThemAndListedOnce) {
  const fs::path dir = TestDir();
  WriteFile(dir / "stack.json",
            Stack({Channel("/top")}, {},
                  R"("includes": ["sub/b.json"],
"schemas": ["msgs/top.capnp", "sub/../shared.capnp"])"));
  WriteFile(dir / "sub/b.json",
            Stack({Channel("/b")}, {},
                  R"("schemas": ["b.capnp", "../shared.capnp"])"));
  absl::StatusOr<std::vector<StackSchemaFile>> files =
      ListStackSchemaFiles(dir / "stack.json");
  ASSERT_TRUE(files.ok()) << files.status();
  std::vector<std::string> paths;
  for (const StackSchemaFile& f : *files) paths.push_back(f.path.string());
  // Included files' first; shared.capnp (named by both) once.
  EXPECT_THAT(paths, ElementsAre((dir / "sub/b.capnp").string(),
                                 (dir / "shared.capnp").string(),
                                 (dir / "msgs/top.capnp").string()));
  EXPECT_THAT((*files)[0].origin, HasSubstr("sub/b.json:6: schemas[0]"));
  EXPECT_THAT((*files)[2].origin, HasSubstr("stack.json:7: schemas[0]"));

  // The loaded stack carries the same list; the files need not exist for
  // loading (they are parsed by whoever needs the types).
  absl::StatusOr<StackConfig> config =
      LoadStackConfig(dir / "stack.json", TestTypes());
  ASSERT_TRUE(config.ok()) << config.status();
  std::vector<std::string> merged;
  for (auto s : config->stack().getSchemas()) merged.emplace_back(s.cStr());
  EXPECT_EQ(merged, paths);
}

TEST(ListStackSchemaFiles, ReportsUnreadableOrMalformedStacksAsLoadingWould) {
  const fs::path dir = TestDir();
  EXPECT_TRUE(absl::IsNotFound(
      ListStackSchemaFiles(dir / "missing.json").status()));
  WriteFile(dir / "stack.json", "{\"schemas\": [\"a.capnp\",]}");
  EXPECT_TRUE(absl::IsInvalidArgument(
      ListStackSchemaFiles(dir / "stack.json").status()));
  WriteFile(dir / "stack.json", R"({"schemas": [""], "channels": []})");
  absl::StatusOr<std::vector<StackSchemaFile>> empty =
      ListStackSchemaFiles(dir / "stack.json");
  ASSERT_FALSE(empty.ok());
  EXPECT_THAT(std::string(empty.status().message()),
              HasSubstr("schemas[0]: empty path"));
  // Problems the loader finds later (an unknown type) do not hide them.
  WriteFile(dir / "stack.json",
            R"({"schemas": ["x.capnp"], "channels": [{"name": "/a",
                "type": "nowhere.capnp:X", "maxSize": 64, "queueDepth": 4}]})");
  absl::StatusOr<std::vector<StackSchemaFile>> listed =
      ListStackSchemaFiles(dir / "stack.json");
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_THAT(*listed, SizeIs(1));
}

TEST(LoadStackConfig, ReadingAChannelNobodyWritesIsAWarning) {
  absl::StatusOr<StackConfig> config = LoadFiles(
      {{"stack.json", Stack({Channel("/a"), Channel("/b")},
                            {Node("w", R"("writes": ["/a"])"),
                             Node("r", R"("reads": ["/a", "/b"])")})}});
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_THAT(config->warnings(), SizeIs(1));
  EXPECT_THAT(config->warnings()[0],
              HasSubstr("stack.json:7: nodes[1].reads[1]: no node writes "
                        "\"/b\""));
}

// ---------------------------------------------------------------------------
// QueueParams.

class ChannelMessage {
 public:
  config::Channel::Builder channel() {
    return message_.getRoot<config::Channel>();
  }

 private:
  capnp::MallocMessageBuilder message_;
};

TEST(QueueParamsFor, RoundsSlotsToWordsAndDepthsToPowersOfTwo) {
  ChannelMessage m;
  auto channel = m.channel();
  channel.setName("/a");
  channel.setMaxSize(100);
  channel.setFrequencyHz(100);
  channel.setHistorySeconds(0.1);  // 10 messages -> 16
  channel.setMaxPublishers(3);
  channel.setMaxPinned(5);
  absl::StatusOr<shm::QueueParams> params = QueueParamsFor(channel.asReader());
  ASSERT_TRUE(params.ok()) << params.status();
  EXPECT_EQ(params->slot_size, 104u);
  EXPECT_EQ(params->queue_depth, 16u);
  EXPECT_EQ(params->max_publishers, 3u);
  EXPECT_EQ(params->max_pinned, 5u);
  EXPECT_TRUE(shm::Validate(*params).ok());

  channel.setMaxSize(64);
  channel.setFrequencyHz(1);
  channel.setHistorySeconds(0.5);  // 1 message -> the minimum of 2
  params = QueueParamsFor(channel.asReader());
  ASSERT_TRUE(params.ok()) << params.status();
  EXPECT_EQ(params->slot_size, 64u);
  EXPECT_EQ(params->queue_depth, 2u);

  channel.setFrequencyHz(1000);
  channel.setHistorySeconds(0.5);  // 500 -> 512
  EXPECT_EQ(QueueDepthFor(channel.asReader()).value(), 512u);
  channel.setQueueDepth(1024);  // explicit and large enough
  EXPECT_EQ(QueueDepthFor(channel.asReader()).value(), 1024u);
}

TEST(QueueParamsFor, InvalidChannelsAreErrorsNamingTheChannel) {
  ChannelMessage m;
  auto channel = m.channel();
  channel.setName("/bad");
  channel.setMaxSize(64);
  channel.setQueueDepth(6);
  absl::StatusOr<shm::QueueParams> params = QueueParamsFor(channel.asReader());
  ASSERT_FALSE(params.ok());
  EXPECT_THAT(std::string(params.status().message()),
              HasSubstr("channel \"/bad\": queueDepth: 6 is not a power of "
                        "two; use 8"));

  channel.setQueueDepth(8);
  channel.setMaxSize(0);
  params = QueueParamsFor(channel.asReader());
  ASSERT_FALSE(params.ok());
  EXPECT_THAT(std::string(params.status().message()), HasSubstr("maxSize"));

  channel.setMaxSize(64);
  channel.setMaxPinned(65);  // caught by shm::Validate
  params = QueueParamsFor(channel.asReader());
  ASSERT_FALSE(params.ok());
  EXPECT_THAT(std::string(params.status().message()),
              HasSubstr("channel \"/bad\": max_pinned 65"));
}

TEST(QueueParamsFor, EveryLoadedChannelHasValidParams) {
  absl::StatusOr<StackConfig> config = LoadFiles({{"stack.json", kValidStack}});
  ASSERT_TRUE(config.ok()) << config.status();
  for (auto channel : config->channels()) {
    absl::StatusOr<shm::QueueParams> params = QueueParamsFor(channel);
    ASSERT_TRUE(params.ok()) << params.status();
    EXPECT_EQ(params->queue_depth, channel.getQueueDepth());
  }
  EXPECT_EQ(QueueParamsFor(config->channels()[0])->slot_size, 1000u);
}

// ---------------------------------------------------------------------------
// The example stack used by the demo and later work.

TEST(ExampleStack, LoadsWithoutErrorsOrWarnings) {
  KnownTypes types;
  types.names = {
      "examples/demo.capnp:ImuSample", "examples/demo.capnp:JointState",
      "examples/demo.capnp:StateEstimate", "examples/demo.capnp:JointCommand",
      "examples/demo.capnp:MonitorStatus",
      "examples/demo.capnp:VelocityCommand"};
  absl::StatusOr<StackConfig> config =
      LoadStackConfig("examples/config/example_stack.json", types);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(config->warnings(), IsEmpty());
  EXPECT_THAT(config->channels(), SizeIs(7));
  EXPECT_THAT(config->nodes(), SizeIs(5));
  auto controller = config->FindNode("controller");
  ASSERT_TRUE(controller.has_value());
  EXPECT_EQ(controller->getScheduling().getPolicy(), config::Policy::FIFO);
  EXPECT_EQ(controller->getScheduling().getPriority(), 90);
  auto imu = config->FindChannel("/robot/imu");
  ASSERT_TRUE(imu.has_value());
  EXPECT_EQ(imu->getQueueDepth(), 512u);  // 1 kHz x 0.5 s
  for (auto channel : config->channels()) {
    EXPECT_TRUE(QueueParamsFor(channel).ok()) << channel.getName().cStr();
  }
  // Without the demo's types the same file fails, naming the channel type.
  absl::StatusOr<StackConfig> untyped =
      LoadStackConfig("examples/config/example_stack.json", TestTypes());
  ASSERT_FALSE(untyped.ok());
  EXPECT_THAT(std::string(untyped.status().message()),
              HasSubstr("channels[0].type: \"examples/demo.capnp:ImuSample\""));
}

}  // namespace
}  // namespace tether::transport
