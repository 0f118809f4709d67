#include "transport/dynamic.h"

#include <cstring>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "capnp/compat/json.h"
#include "capnp/dynamic.h"
#include "capnp/message.h"
#include "capnp/serialize.h"
#include "kj/exception.h"
#include "transport/framing.h"
#include "transport/json_check.h"
#include "transport/json_locator.h"
#include "transport/json_text.h"

namespace tether::transport {

namespace {

// Framed bytes from anywhere, aligned (copied if they are not: shared
// memory is aligned, a caller's copy or a log record may not be) and
// checked whole.
class CheckedBytes {
 public:
  explicit CheckedBytes(std::span<const std::byte> framed) {
    std::span<const std::byte> bytes = framed;
    if (reinterpret_cast<uintptr_t>(framed.data()) % 8 != 0) {
      words_.reset(new capnp::word[(framed.size() + 7) / 8]);
      std::memcpy(words_.get(), framed.data(), framed.size());
      bytes = {reinterpret_cast<const std::byte*>(words_.get()), framed.size()};
    }
    // JSON costs memory per value, not per word: a list of a million empty
    // structs is a few words of message and hundreds of MB of JSON. Cap'n
    // Proto charges each such element one word of traversal, so a budget
    // in proportion to the message bounds what printing it can cost.
    ReadOptions options;
    options.traversal_limit_words = 4 * (bytes.size() / 8) + 65536;
    reader_.emplace(bytes, options);
    if (!reader_->ok()) {
      status_ = absl::InvalidArgumentError(
          absl::StrCat("not a framed Cap'n Proto message: ",
                       FramingStatusName(reader_->status())));
      return;
    }
    std::string why;
    if (internal::CheckWholeMessage(*reader_, &why, &root_) !=
        FramingStatus::kOk) {
      status_ = absl::InvalidArgumentError(
          absl::StrCat("malformed message: ", why));
    }
  }

  // OK, or why the bytes are not a valid message.
  const absl::Status& status() const { return status_; }
  capnp::AnyPointer::Reader root() const { return root_; }

 private:
  std::unique_ptr<capnp::word[]> words_;
  std::optional<SlotMessageReader> reader_;
  capnp::AnyPointer::Reader root_;
  absl::Status status_;
};

absl::Status CannotShow(capnp::StructSchema type, const kj::Exception& e) {
  return absl::InvalidArgumentError(
      absl::StrCat("cannot show message as ",
                   type.getProto().getDisplayName().cStr(), ": ",
                   e.getDescription().cStr()));
}

// Reads every field of `value` as its schema says (throws kj::Exception
// where Cap'n Proto would for a reader of that field).
void ReadAll(const capnp::DynamicValue::Reader& value);

void ReadAll(const capnp::DynamicStruct::Reader& s) {
  // Null pointers read as their defaults: nothing to check there (and a
  // recursive type's default would recurse for ever).
  for (const capnp::StructSchema::Field field :
       s.getSchema().getNonUnionFields()) {
    if (s.has(field)) ReadAll(s.get(field));
  }
  KJ_IF_MAYBE (active, s.which()) {
    if (s.has(*active)) ReadAll(s.get(*active));
  }
}

void ReadAll(const capnp::DynamicValue::Reader& value) {
  switch (value.getType()) {
    case capnp::DynamicValue::STRUCT:
      ReadAll(value.as<capnp::DynamicStruct>());
      break;
    case capnp::DynamicValue::LIST: {
      // Getting the list checked its element size against the schema's;
      // only elements with pointers of their own need a look.
      const capnp::DynamicList::Reader list = value.as<capnp::DynamicList>();
      switch (list.getSchema().whichElementType()) {
        case capnp::schema::Type::STRUCT:
        case capnp::schema::Type::LIST:
          for (const capnp::DynamicValue::Reader element : list) {
            ReadAll(element);
          }
          break;
        case capnp::schema::Type::TEXT:
          for (const capnp::DynamicValue::Reader element : list) {
            (void)element.as<capnp::Text>();
          }
          break;
        case capnp::schema::Type::DATA:
          for (const capnp::DynamicValue::Reader element : list) {
            (void)element.as<capnp::Data>();
          }
          break;
        default:
          break;
      }
      break;
    }
    default:
      // Scalars, enums, Text and Data were checked by the get() that made
      // them; AnyPointer and capabilities have no schema to read by.
      break;
  }
}

}  // namespace

absl::StatusOr<std::string> MessageToJson(capnp::StructSchema type,
                                          std::span<const std::byte> framed) {
  const CheckedBytes checked(framed);
  if (!checked.status().ok()) return checked.status();
  try {
    capnp::JsonCodec codec;
    kj::String text =
        codec.encode(checked.root().getAs<capnp::DynamicStruct>(type));
    return std::string(text.cStr());
  } catch (const kj::Exception& e) {
    return CannotShow(type, e);
  }
}

absl::Status CheckMessageDecodes(capnp::StructSchema type,
                                 std::span<const std::byte> framed) {
  const CheckedBytes checked(framed);
  if (!checked.status().ok()) return checked.status();
  try {
    ReadAll(checked.root().getAs<capnp::DynamicStruct>(type));
  } catch (const kj::Exception& e) {
    return CannotShow(type, e);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<uint64_t>> JsonToMessage(capnp::StructSchema type,
                                                    const std::string& json) {
  const std::string type_name = type.getProto().getDisplayName().cStr();
  // Syntax first, with a position (capnp's parser gives none).
  const internal::JsonLocations located = internal::LocateJson(json);
  if (located.error.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "not valid JSON (line ", located.error->line, ", column ",
        located.error->column, "): ", located.error->message));
  }
  try {
    capnp::JsonCodec codec;
    capnp::MallocMessageBuilder raw_message;
    capnp::JsonValue::Builder raw = raw_message.initRoot<capnp::JsonValue>();
    DecodeRawJson(json, raw);
    // Then every field against the schema, in the user's words: a typo in a
    // field name must not publish defaults silently.
    std::vector<std::string> problems;
    JsonSchemaChecker checker([&](const std::string& path, std::string what) {
      problems.push_back(path.empty() ? what : absl::StrCat(path, ": ", what));
    });
    checker.CheckStruct(raw.asReader(), type, "");
    if (!problems.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("JSON does not fit ", type_name, ": ",
                       absl::StrJoin(problems, "; ")));
    }
    capnp::MallocMessageBuilder message;
    auto root = message.initRoot<capnp::DynamicStruct>(type);
    codec.decode(raw.asReader(), root);
    kj::Array<capnp::word> flat = capnp::messageToFlatArray(message);
    std::vector<uint64_t> words(flat.size());
    std::memcpy(words.data(), flat.begin(), flat.size() * sizeof(capnp::word));
    return words;
  } catch (const kj::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(
        "JSON does not fit ", type_name, ": ", e.getDescription().cStr()));
  }
}

}  // namespace tether::transport
