#include "transport/strict_json.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "capnp/compat/json.h"
#include "capnp/message.h"
#include "kj/exception.h"
#include "transport/json_check.h"
#include "transport/json_locator.h"
#include "transport/json_text.h"

namespace tether::transport {
namespace {

constexpr size_t kMaxReportedProblems = 25;

// The line of `path`, or of the nearest enclosing value in the text.
int LineOf(const internal::JsonLocations& locations, std::string path) {
  while (true) {
    auto it = locations.lines.find(path);
    if (it != locations.lines.end()) return it->second;
    if (path.empty()) return 0;
    const size_t cut = path.find_last_of(".[");
    path = cut == std::string::npos ? "" : path.substr(0, cut);
  }
}

}  // namespace

absl::Status DecodeStrictJson(std::string_view text, const std::string& origin,
                              capnp::DynamicStruct::Builder root) {
  const internal::JsonLocations locations = internal::LocateJson(text);
  if (locations.error) {
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ":", locations.error->line, ":",
                     locations.error->column,
                     ": malformed JSON: ", locations.error->message));
  }
  capnp::JsonCodec codec;
  capnp::MallocMessageBuilder json_message;
  capnp::JsonValue::Builder json = json_message.initRoot<capnp::JsonValue>();
  try {
    DecodeRawJson(text, json);
  } catch (const kj::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(
        origin, ": malformed JSON: ", e.getDescription().cStr()));
  }
  std::vector<std::string> problems;
  size_t count = 0;
  JsonSchemaChecker checker(
      [&](const std::string& path, std::string message) {
        if (++count > kMaxReportedProblems) return;
        std::string line = origin;
        if (const int n = LineOf(locations, path); n > 0) {
          absl::StrAppend(&line, ":", n);
        }
        absl::StrAppend(&line, ": ", path, path.empty() ? "" : ": ", message);
        problems.push_back(std::move(line));
      });
  checker.CheckStruct(json.asReader(), root.getSchema(), "");
  if (count > kMaxReportedProblems) {
    problems.push_back(absl::StrCat("... and ", count - kMaxReportedProblems,
                                    " more problems"));
  }
  if (!problems.empty()) {
    return absl::InvalidArgumentError(absl::StrJoin(problems, "\n"));
  }
  try {
    codec.decode(json.asReader(), root);
  } catch (const kj::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(
        origin, ": cannot decode: ", e.getDescription().cStr()));
  }
  return absl::OkStatus();
}

}  // namespace tether::transport
