// Misuse of util::JsonWriter aborts with a message saying what was wrong.
#include "gtest/gtest.h"
#include "util/json_writer.h"

namespace tether::util {
namespace {

TEST(JsonWriterDeathTest, DoubleRefusesDecimalsOutsideZeroToSeventeen) {
  EXPECT_DEATH(
      {
        JsonWriter json;
        json.BeginArray().Double(1.0, 18);
      },
      "decimals outside 0..17");
  EXPECT_DEATH(
      {
        JsonWriter json;
        json.BeginArray().Double(1.0, -1);
      },
      "decimals outside 0..17");
}

TEST(JsonWriterDeathTest, ValueWithoutAKeyInsideAnObjectAborts) {
  EXPECT_DEATH(
      {
        JsonWriter json;
        json.BeginObject().Double(1.0);
      },
      "value without a key inside an object");
}

}  // namespace
}  // namespace tether::util
