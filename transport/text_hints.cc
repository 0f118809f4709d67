#include "transport/text_hints.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace tether::transport::internal {

std::string Quote(absl::string_view s) { return absl::StrCat("\"", s, "\""); }

absl::string_view View(kj::StringPtr text) {
  return absl::string_view(text.cStr(), text.size());
}

namespace {

size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      const bool same =
          absl::ascii_tolower(a[i - 1]) == absl::ascii_tolower(b[j - 1]);
      row[j] =
          std::min({row[j] + 1, row[j - 1] + 1, diagonal + (same ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string DidYouMean(absl::string_view name,
                       const std::vector<std::string>& candidates) {
  const std::string* best = nullptr;
  size_t best_distance = std::max<size_t>(2, name.size() / 3) + 1;
  for (const std::string& candidate : candidates) {
    size_t d = EditDistance(name, candidate);
    // A cut-short name ("prio" for "priority") is a near miss too.
    if (name.size() >= 3 && absl::StartsWith(candidate, name)) d = 1;
    if (d < best_distance) {
      best_distance = d;
      best = &candidate;
    }
  }
  return best == nullptr ? ""
                         : absl::StrCat("; did you mean ", Quote(*best), "?");
}

std::string ListNames(std::vector<std::string> names, size_t limit) {
  std::sort(names.begin(), names.end());
  std::string out;
  for (size_t i = 0; i < names.size() && i < limit; ++i) {
    absl::StrAppend(&out, i == 0 ? "" : ", ", Quote(names[i]));
  }
  if (names.size() > limit) absl::StrAppend(&out, ", ...");
  if (names.empty()) out = "none";
  return out;
}

}  // namespace tether::transport::internal
