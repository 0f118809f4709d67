// transport: a JSON file people write (the bridges' config files) decoded
// into a Cap'n Proto struct strictly, with errors in the words and places of
// stack configs: every problem JsonSchemaChecker finds (unknown fields with
// "did you mean" and the valid names, wrong kinds, unknown enum names, ...)
// at its file:line, instead of capnp::JsonCodec's silence about unknown
// fields or its library-author wording.
#ifndef TETHER_TRANSPORT_STRICT_JSON_H_
#define TETHER_TRANSPORT_STRICT_JSON_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "capnp/dynamic.h"

namespace tether::transport {

// Checks `text` against the schema of `root` and, if it has no problem,
// decodes it into `root`. Else InvalidArgument listing the problems (up to
// 25), one per line, each "origin:line: field.path: what is wrong; what
// would be valid" (line 0 left out), or "origin:line:column: malformed
// JSON: ..." for text that is not JSON (`root` may then be partly set).
// Setup only: allocates. Any thread.
absl::Status DecodeStrictJson(std::string_view text, const std::string& origin,
                              capnp::DynamicStruct::Builder root);

}  // namespace tether::transport

#endif  // TETHER_TRANSPORT_STRICT_JSON_H_
