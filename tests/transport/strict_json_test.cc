#include "transport/strict_json.h"

#include <string>

#include "capnp/message.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/transport/framing_test.capnp.h"

namespace tether::transport {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// The error text of decoding `text` as a Sample ("" if it decoded).
std::string Problems(const std::string& text, capnp::MallocMessageBuilder& m) {
  absl::Status s = DecodeStrictJson(text, "cfg.json",
                                    capnp::toDynamic(m.initRoot<Sample>()));
  if (!s.ok()) EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  return std::string(s.message());
}

TEST(StrictJson, DecodesAValidFile) {
  capnp::MallocMessageBuilder m;
  EXPECT_EQ(Problems(R"({"stamp": 7, "inner": {"name": "elbow"}})", m), "");
  Sample::Reader s = m.getRoot<Sample>().asReader();
  EXPECT_EQ(s.getStamp(), 7u);
  EXPECT_EQ(s.getInner().getName(), "elbow");
}

TEST(StrictJson, UnknownFieldIsNamedWithItsLineAndTheValidNames) {
  capnp::MallocMessageBuilder m;
  const std::string p =
      Problems("{\"stamp\": 1,\n \"joints\": [\n  {\"nme\": \"a\"}]}", m);
  EXPECT_THAT(p, HasSubstr("cfg.json:3: joints[0].nme: unknown field; did "
                           "you mean \"name\"?"));
  EXPECT_THAT(p, HasSubstr("name, position, velocity"));
}

TEST(StrictJson, EveryProblemIsListedOnItsOwnLine) {
  capnp::MallocMessageBuilder m;
  const std::string p = Problems(
      "{\"stamp\": \"soon\",\n \"lable\": \"x\",\n \"values\": 1}", m);
  EXPECT_THAT(p, HasSubstr("cfg.json:1: stamp: expected a whole number"));
  EXPECT_THAT(p, HasSubstr("\ncfg.json:2: lable: unknown field; did you mean "
                           "\"label\"?"));
  EXPECT_THAT(p, HasSubstr("\ncfg.json:3: values: expected an array"));
}

TEST(StrictJson, MalformedJsonSaysWhere) {
  capnp::MallocMessageBuilder m;
  const std::string p = Problems("{\"stamp\": 1,\n  \"label\" \"x\"}", m);
  EXPECT_THAT(p, HasSubstr("cfg.json:2:"));
  EXPECT_THAT(p, HasSubstr("malformed JSON"));
  EXPECT_THAT(p, Not(HasSubstr("kj/")));
}

}  // namespace
}  // namespace tether::transport
