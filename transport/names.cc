#include "transport/names.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "shm/channel.h"

namespace tether::transport {
namespace {

bool IsNameChar(char ch) {
  return absl::ascii_isalnum(static_cast<unsigned char>(ch)) || ch == '_' ||
         ch == '-' || ch == '.';
}

// The channel's file name in its folder.
size_t EscapedLength(absl::string_view name) {
  const std::string path =
      shm::Channel::PathFor({}, std::string_view(name.data(), name.size()));
  return path.size() - path.rfind('/') - 1;
}

}  // namespace

absl::Status CheckChannelName(absl::string_view name) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", name, "\" is not a channel name: ", why,
        "; use '/'-separated parts of letters, digits, '_', '-' and '.', "
        "like \"/robot/joint_state\""));
  };
  if (name.empty()) return bad("it is empty");
  if (name[0] != '/') return bad("it does not start with '/'");
  if (name.size() == 1 || name.back() == '/') return bad("it ends with '/'");
  size_t part_start = 1;
  for (size_t i = 1; i <= name.size(); ++i) {
    if (i == name.size() || name[i] == '/') {
      const absl::string_view part = name.substr(part_start, i - part_start);
      if (part.empty()) return bad("it has an empty part (\"//\")");
      if (part == "." || part == "..") {
        return bad(absl::StrCat("it has a part \"", part, "\""));
      }
      part_start = i + 1;
    } else if (!IsNameChar(name[i])) {
      return bad(absl::StrCat("it has the character '",
                              absl::string_view(&name[i], 1), "'"));
    }
  }
  if (absl::StartsWith(name, kReservedLogPrefix)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", name, "\" is reserved: names under ", kReservedLogPrefix,
        " are the recorder's own records in its logs (a channel of that name "
        "would be read back as them); choose another name"));
  }
  if (const size_t n = EscapedLength(name); n > kMaxChannelFileName) {
    return absl::InvalidArgumentError(absl::StrCat(
        "channel name \"", name.substr(0, 40), "...\" is too long: its file ",
        "name is ", n, " bytes ('/' is written %2F), at most ",
        kMaxChannelFileName, " fit; shorten it"));
  }
  return absl::OkStatus();
}

absl::Status CheckInstanceName(absl::string_view name) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", name, "\" is not an instance name: ", why,
        "; an instance is one folder under the root, named with letters, "
        "digits, '_', '-' and '.', like \"demo\" or \"robot-1\""));
  };
  if (name.empty()) return bad("it is empty");
  if (name[0] == '.') return bad("it starts with '.'");
  for (char ch : name) {
    if (!IsNameChar(ch)) {
      return bad(absl::StrCat("it has the character '",
                              absl::string_view(&ch, 1), "'"));
    }
  }
  if (name.size() > kMaxInstanceName) {
    return bad(absl::StrCat("it is ", name.size(), " bytes, at most ",
                            kMaxInstanceName));
  }
  return absl::OkStatus();
}

}  // namespace tether::transport
