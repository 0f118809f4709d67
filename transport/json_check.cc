#include "transport/json_check.h"

#include <charconv>

#include <cmath>
#include <sstream>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_join.h"
#include "transport/text_hints.h"

namespace tether::transport {

using internal::DidYouMean;
using internal::ListNames;
using internal::Quote;
using internal::View;

std::string JsonSchemaChecker::Kind(capnp::JsonValue::Reader value) {
  switch (value.which()) {
    case capnp::JsonValue::NULL_:
      return "null";
    case capnp::JsonValue::BOOLEAN:
      return value.getBoolean() ? "true" : "false";
    case capnp::JsonValue::NUMBER: {
      // The shortest text that reads back as the same double: 4294967296,
      // not 4.29497e+09.
      char text[64];
      const std::to_chars_result end =
          std::to_chars(text, text + sizeof(text), value.getNumber());
      return absl::StrCat("the number ",
                          absl::string_view(text, end.ptr - text));
    }
    case capnp::JsonValue::STRING:
      return absl::StrCat("the string ", Quote(View(value.getString())));
    case capnp::JsonValue::ARRAY:
      return "an array";
    case capnp::JsonValue::OBJECT:
      return "an object";
    case capnp::JsonValue::CALL:
      return "a call";
  }
  return "an unknown value";
}

std::string JsonSchemaChecker::StructName(capnp::StructSchema schema) {
  return std::string(View(schema.getUnqualifiedName()));
}

void JsonSchemaChecker::CheckStruct(capnp::JsonValue::Reader value,
                                  capnp::StructSchema schema,
                                  const std::string& path) {
  const std::string where = path.empty() ? "the top level" : path;
  if (value.which() != capnp::JsonValue::OBJECT) {
    error_(path,
          absl::StrCat("expected an object (", StructName(schema), "), got ",
                       Kind(value)));
    return;
  }
  std::vector<std::string> field_names;
  for (capnp::StructSchema::Field field : schema.getFields()) {
    field_names.emplace_back(View(field.getProto().getName()));
  }
  absl::flat_hash_map<std::string, bool> seen;
  std::string union_member;  // the member of the struct's union given
  for (capnp::JsonValue::Field::Reader member : value.getObject()) {
    const std::string name(View(member.getName()));
    const std::string member_path = path.empty() ? name : path + "." + name;
    if (!seen.emplace(name, true).second) {
      error_(member_path,
            "given twice; JSON object members must be unique");
      continue;
    }
    KJ_IF_MAYBE (field, schema.findFieldByName(member.getName())) {
      if (field->getProto().getDiscriminantValue() !=
          capnp::schema::Field::NO_DISCRIMINANT) {
        if (!union_member.empty()) {
          error_(member_path,
                 absl::StrCat("cannot be given with ", Quote(union_member),
                              ": they are alternatives (one union); keep "
                              "one"));
          continue;
        }
        union_member = name;
      }
      if (field->getProto().isGroup()) {
        CheckStruct(member.getValue(), field->getType().asStruct(),
                    member_path);
      } else {
        CheckValue(member.getValue(), field->getType(), member_path);
      }
    } else {
      error_(member_path,
            absl::StrCat("unknown field", DidYouMean(name, field_names),
                         " (fields of ", StructName(schema), " in ", where,
                         ": ", absl::StrJoin(field_names, ", "), ")"));
    }
  }
}

void JsonSchemaChecker::CheckInteger(capnp::JsonValue::Reader value,
                                   const std::string& path, double min,
                                   double max, bool allow_string) {
  // Exact bounds for the message: a double prints 2^63 - 1 as 2^63.
  const auto range = [&] {
    if (max == 9223372036854775807.0) {
      return std::string("-9223372036854775808..9223372036854775807");
    }
    if (max == 18446744073709551615.0) return std::string("0..18446744073709551615");
    std::ostringstream r;
    r.precision(20);
    r << min << ".." << max;
    return r.str();
  };
  const auto out_of_range = [&] {
    std::string valid = range_of_ ? range_of_(path) : std::string();
    if (valid.empty()) valid = range();
    error_(path, absl::StrCat(Kind(value), " is out of range; use ", valid));
  };
  double number = 0;
  if (value.which() == capnp::JsonValue::NUMBER) {
    number = value.getNumber();
    // A JSON number is a double: from 2^53 on it need not be the integer
    // written (9007199254740993 reads as ...992), which would be sent
    // without a word. 64-bit fields take such values as strings.
    if (allow_string && std::isfinite(number) &&
        std::fabs(number) >= 9007199254740992.0) {
      error_(path, absl::StrCat(
                       Kind(value),
                       " is at or beyond 2^53, where a JSON number (a double) "
                       "no longer holds every integer; write it as a string "
                       "(\"12345678901234567890\"), which is read exactly"));
      return;
    }
  } else if (allow_string && value.which() == capnp::JsonValue::STRING) {
    // 64-bit integers may be strings (JSON numbers are doubles).
    int64_t s = 0;
    uint64_t u = 0;
    const absl::string_view text = View(value.getString());
    // Checked exactly, as integers (a double would round them).
    if (absl::SimpleAtoi(text, &s)) {
      if (min == 0 && s < 0) out_of_range();  // a UInt64
      return;
    }
    if (absl::SimpleAtoi(text, &u)) {
      if (max < 18446744073709551615.0) out_of_range();  // an Int64
      return;
    }
    absl::string_view digits = text;
    absl::ConsumePrefix(&digits, "-");
    if (!digits.empty() &&
        digits.find_first_not_of("0123456789") == absl::string_view::npos) {
      return out_of_range();  // a whole number beyond 64 bits
    }
    error_(path, absl::StrCat("expected a whole number, got ", Kind(value)));
    return;
  } else {
    error_(path,
          absl::StrCat("expected a whole number, got ", Kind(value)));
    return;
  }
  if (!std::isfinite(number) || std::floor(number) != number) {
    error_(path,
          absl::StrCat("expected a whole number, got ", Kind(value)));
    return;
  }
  if (number < min || number > max) out_of_range();
}

void JsonSchemaChecker::CheckValue(capnp::JsonValue::Reader value,
                                 capnp::Type type, const std::string& path) {
  if (type.which() == capnp::schema::Type::VOID) {
    if (value.which() != capnp::JsonValue::NULL_) {
      error_(path, absl::StrCat("a Void field takes null, got ", Kind(value)));
    }
    return;
  }
  if (value.which() == capnp::JsonValue::NULL_) {
    error_(path,
          "null is not a value here; give a value or leave the field out "
          "for its default");
    return;
  }
  switch (type.which()) {
    case capnp::schema::Type::BOOL:
      if (value.which() != capnp::JsonValue::BOOLEAN) {
        error_(path,
              absl::StrCat("expected true or false, got ", Kind(value)));
      }
      return;
    case capnp::schema::Type::INT8:
      return CheckInteger(value, path, -128, 127, false);
    case capnp::schema::Type::INT16:
      return CheckInteger(value, path, -32768, 32767, false);
    case capnp::schema::Type::INT32:
      return CheckInteger(value, path, -2147483648.0, 2147483647.0,
                          false);
    case capnp::schema::Type::INT64:
      return CheckInteger(value, path, -9223372036854775808.0,
                          9223372036854775807.0, true);
    case capnp::schema::Type::UINT8:
      return CheckInteger(value, path, 0, 255, false);
    case capnp::schema::Type::UINT16:
      return CheckInteger(value, path, 0, 65535, false);
    case capnp::schema::Type::UINT32:
      return CheckInteger(value, path, 0, 4294967295.0, false);
    case capnp::schema::Type::UINT64:
      return CheckInteger(value, path, 0, 18446744073709551615.0, true);
    case capnp::schema::Type::FLOAT32:
    case capnp::schema::Type::FLOAT64:
      if (value.which() != capnp::JsonValue::NUMBER) {
        error_(path, absl::StrCat("expected a number, got ", Kind(value)));
      } else if (!std::isfinite(value.getNumber())) {
        error_(path, "the number is too large for a double (it reads as "
                     "infinity); give a finite number");
      } else if (type.which() == capnp::schema::Type::FLOAT32 &&
                 std::fabs(value.getNumber()) > 3.4028234663852886e38) {
        error_(path, absl::StrCat(Kind(value),
                                  " is out of range for a Float32 (at most "
                                  "3.4e38 in magnitude)"));
      }
      return;
    case capnp::schema::Type::TEXT:
      if (value.which() != capnp::JsonValue::STRING) {
        error_(path,
              absl::StrCat("expected a string, got ", Kind(value)));
      }
      return;
    case capnp::schema::Type::ENUM: {
      const capnp::EnumSchema schema = type.asEnum();
      std::vector<std::string> names;
      for (capnp::EnumSchema::Enumerant e : schema.getEnumerants()) {
        names.emplace_back(View(e.getProto().getName()));
      }
      if (value.which() != capnp::JsonValue::STRING) {
        error_(path,
              absl::StrCat("expected one of ", ListNames(names), ", got ",
                           Kind(value)));
        return;
      }
      if (schema.findEnumerantByName(value.getString()) == nullptr) {
        error_(path,
              absl::StrCat(Quote(View(value.getString())),
                           " is not valid; use one of ", ListNames(names)));
      }
      return;
    }
    case capnp::schema::Type::LIST: {
      if (value.which() != capnp::JsonValue::ARRAY) {
        error_(path,
              absl::StrCat("expected an array, got ", Kind(value)));
        return;
      }
      const capnp::Type element = type.asList().getElementType();
      auto array = value.getArray();
      for (uint32_t i = 0; i < array.size(); ++i) {
        CheckValue(array[i], element, absl::StrCat(path, "[", i, "]"));
      }
      return;
    }
    case capnp::schema::Type::STRUCT:
      return CheckStruct(value, type.asStruct(), path);
    case capnp::schema::Type::DATA: {
      // Cap'n Proto's JSON writes Data as an array of byte values.
      if (value.which() != capnp::JsonValue::ARRAY) {
        error_(path, absl::StrCat("expected an array of bytes (0..255), got ",
                                  Kind(value)));
        return;
      }
      auto array = value.getArray();
      for (uint32_t i = 0; i < array.size(); ++i) {
        CheckInteger(array[i], absl::StrCat(path, "[", i, "]"), 0, 255,
                     false);
      }
      return;
    }
    default:
      error_(path, "this field type (an interface or AnyPointer) cannot be "
                   "written as JSON");
      return;
  }
}

}  // namespace tether::transport
