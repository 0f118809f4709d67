#include "ros_bridge/ros1msg/definition.h"

#include <gtest/gtest.h>

#include "ros_bridge/ros1msg/typed.h"

namespace tether::ros1msg {
namespace {

constexpr char kSep[] =
    "================================================================================\n";

TEST(MessageDefinition, ParsesFieldsArraysAndNestedTypesWithBareNames) {
  const std::string text = std::string(
      "# a comment line\n"
      "Header header   # trailing comment\n"
      "Point[] points\n"
      "float64[9] covariance\n"
      "uint8[] data\n"
      "char c\n"
      "byte b\n"
      "time t\n"
      "duration d\n") + kSep +
      "MSG: std_msgs/Header\nuint32 seq\ntime stamp\nstring frame_id\n" +
      kSep + "MSG: acme_msgs/Point\nfloat64 x\nfloat64 y\n";
  auto def = MessageDefinition::Parse("acme_msgs/Cloud", text);
  ASSERT_TRUE(def.ok()) << def.status();
  const MessageSpec& root = (*def)->root();
  EXPECT_EQ(root.full_name, "acme_msgs/Cloud");
  ASSERT_EQ(root.fields.size(), 8u);
  EXPECT_EQ(root.fields[0].message, (*def)->Find("std_msgs/Header"));
  EXPECT_EQ(root.fields[1].message, (*def)->Find("acme_msgs/Point"));
  EXPECT_TRUE(root.fields[1].is_array);
  EXPECT_EQ(root.fields[1].array_length, -1);
  EXPECT_EQ(root.fields[2].type, Primitive::kFloat64);
  EXPECT_EQ(root.fields[2].array_length, 9);
  EXPECT_EQ(root.fields[3].type, Primitive::kUInt8);
  EXPECT_EQ(root.fields[4].type, Primitive::kUInt8);  // char
  EXPECT_EQ(root.fields[5].type, Primitive::kInt8);   // byte
  EXPECT_EQ(root.fields[6].type, Primitive::kTime);
  EXPECT_EQ(root.fields[7].type, Primitive::kDuration);
}

TEST(MessageDefinition, ConstantsAreNotFieldsAndStringConstantsKeepHashes) {
  auto def = MessageDefinition::Parse(
      "acme_msgs/Mode",
      "uint8 IDLE=0\nuint8 RUN = 1 # running\nstring NAME=a # not a comment\n"
      "uint8 mode\n");
  ASSERT_TRUE(def.ok()) << def.status();
  const MessageSpec& root = (*def)->root();
  ASSERT_EQ(root.fields.size(), 1u);
  ASSERT_EQ(root.constants.size(), 3u);
  EXPECT_EQ(root.constants[1].value, "1");
  EXPECT_EQ(root.constants[2].value, "a # not a comment");
}

TEST(MessageDefinition, MissingNestedTypeIsAnErrorNamingIt) {
  auto def = MessageDefinition::Parse("acme_msgs/A", "acme_msgs/B b\n");
  ASSERT_FALSE(def.ok());
  EXPECT_NE(def.status().message().find("acme_msgs/B"), std::string::npos)
      << def.status();
}

TEST(MessageDefinition, MalformedLinesAreErrorsWithTheLineNumber) {
  auto def = MessageDefinition::Parse("acme_msgs/A", "int32 a\nint32\n");
  ASSERT_FALSE(def.ok());
  EXPECT_NE(def.status().message().find("line 2"), std::string::npos)
      << def.status();
  EXPECT_FALSE(MessageDefinition::Parse("acme_msgs/A", "int32[x] a\n").ok());
  EXPECT_FALSE(MessageDefinition::Parse("acme_msgs/A", "int32 9a\n").ok());
  EXPECT_FALSE(MessageDefinition::Parse("NoPackage", "int32 a\n").ok());
  EXPECT_FALSE(MessageDefinition::Parse(
                   "acme_msgs/A", std::string("int32 a\n") + kSep + "oops\n")
                   .ok());
}

TEST(MessageDefinition, SelfContainingTypeIsRejected) {
  auto def = MessageDefinition::Parse(
      "acme_msgs/A", std::string("B b\n") + kSep + "MSG: acme_msgs/B\nA a\n" +
                         kSep + "MSG: acme_msgs/A\nB b\n");
  EXPECT_FALSE(def.ok());
}

TEST(MessageDefinition, EveryBuiltInCommonDefinitionParses) {
  ASSERT_GE(CommonTypes().size(), 25u);
  for (const CommonType& t : CommonTypes()) {
    ASSERT_NE(t.parsed, nullptr) << t.ros_type;
    EXPECT_EQ(t.parsed->root().full_name, t.ros_type);
    EXPECT_FALSE(t.parsed->root().fields.empty()) << t.ros_type;
  }
  const CommonType* image = FindCommonType("sensor_msgs/Image");
  ASSERT_NE(image, nullptr);
  EXPECT_EQ(image->parsed->root().fields.size(), 7u);
}

}  // namespace
}  // namespace tether::ros1msg
