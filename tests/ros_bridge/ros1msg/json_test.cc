#include "ros_bridge/ros1msg/json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "ros_bridge/ros1msg/typed.h"

namespace tether::ros1msg {
namespace {

class Bytes {
 public:
  template <typename T>
  Bytes& Put(T v) {
    const size_t at = b_.size();
    b_.resize(at + sizeof(T));
    std::memcpy(b_.data() + at, &v, sizeof(T));
    return *this;
  }
  Bytes& Str(const std::string& s) {
    Put<uint32_t>(static_cast<uint32_t>(s.size()));
    b_.insert(b_.end(), s.begin(), s.end());
    return *this;
  }
  const std::vector<uint8_t>& bytes() const { return b_; }

 private:
  std::vector<uint8_t> b_;
};

std::unique_ptr<MessageDefinition> Def(const std::string& type,
                                       const std::string& text) {
  auto d = MessageDefinition::Parse(type, text);
  EXPECT_TRUE(d.ok()) << d.status();
  return std::move(*d);
}

TEST(RosJson, DecodesTwistFromItsBuiltInDefinition) {
  Bytes b;
  for (double v : {1.0, 0.0, -0.0, 0.25, 1e-300, 0.5}) b.Put(v);
  const CommonType* twist = FindCommonType("geometry_msgs/Twist");
  ASSERT_NE(twist, nullptr);
  auto json = MessageToJson(*twist->parsed, b.bytes());
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(*json,
            "{\"linear\":{\"x\":1,\"y\":0,\"z\":-0},"
            "\"angular\":{\"x\":0.25,\"y\":1e-300,\"z\":0.5}}");
}

TEST(RosJson, StringsTimesArraysAndExtremeIntegers) {
  auto def = Def("acme_msgs/All",
                 "string s\ntime t\nduration d\nint64 big\nuint64 ubig\n"
                 "int8[] small\nfloat32[2] f\nbool ok\n");
  Bytes b;
  b.Str("q\"\\\n\x01");
  b.Put<uint32_t>(1700000000).Put<uint32_t>(5);
  b.Put<int32_t>(-3).Put<int32_t>(-7);
  b.Put(std::numeric_limits<int64_t>::min());
  b.Put(std::numeric_limits<uint64_t>::max());
  b.Put<uint32_t>(2).Put<int8_t>(-1).Put<int8_t>(127);
  b.Put(std::numeric_limits<float>::quiet_NaN()).Put(-INFINITY);
  b.Put<uint8_t>(1);
  auto json = MessageToJson(*def, b.bytes());
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(*json,
            "{\"s\":\"q\\\"\\\\\\n\\u0001\","
            "\"t\":{\"secs\":1700000000,\"nsecs\":5},"
            "\"d\":{\"secs\":-3,\"nsecs\":-7},"
            "\"big\":-9223372036854775808,\"ubig\":18446744073709551615,"
            "\"small\":[-1,127],\"f\":[\"NaN\",\"-Infinity\"],\"ok\":true}");
}

TEST(RosJson, NonUtf8StringBytesAreEscapedAndUtf8IsKept) {
  auto def = Def("acme_msgs/S", "string a\nstring b\n");
  Bytes b;
  b.Str("caf\xc3\xa9").Str("\xff\xfe");
  auto json = MessageToJson(*def, b.bytes());
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(*json, "{\"a\":\"caf\xc3\xa9\",\"b\":\"\\u00ff\\u00fe\"}");
}

TEST(RosJson, TruncatedDataIsAnErrorNamingTheField) {
  auto def = Def("acme_msgs/P", "float64 x\nfloat64 y\n");
  Bytes b;
  b.Put(1.0).Put<uint32_t>(0);
  auto json = MessageToJson(*def, b.bytes());
  ASSERT_FALSE(json.ok());
  EXPECT_NE(json.status().message().find("field y"), std::string::npos)
      << json.status();
}

TEST(RosJson, LeftOverBytesMeanTheDefinitionDoesNotMatch) {
  auto def = Def("acme_msgs/P", "float64 x\n");
  Bytes b;
  b.Put(1.0).Put<uint8_t>(0);
  auto json = MessageToJson(*def, b.bytes());
  ASSERT_FALSE(json.ok());
  EXPECT_NE(json.status().message().find("left over"), std::string::npos);
}

TEST(RosJson, HugeArrayCountIsRejectedWithoutAllocating) {
  auto def = Def("acme_msgs/A", "float64[] v\nstring[] s\n");
  Bytes b;
  b.Put<uint32_t>(0xFFFFFFFFu).Put(1.0);
  auto json = MessageToJson(*def, b.bytes());
  ASSERT_FALSE(json.ok());
  EXPECT_NE(json.status().message().find("claims 4294967295"),
            std::string::npos)
      << json.status();
  Bytes c;
  c.Put<uint32_t>(0).Put<uint32_t>(1).Put<uint32_t>(0x7FFFFFFF);
  EXPECT_FALSE(MessageToJson(*def, c.bytes()).ok());
}

TEST(RosJson, RandomBytesNeverCrashTheDecoder) {
  const CommonType* imu = FindCommonType("sensor_msgs/Imu");
  const CommonType* joints = FindCommonType("sensor_msgs/JointState");
  uint32_t x = 12345;
  for (int round = 0; round < 2000; ++round) {
    std::vector<uint8_t> data(round % 400);
    for (uint8_t& v : data) {
      x = x * 1103515245 + 12345;
      v = static_cast<uint8_t>(x >> 16);
      if ((x >> 8) % 5 == 0) v = 0;  // small counts now and then
    }
    (void)MessageToJson(*imu->parsed, data);
    (void)MessageToJson(*joints->parsed, data);
  }
}

}  // namespace
}  // namespace tether::ros1msg
