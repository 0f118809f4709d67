#include "util/json_writer.h"

#include <cmath>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/tools/json_test_parser.h"

namespace tether::util {
namespace {

using tools::test::JsonValue;
using tools::test::ParseJson;

TEST(JsonWriter, NestedDocumentParsesBackToTheSameValues) {
  JsonWriter json;
  json.BeginObject();
  json.Key("name").String("imu");
  json.Key("ok").Bool(true);
  json.Key("missing").Null();
  json.Key("depth").Int(-3);
  json.Key("big").Uint(18446744073709551615u);
  json.Key("list").BeginArray();
  json.Int(1).String("two").BeginObject().EndObject().BeginArray().EndArray();
  json.EndArray();
  json.Key("empty").BeginObject().EndObject();
  json.EndObject();

  absl::StatusOr<JsonValue> v = ParseJson(json.str());
  ASSERT_TRUE(v.ok()) << v.status() << "\n" << json.str();
  ASSERT_EQ(v->kind, JsonValue::Kind::kObject);
  ASSERT_EQ(v->object.size(), 7u);
  EXPECT_EQ(v->Find("name")->string, "imu");
  EXPECT_TRUE(v->Find("ok")->boolean);
  EXPECT_EQ(v->Find("missing")->kind, JsonValue::Kind::kNull);
  EXPECT_EQ(v->Find("depth")->number, -3);
  EXPECT_EQ(v->Find("big")->number, 18446744073709551615.0);
  const JsonValue* list = v->Find("list");
  ASSERT_EQ(list->array.size(), 4u);
  EXPECT_EQ(list->array[1].string, "two");
  EXPECT_EQ(list->array[2].kind, JsonValue::Kind::kObject);
  EXPECT_EQ(list->array[3].kind, JsonValue::Kind::kArray);
  EXPECT_EQ(v->Find("empty")->kind, JsonValue::Kind::kObject);
}

TEST(JsonWriter, StringsRoundTripThroughEscaping) {
  const std::string nasty =
      "quote\" backslash\\ newline\n tab\t cr\r bell\x07 nul-free \x1f µ";
  JsonWriter json;
  json.BeginArray().String(nasty).EndArray();
  EXPECT_THAT(json.str(), ::testing::HasSubstr("\\u0007"));
  absl::StatusOr<JsonValue> v = ParseJson(json.str());
  ASSERT_TRUE(v.ok()) << v.status() << "\n" << json.str();
  ASSERT_EQ(v->array.size(), 1u);
  EXPECT_EQ(v->array[0].string, nasty);
}

TEST(JsonWriter, EmptyContainersAreCompact) {
  JsonWriter json;
  json.BeginObject().EndObject();
  EXPECT_EQ(json.str(), "{}\n");
}

// rt_benchmark's readers (tools/rt_lab/rt_lab.py, the README's tables) see
// three decimals, as benchmarks/rt_report's own writer printed them.
TEST(JsonWriter, DoublesAreFixedPointWithThreeDecimalsByDefault) {
  JsonWriter json;
  json.BeginArray();
  json.Double(12.3456).Double(0.5).Double(1234.0).Double(-0.0004);
  json.Double(7.0 / 3.0, 1).Double(2.5, 0);
  json.EndArray();
  EXPECT_EQ(json.str(),
            "[\n  12.346,\n  0.500,\n  1234.000,\n  -0.000,\n  2.3,\n  2\n]\n");
}

// The largest doubles have 309 digits before the point: none is cut short.
TEST(JsonWriter, HugeDoublesAreWrittenWhole) {
  JsonWriter json;
  json.BeginArray();
  json.Double(1e300).Double(-std::numeric_limits<double>::max(), 17);
  json.EndArray();
  absl::StatusOr<JsonValue> v = ParseJson(json.str());
  ASSERT_TRUE(v.ok()) << v.status() << "\n" << json.str();
  ASSERT_EQ(v->array.size(), 2u);
  EXPECT_EQ(v->array[0].number, 1e300);
  EXPECT_EQ(v->array[1].number, -std::numeric_limits<double>::max());
}

TEST(JsonWriter, NonFiniteDoublesAreNull) {
  JsonWriter json;
  json.BeginObject();
  json.Key("nan").Double(std::nan(""));
  json.Key("inf").Double(std::numeric_limits<double>::infinity());
  json.Key("-inf").Double(-std::numeric_limits<double>::infinity());
  json.EndObject();
  absl::StatusOr<JsonValue> v = ParseJson(json.str());
  ASSERT_TRUE(v.ok()) << v.status() << "\n" << json.str();
  for (const char* key : {"nan", "inf", "-inf"}) {
    EXPECT_EQ(v->Find(key)->kind, JsonValue::Kind::kNull) << key;
  }
}

// The parser the CLI tests rely on must reject what is not JSON.
TEST(JsonTestParser, RejectsInvalidDocuments) {
  for (const char* bad : {"", "{", "{\"a\":1,}", "[1,]", "{a:1}",
                          "\"raw\nnewline\"", "01", "{} {}", "[\"\\x\"]",
                          "{\"a\":1,\"a\":2}", "tru", "[1 2]", "\"\\ud800\""}) {
    EXPECT_FALSE(ParseJson(bad).ok()) << bad;
  }
  for (const char* good :
       {"{}", "[]", " 0 ", "-1.5e3", "\"\\u00b5\\ud83d\\ude00\"",
        "{\"a\":[true,false,null]}"}) {
    EXPECT_TRUE(ParseJson(good).ok()) << good;
  }
}

}  // namespace
}  // namespace tether::util
