// transport: JSON text into capnp::JsonValue, as capnp::JsonCodec::decodeRaw
// does, with the string escapes \uXXXX decoded here: Cap'n Proto 0.9.2
// (Debian 12) reads the hex digits a-f (and A-F) of such an escape as 0-5,
// so "\u00e9" became "I" without a word (fixed upstream after 0.9). Every
// JSON tether reads from people (stack configs, `tether pub`, bridge
// configs) goes through here.
#ifndef TETHER_TRANSPORT_JSON_TEXT_H_
#define TETHER_TRANSPORT_JSON_TEXT_H_

#include <string_view>

#include "capnp/compat/json.h"

namespace tether::transport {

// Parses `text` into `out`. Throws kj::Exception as decodeRaw does for text
// that is not JSON, and for an escape that is no character (a lone UTF-16
// surrogate such as \ud800). Setup only: allocates. Any thread.
void DecodeRawJson(std::string_view text, capnp::JsonValue::Builder out);

}  // namespace tether::transport

#endif  // TETHER_TRANSPORT_JSON_TEXT_H_
