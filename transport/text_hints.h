// transport internal: wording helpers for errors people read (stack configs,
// JSON for `tether pub`): quoting, "did you mean", short name lists.
#ifndef TETHER_TRANSPORT_TEXT_HINTS_H_
#define TETHER_TRANSPORT_TEXT_HINTS_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "kj/string.h"

namespace tether::transport::internal {

// "\"s\"".
std::string Quote(absl::string_view s);
// A Cap'n Proto text as an absl::string_view (no copy).
absl::string_view View(kj::StringPtr text);
// "; did you mean \"x\"?" when a candidate is close to `name` (edit
// distance, case-insensitive, or a cut-short prefix), else "".
std::string DidYouMean(absl::string_view name,
                       const std::vector<std::string>& candidates);
// Up to `limit` names, sorted, quoted and comma-separated ("..." if there
// are more, "none" if empty).
std::string ListNames(std::vector<std::string> names, size_t limit = 12);

}  // namespace tether::transport::internal

#endif  // TETHER_TRANSPORT_TEXT_HINTS_H_
