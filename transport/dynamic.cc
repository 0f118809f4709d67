#include "transport/dynamic.h"

#include <cstring>

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

namespace tether::transport {

absl::StatusOr<std::string> MessageToJson(capnp::StructSchema type,
                                          std::span<const std::byte> framed) {
  // Shared memory may be unaligned for us only if the caller copied it; work
  // on an aligned copy so either way is fine.
  std::span<const std::byte> bytes = framed;
  std::unique_ptr<capnp::word[]> words;
  if (reinterpret_cast<uintptr_t>(framed.data()) % 8 != 0) {
    words.reset(new capnp::word[(framed.size() + 7) / 8]);
    std::memcpy(words.get(), framed.data(), framed.size());
    bytes = {reinterpret_cast<const std::byte*>(words.get()), framed.size()};
  }
  // JSON costs memory per value, not per word: a list of a million empty
  // structs is a few words of message and hundreds of MB of JSON. Cap'n
  // Proto charges each such element one word of traversal, so a budget in
  // proportion to the message bounds what printing it can cost.
  ReadOptions options;
  options.traversal_limit_words = 4 * (bytes.size() / 8) + 65536;
  SlotMessageReader reader(bytes, options);
  if (!reader.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "not a framed Cap'n Proto message: ", FramingStatusName(reader.status())));
  }
  std::string why;
  capnp::AnyPointer::Reader root;
  if (internal::CheckWholeMessage(reader, &why, &root) != FramingStatus::kOk) {
    return absl::InvalidArgumentError(absl::StrCat("malformed message: ", why));
  }
  try {
    capnp::JsonCodec codec;
    kj::String text = codec.encode(root.getAs<capnp::DynamicStruct>(type));
    return std::string(text.cStr());
  } catch (const kj::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot show message as ",
                     type.getProto().getDisplayName().cStr(), ": ",
                     e.getDescription().cStr()));
  }
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
    codec.decodeRaw(kj::ArrayPtr<const char>(json.data(), json.size()), raw);
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
