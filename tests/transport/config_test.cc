// Tests for transport/config.h: loading stack configs (JSON + includes),
// every validation error naming its file, field and a valid alternative,
// warnings, and QueueParams derivation.
#include "transport/config.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "capnp/compat/json.h"
#include "capnp/message.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/test_dir.h"

namespace tether::transport {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

KnownTypes TestTypes() {
  KnownTypes types;
  types.names = {"test.capnp:A", "test.capnp:B", "test.capnp:JointState"};
  types.ids = {0x9eb32e19f86ee174ull};
  return types;
}

// A fresh directory under TEST_TMPDIR for the running test.
fs::path TestDir() { return tether::testing::FreshTestDir(); }

void WriteFile(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

// Writes `files` (name -> JSON) into a fresh directory and loads
// "stack.json" from it.
absl::StatusOr<StackConfig> LoadFiles(
    const std::map<std::string, std::string>& files,
    const KnownTypes& types = TestTypes()) {
  const fs::path dir = TestDir();
  for (const auto& [name, text] : files) WriteFile(dir / name, text);
  return LoadStackConfig(dir / "stack.json", types);
}

// A valid channel; `extra` members replace the default "queueDepth": 4.
std::string Channel(const std::string& name, const std::string& extra = "") {
  return R"({"name": ")" + name +
         R"(", "type": "test.capnp:A", "maxSize": 64)" +
         (extra.empty() ? R"(, "queueDepth": 4)" : ", " + extra) + "}";
}

std::string Node(const std::string& name, const std::string& extra = "") {
  return R"({"name": ")" + name + R"(", "command": "/bin/true")" +
         (extra.empty() ? "" : ", " + extra) + "}";
}

std::string Stack(const std::vector<std::string>& channels,
                  const std::vector<std::string>& nodes = {},
                  const std::string& extra = "") {
  std::string out = R"({"channels": [)";
  for (size_t i = 0; i < channels.size(); ++i) {
    out += (i ? ",\n  " : "\n  ") + channels[i];
  }
  out += "\n],\n\"nodes\": [";
  for (size_t i = 0; i < nodes.size(); ++i) {
    out += (i ? ",\n  " : "\n  ") + nodes[i];
  }
  out += "\n]";
  if (!extra.empty()) out += ",\n" + extra;
  return out + "}\n";
}

// ---------------------------------------------------------------------------
// Bad configs: each must fail with InvalidArgument naming the file, the
// field path and what would be valid.

struct BadConfig {
  std::string name;
  std::map<std::string, std::string> files;  // "stack.json" is loaded
  std::vector<std::string> expected;         // substrings of the message
};

