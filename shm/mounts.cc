#include "shm/mounts.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <vector>

namespace tether::shm {
namespace {

// mountinfo(5) writes space, tab, newline and backslash in paths as \040,
// \011, \012 and \134.
std::string Unescape(const std::string& field) {
  auto octal = [](char c) { return c >= '0' && c <= '7'; };
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size() && field[i + 1] <= '3' &&
        octal(field[i + 1]) && octal(field[i + 2]) && octal(field[i + 3])) {
      out += static_cast<char>((field[i + 1] - '0') * 64 +
                               (field[i + 2] - '0') * 8 + (field[i + 3] - '0'));
      i += 3;
    } else {
      out += field[i];
    }
  }
  return out;
}

}  // namespace

std::optional<MountFacts> FindMount(std::string_view mountinfo,
                                    const std::string& path) {
  // mountinfo(5): id parent major:minor root mount-point options
  // [optional fields...] - fstype source super-options
  std::optional<MountFacts> best;
  std::istringstream lines{std::string(mountinfo)};
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::vector<std::string> f;
    for (std::string w; words >> w;) f.push_back(w);
    size_t dash = 6;
    while (dash < f.size() && f[dash] != "-") ++dash;
    if (f.size() < 7 || dash + 2 >= f.size()) continue;  // malformed
    const std::string point = Unescape(f[4]);
    const bool above =
        point == "/" ||
        (path.compare(0, point.size(), point) == 0 &&
         (path.size() == point.size() || path[point.size()] == '/'));
    if (!above || (best.has_value() && point.size() < best->point.size())) {
      continue;
    }
    MountFacts m{point, f[dash + 1], ""};
    if (m.fstype == "tmpfs") {
      m.huge = "never";
      if (dash + 3 < f.size()) {
        std::istringstream options(f[dash + 3]);
        for (std::string o; std::getline(options, o, ',');) {
          if (o.rfind("huge=", 0) == 0) m.huge = o.substr(5);
        }
      }
    }
    best = std::move(m);
  }
  return best;
}

std::optional<MountFacts> MountOf(const std::string& path) {
  std::ifstream in("/proc/self/mountinfo");
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  std::error_code ec;
  std::string resolved = std::filesystem::weakly_canonical(path, ec).string();
  if (ec || resolved.empty()) resolved = path;
  return FindMount(text.str(), resolved);
}

}  // namespace tether::shm
