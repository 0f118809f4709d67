#include "transport/dynamic.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "capnp/compat/json.h"
#include "capnp/dynamic.h"
#include "capnp/message.h"
#include "capnp/serialize.h"
#include "kj/exception.h"
#include "transport/framing.h"

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
  SlotMessageReader reader(bytes);
  if (!reader.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "not a framed Cap'n Proto message: ", FramingStatusName(reader.status())));
  }
  std::string why;
  if (internal::CheckWholeMessage(reader, &why) != FramingStatus::kOk) {
    return absl::InvalidArgumentError(absl::StrCat("malformed message: ", why));
  }
  try {
    capnp::JsonCodec codec;
    kj::String text = codec.encode(reader.getRoot<capnp::DynamicStruct>(type));
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
  try {
    capnp::MallocMessageBuilder message;
    capnp::JsonCodec codec;
    auto root = message.initRoot<capnp::DynamicStruct>(type);
    codec.decode(kj::StringPtr(json.c_str()), root);
    kj::Array<capnp::word> flat = capnp::messageToFlatArray(message);
    std::vector<uint64_t> words(flat.size());
    std::memcpy(words.data(), flat.begin(), flat.size() * sizeof(capnp::word));
    return words;
  } catch (const kj::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(
        "JSON does not fit ", type.getProto().getDisplayName().cStr(), ": ",
        e.getDescription().cStr()));
  }
}

}  // namespace tether::transport