std::vector<BadConfig> BadConfigs() {
  const std::string a = Channel("/a");
  return {
      {"DuplicateChannel",
       {{"stack.json", Stack({a, Channel("/b"), Channel("/a")})}},
       {"stack.json:4: channels[2].name: \"/a\" is already declared in",
        "(channels[0]); channel names must be unique"}},
      {"DuplicateNode",
       {{"stack.json", Stack({a}, {Node("n"), Node("n")})}},
       {"nodes[1].name: \"n\" is already declared in",
        "(nodes[0]); node names must be unique"}},
      {"DuplicateAcrossIncludes",
       {{"stack.json", Stack({a}, {}, R"("includes": ["more/b.json"])")},
        {"more/b.json", Stack({Channel("/a")})}},
       // Included files merge first, so the including file's /a is the
       // second declaration.
       {"stack.json:2: channels[0].name: \"/a\" is already declared in",
        "more/b.json (channels[0])"}},
      {"BadChannelName",
       {{"stack.json", Stack({Channel("robot//x")})}},
       {"channels[0].name: \"robot//x\" is not a channel name",
        "like \"/robot/joint_state\""}},
      {"ChannelNameTooLongForAFile",
       {{"stack.json", Stack({Channel("/" + std::string(260, 'x'))})}},
       {"channels[0].name: channel name \"/xxxx", "is too long: its file "
        "name is 263 bytes ('/' is written %2F), at most 200 fit"}},
      {"UnknownType",
       {{"stack.json",
         Stack(
             {R"({"name": "/a", "type": "test.capnp:JointStat", "maxSize": 64, "queueDepth": 4})"})}},
       {"channels[0].type: \"test.capnp:JointStat\" is not a known message "
        "type; did you mean \"test.capnp:JointState\"?",
        "known types: \"test.capnp:A\""}},
      {"UnknownTypeId",
       {{"stack.json",
         Stack(
             {R"({"name": "/a", "type": "0x1234", "maxSize": 64, "queueDepth": 4})"})}},
       {"channels[0].type: type id 0x1234 is not a known message type"}},
      {"MaxSizeZero",
       {{"stack.json",
         Stack(
             {R"({"name": "/a", "type": "test.capnp:A", "queueDepth": 4})"})}},
       {"channels[0].maxSize: missing or 0; use 16..268435456 bytes"}},
      {"MaxSizeHuge",
       {{"stack.json",
         Stack(
             {R"({"name": "/a", "type": "test.capnp:A", "maxSize": 300000000, "queueDepth": 4})"})}},
       {"channels[0].maxSize: 300000000 is larger than the 256 MiB limit; "
        "use 16..268435456"}},
      {"QueueDepthNotPowerOfTwo",
       {{"stack.json", Stack({Channel("/a", R"("queueDepth": 100)")})}},
       {"channels[0].queueDepth: 100 is not a power of two; use 128"}},
      {"QueueDepthTooSmallForHistory",
       {{"stack.json",
         Stack({Channel(
             "/a",
             R"("frequencyHz": 1000, "historySeconds": 0.5, "queueDepth": 64)")})}},
       {"channels[0].queueDepth: 64 messages do not hold historySeconds = "
        "0.5 s at 1000 Hz (500 messages); use 512 or omit queueDepth"}},
      {"HistoryWithoutFrequency",
       {{"stack.json", Stack({Channel("/a", R"("historySeconds": 2)")})}},
       {"channels[0].historySeconds: needs frequencyHz",
        "or give queueDepth instead"}},
      {"NoDepthAtAll",
       {{"stack.json", Stack({Channel("/a", R"("frequencyHz": 100)")})}},
       {"channels[0].queueDepth: missing or 0; set queueDepth (a power of "
        "two in 2..1048576) or historySeconds"}},
      {"ZeroDepth",
       {{"stack.json", Stack({Channel("/a", R"("queueDepth": 0)")})}},
       {"channels[0].queueDepth: missing or 0; set queueDepth"}},
      {"TooManyPinned",
       {{"stack.json",
         Stack({Channel("/a", R"("queueDepth": 4, "maxPinned": 65)")})}},
       {"channels[0].maxPinned: 65 is too many; use 0..64"}},
      {"NoPublishers",
       {{"stack.json",
         Stack({Channel("/a", R"("queueDepth": 4, "maxPublishers": 0)")})}},
       {"channels[0].maxPublishers: 0 is out of range; use 1..1024"}},
      {"BadModeString",
       {{"stack.json",
         Stack({Channel("/a", R"("queueDepth": 4, "mode": "rw-rw----")")})}},
       {"channels[0].mode: \"rw-rw----\" is not a file mode; use an octal "
        "string",
        "\"0660\""}},
      {"ModeWithoutOwnerWrite",
       {{"stack.json",
         Stack({Channel("/a", R"("queueDepth": 4, "mode": "0440")")})}},
       {"channels[0].mode: \"0440\" does not let the owner read and write"}},
      {"UnknownChannelField",
       {{"stack.json", Stack({Channel("/a", R"("queueDepht": 4)")})}},
       {"stack.json:2: channels[0].queueDepht: unknown field; did you mean "
        "\"queueDepth\"?",
        "fields of Channel"}},
      {"UnknownTopLevelField",
       {{"stack.json", R"({"chanels": []})"}},
       {"stack.json:1: chanels: unknown field; did you mean \"channels\"?"}},
      {"UnknownNestedField",
       {{"stack.json",
         Stack({a},
               {Node("n", R"("scheduling": {"policy": "fifo", "prio": 5})")})}},
       {"nodes[0].scheduling.prio: unknown field; did you mean "
        "\"priority\"?"}},
      {"WrongJsonType",
       {{"stack.json",
         Stack(
             {R"({"name": "/a", "type": "test.capnp:A", "maxSize": "64", "queueDepth": 4})"})}},
       {"channels[0].maxSize: expected a whole number, got the string "
        "\"64\""}},
      // A value the field's type cannot hold is told the field's own
      // range, as the config's validation would word it.
      {"NumberOutOfRange",
       {{"stack.json", Stack({Channel("/a", R"("queueDepth": -4)")})}},
       {"channels[0].queueDepth: the number -4 is out of range; use a "
        "power of two in 2..1048576"}},
      {"NegativeMaxSize",
       {{"stack.json",
         Stack({R"({"name": "/a", "type": "test.capnp:A", "maxSize": -256, "queueDepth": 4})"})}},
       {"channels[0].maxSize: the number -256 is out of range; use "
        "16..268435456 bytes"}},
      // Printed as written, not rounded to six digits (4.29497e+09).
      {"HugeMaxSize",
       {{"stack.json",
         Stack({R"({"name": "/a", "type": "test.capnp:A", "maxSize": 4294967296, "queueDepth": 4})"})}},
       {"channels[0].maxSize: the number 4294967296 is out of range; use "
        "16..268435456 bytes"}},
      {"NegativePublishers",
       {{"stack.json",
         Stack({Channel("/a", R"("queueDepth": 4, "maxPublishers": -1)")})}},
       {"channels[0].maxPublishers: the number -1 is out of range; use "
        "1..1024"}},
      // A field without a range of its own keeps its type's.
      {"NodeFieldOutOfRange",
       {{"stack.json",
         Stack({a}, {Node("n", R"("restart": {"backoffMs": -5})")})}},
       {"nodes[0].restart.backoffMs: the number -5 is out of range; use "
        "0..4294967295"}},
      {"CutShortFile",
       {{"stack.json", R"({"channels": [])"}},
       {"stack.json:1:", "unexpected end of file; expected"}},
      {"NullValue",
       {{"stack.json",
         Stack({Channel("/a", R"("queueDepth": 4, "group": null)")})}},
       {"channels[0].group: null is not a value here"}},
      {"DuplicateJsonKey",
       {{"stack.json",
         Stack({Channel("/a", R"("queueDepth": 4, "queueDepth": 8)")})}},
       {"channels[0].queueDepth: given twice"}},
      {"BadEnumName",
       {{"stack.json",
         Stack({a},
               {Node("n",
                     R"("scheduling": {"policy": "FIFO", "priority": 5})")})}},
       {"nodes[0].scheduling.policy: \"FIFO\" is not valid; use one of "
        "\"fifo\", \"other\", \"rr\""}},
      {"MalformedJson",
       {{"stack.json",
         "{\n  \"channels\": [\n    {\"name\": \"/a\",}\n  ]\n}\n"}},
       {"stack.json:3:19: malformed JSON: unexpected '}'; expected a quoted "
        "member name"}},
      {"EmptyFile",
       {{"stack.json", "  \n"}},
       {"stack.json:2:1: malformed JSON: the file is empty"}},
      {"MissingInclude",
       {{"stack.json", Stack({a}, {}, R"("includes": ["missing.json"])")}},
       {"includes[0]: cannot read \"missing.json\"",
        "No such file or directory; include paths are relative to this "
        "file"}},
      {"IncludeCycle",
       {{"stack.json", Stack({a}, {}, R"("includes": ["b.json"])")},
        {"b.json", R"({"includes": ["stack.json"]})"}},
       {"b.json:1: includes[0]: include cycle: ", "stack.json -> ",
        "b.json -> ", "; remove one of these includes"}},
      {"StartAfterUnknownNode",
       {{"stack.json",
         Stack({a}, {Node("estimator"),
                     Node("controller", R"("startAfter": ["estimtor"])")})}},
       {"nodes[1].startAfter[0]: no node named \"estimtor\"; did you mean "
        "\"estimator\"?"}},
      {"StartAfterCycle",
       {{"stack.json", Stack({a}, {Node("a", R"("startAfter": ["b"])"),
                                   Node("b", R"("startAfter": ["c"])"),
                                   Node("c", R"("startAfter": ["a"])")})}},
       {"startAfter[0]: start-after cycle: a -> b -> c -> a; remove one of "
        "these dependencies"}},
      {"FifoPriorityZero",
       {{"stack.json",
         Stack({a}, {Node("n", R"("scheduling": {"policy": "fifo"})")})}},
       {"nodes[0].scheduling.priority: 0 is not a valid fifo priority; use "
        "1..99"}},
      {"RrPriorityTooHigh",
       {{"stack.json",
         Stack({a},
               {Node("n",
                     R"("scheduling": {"policy": "rr", "priority": 120})")})}},
       {"nodes[0].scheduling.priority: 120 is not a valid rr priority; use "
        "1..99"}},
      {"PriorityWithOther",
       {{"stack.json",
         Stack({a}, {Node("n", R"("scheduling": {"priority": 50})")})}},
       {"nodes[0].scheduling.priority: 50 needs a real-time policy"}},
      {"EmptyCommand",
       {{"stack.json", Stack({a}, {R"({"name": "n", "command": "  "})"})}},
       {"nodes[0].command: empty; set the program to run"}},
      {"NegativeCpu",
       {{"stack.json", Stack({a}, {Node("n", R"("cpus": [0, -1])")})}},
       {"nodes[0].cpus[1]: -1 is not a CPU id; use 0..1023"}},
      {"WritesUnknownChannel",
       {{"stack.json", Stack({a}, {Node("n", R"("writes": ["/b"])")})}},
       {"nodes[0].writes[0]: no channel named \"/b\"",
        "declare it under \"channels\""}},
      {"MoreWritersThanPublishers",
       {{"stack.json", Stack({a}, {Node("n1", R"("writes": ["/a"])"),
                                   Node("n2", R"("writes": ["/a"])")})}},
       {"channels[0].maxPublishers: 1 is fewer than the 2 nodes that write "
        "\"/a\" (n1, n2); use at least 2"}},
      {"BadEnvName",
       {{"stack.json",
         Stack({a}, {Node("n", R"("env": [{"name": "A=B", "value": "x"}])")})}},
       {"nodes[0].env[0].name: \"A=B\" is not an environment variable name"}},
  };
}

