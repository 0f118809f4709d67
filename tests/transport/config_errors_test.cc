// Tests for transport/config.h: stack configs that must not load. Every
// validation error names its file, line, field path and a valid
// alternative; every problem is reported, not just the first; a missing
// top file is NotFound.
#include "transport/config.h"

#include <map>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/transport/config_test_util.h"

namespace tether::transport {
namespace {

using ::testing::HasSubstr;
using testing::Channel;
using testing::LoadFiles;
using testing::Node;
using testing::Stack;
using testing::TestDir;
using testing::TestTypes;

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

}  // namespace
}  // namespace tether::transport
