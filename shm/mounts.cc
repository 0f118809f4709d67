#include "shm/mounts.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <vector>

namespace tether::shm {

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
    const std::string& point = f[4];
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