void PrintTo(const BadConfig& c, std::ostream* os) { *os << c.name; }

class BadConfigTest : public ::testing::TestWithParam<BadConfig> {};

TEST_P(BadConfigTest, FailsNamingTheFieldAndWhatIsValid) {
  const BadConfig& c = GetParam();
  absl::StatusOr<StackConfig> config = LoadFiles(c.files);
  ASSERT_FALSE(config.ok()) << c.name << " loaded";
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  for (const std::string& expected : c.expected) {
    EXPECT_THAT(std::string(config.status().message()), HasSubstr(expected));
  }
}

INSTANTIATE_TEST_SUITE_P(StackConfig, BadConfigTest,
                         ::testing::ValuesIn(BadConfigs()),
                         [](const ::testing::TestParamInfo<BadConfig>& info) {
                           return info.param.name;
                         });

TEST(LoadStackConfig, TheBadConfigTableIsLargeAndDistinct) {
  std::vector<BadConfig> configs = BadConfigs();
  EXPECT_GE(configs.size(), 20u);
  std::set<std::string> texts;
  for (const BadConfig& c : configs) texts.insert(c.expected.front());
  EXPECT_EQ(texts.size(), configs.size());
}

TEST(LoadStackConfig, ReportsEveryProblemNotJustTheFirst) {
  absl::StatusOr<StackConfig> config =
      LoadFiles({{"stack.json",
                  Stack({Channel("/a", R"("queueDepth": 3)"),
                         Channel("/b", R"("queueDepth": 4, "maxPinned": 99)")},
                        {Node("n", R"("cpus": [-2])")})}});
  ASSERT_FALSE(config.ok());
  const std::string message(config.status().message());
  EXPECT_THAT(message, HasSubstr("channels[0].queueDepth: 3 is not a power"));
  EXPECT_THAT(message, HasSubstr("channels[1].maxPinned: 99"));
  EXPECT_THAT(message, HasSubstr("nodes[0].cpus[0]: -2"));
}

TEST(LoadStackConfig, MissingTopFileIsNotFound) {
  absl::StatusOr<StackConfig> config =
      LoadStackConfig(TestDir() / "nope.json", TestTypes());
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(config.status().message()),
              HasSubstr("nope.json: No such file or directory"));
}

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

TEST(LoadStackConfig, ErrorsInIncludedFilesNameThatFileAndLine) {
  absl::StatusOr<StackConfig> config = LoadFiles({
      {"stack.json", Stack({Channel("/a")}, {}, R"("includes": ["inc.json"])")},
      {"inc.json",
       Stack({Channel("/b", R"("queueDepth": 4, "maxPinned": 70)")})},
  });
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(std::string(config.status().message()),
              HasSubstr("inc.json:2: channels[0].maxPinned: 70 is too many"));
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
