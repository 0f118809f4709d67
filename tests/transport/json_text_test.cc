// JSON text with \u escapes decodes to the characters they name (Cap'n
// Proto 0.9.2 alone read the hex digits a-f as 0-5), surrogate pairs
// included; a lone surrogate is refused; other text is unchanged.
#include "transport/json_text.h"

#include <string>

#include "capnp/message.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kj/exception.h"

namespace tether::transport {
namespace {

using ::testing::HasSubstr;

// The string value of JSON text `text` (a JSON string).
std::string StringOf(const std::string& text) {
  capnp::MallocMessageBuilder m;
  capnp::JsonValue::Builder v = m.initRoot<capnp::JsonValue>();
  DecodeRawJson(text, v);
  EXPECT_TRUE(v.isString()) << text;
  return v.isString() ? std::string(v.getString().cStr()) : "";
}

TEST(DecodeRawJson, UnicodeEscapesAreTheCharactersTheyName) {
  EXPECT_EQ(StringOf(R"("caf\u00e9")"), "caf\xc3\xa9");
  EXPECT_EQ(StringOf(R"("\u00E9\u4e2d")"), "\xc3\xa9\xe4\xb8\xad");
  EXPECT_EQ(StringOf(R"("\ud83d\ude00")"), "\xf0\x9f\x98\x80");  // U+1F600
  EXPECT_EQ(StringOf(R"("a\u001bb")"), "a\x1b" "b");
  EXPECT_EQ(StringOf(R"("\u0022\u005c")"), "\"\\");
  EXPECT_EQ(StringOf(R"("\u0041\n\t\"\\")"), "A\n\t\"\\");
  // An escaped backslash before a u is no \u escape.
  EXPECT_EQ(StringOf(R"("\\u00e9")"), "\\u00e9");
}

TEST(DecodeRawJson, ALoneSurrogateIsRefusedNamingIt) {
  for (const char* text : {R"("\ud800")", R"("\ude00x")", R"("\ud83dA")"}) {
    capnp::MallocMessageBuilder m;
    capnp::JsonValue::Builder v = m.initRoot<capnp::JsonValue>();
    try {
      DecodeRawJson(text, v);
      ADD_FAILURE() << text << " decoded";
    } catch (const kj::Exception& e) {
      EXPECT_THAT(std::string(e.getDescription().cStr()),
                  HasSubstr("lone UTF-16"))
          << text;
    }
  }
}

TEST(DecodeRawJson, ObjectsKeysAndNumbersAreAsTheCodecReadsThem) {
  capnp::MallocMessageBuilder m;
  capnp::JsonValue::Builder v = m.initRoot<capnp::JsonValue>();
  DecodeRawJson(R"({"n\u00e9": [1, 2.5, "\u00e9"], "k": true})", v);
  ASSERT_TRUE(v.isObject());
  auto fields = v.getObject();
  ASSERT_EQ(fields.size(), 2u);
  EXPECT_EQ(std::string(fields[0].getName().cStr()), "n\xc3\xa9");
  EXPECT_EQ(fields[0].getValue().getArray().size(), 3u);
  EXPECT_EQ(std::string(fields[0].getValue().getArray()[2].getString().cStr()),
            "\xc3\xa9");
}

}  // namespace
}  // namespace tether::transport
