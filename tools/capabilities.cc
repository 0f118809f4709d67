#include "tools/capabilities.h"

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"

namespace tether::tools {

std::optional<uint64_t> ParseCapEff(std::string_view proc_status) {
  constexpr std::string_view kKey = "CapEff:";
  while (!proc_status.empty()) {
    const size_t nl = proc_status.find('\n');
    const std::string_view line = proc_status.substr(0, nl);
    if (line.substr(0, kKey.size()) == kKey) {
      const absl::string_view value =
          absl::StripAsciiWhitespace(absl::string_view(
              line.data() + kKey.size(), line.size() - kKey.size()));
      uint64_t caps = 0;
      // SimpleHexAtoi would take a "0x" prefix or a sign; the kernel writes
      // bare hex digits, so anything else is not a CapEff value.
      if (value.empty() || value.size() > 16) return std::nullopt;
      for (char c : value) {
        if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) {
          return std::nullopt;
        }
      }
      if (!absl::SimpleHexAtoi(value, &caps)) return std::nullopt;
      return caps;
    }
    if (nl == std::string_view::npos) break;
    proc_status.remove_prefix(nl + 1);
  }
  return std::nullopt;
}

std::optional<uint64_t> ReadEffectiveCapabilities(
    const std::string& proc_root) {
  std::ifstream in(proc_root + "/self/status");
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return ParseCapEff(text.str());
}

}  // namespace tether::tools
