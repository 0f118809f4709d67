#include "tools/doctor_inputs.h"

#include <pwd.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tools/capabilities.h"

namespace tether::tools {
namespace {

// From <linux/magic.h>.
constexpr int64_t kTmpfsMagic = 0x01021994;

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string_view Trim(std::string_view s) {
  const auto not_space = [](char c) {
    return c != ' ' && c != '\t' && c != '\n' && c != '\r';
  };
  while (!s.empty() && !not_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && !not_space(s.back())) s.remove_suffix(1);
  return s;
}

std::optional<uint64_t> ParseUint(std::string_view s, int base = 10) {
  if (s.empty() || s.size() > 20) return std::nullopt;
  uint64_t value = 0;
  for (char c : s) {
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (base == 16 && c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else if (base == 16 && c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    } else {
      return std::nullopt;
    }
    if (value > (std::numeric_limits<uint64_t>::max() - digit) / base) {
      return std::nullopt;
    }
    value = value * base + digit;
  }
  return value;
}

// Calls `fn(line)` for each line of `text`.
template <typename Fn>
void ForEachLine(std::string_view text, Fn fn) {
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    fn(text.substr(0, nl));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
}

std::optional<uint64_t> ParseLimitValue(std::string_view word) {
  if (word == "unlimited") return kUnlimited;
  return ParseUint(word);
}

// "Max locked memory         8388608              8388608              bytes"
std::optional<ResourceLimit> ParseLimit(std::string_view limits,
                                        std::string_view name) {
  std::optional<ResourceLimit> result;
  ForEachLine(limits, [&](std::string_view line) {
    if (line.substr(0, name.size()) != name) return;
    std::string_view rest = Trim(line.substr(name.size()));
    const size_t space = rest.find_first_of(" \t");
    if (space == std::string_view::npos) return;
    const std::optional<uint64_t> soft = ParseLimitValue(rest.substr(0, space));
    rest = Trim(rest.substr(space));
    const std::optional<uint64_t> hard =
        ParseLimitValue(rest.substr(0, rest.find_first_of(" \t")));
    if (soft && hard) result = ResourceLimit{*soft, *hard};
  });
  return result;
}

// Each instance folder under `root` and the bytes its files take, largest
// first (unreadable folders are skipped: doctor reports, never fails).
std::vector<std::pair<std::string, uint64_t>> InstanceSizes(
    const std::string& root) {
  std::vector<std::pair<std::string, uint64_t>> sizes;
  std::error_code ec;
  for (const auto& instance : std::filesystem::directory_iterator(root, ec)) {
    if (!instance.is_directory(ec)) continue;
    uint64_t bytes = 0;
    for (const auto& file :
         std::filesystem::directory_iterator(instance.path(), ec)) {
      struct stat st;
      if (::lstat(file.path().c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
        bytes += uint64_t(st.st_blocks) * 512;
      }
    }
    sizes.emplace_back(instance.path().filename().string(), bytes);
  }
  std::sort(sizes.begin(), sizes.end(),
            [](const auto& a, const auto& b) { return a.second > b.second; });
  return sizes;
}

}  // namespace

std::string KernelReleaseText(const DoctorInputs& inputs) {
  return inputs.kernel.kernel_release.empty() ? "(unknown)"
                                              : inputs.kernel.kernel_release;
}

std::optional<std::vector<int>> ParseCpuList(std::string_view text) {
  std::vector<int> cpus;
  text = Trim(text);
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view item = Trim(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view()
                                           : text.substr(comma + 1);
    const size_t dash = item.find('-');
    const std::optional<uint64_t> first = ParseUint(item.substr(0, dash));
    const std::optional<uint64_t> last = dash == std::string_view::npos
                                             ? first
                                             : ParseUint(item.substr(dash + 1));
    if (!first || !last || *first > *last || *last > 65535) {
      return std::nullopt;
    }
    for (uint64_t cpu = *first; cpu <= *last; ++cpu) {
      cpus.push_back(static_cast<int>(cpu));
    }
  }
  return cpus;
}

DoctorInputs GatherDoctorInputs(const DoctorOptions& options) {
  DoctorInputs in;
  in.kernel = loop::ProbeKernel(loop::ProbeOptions{
      .proc_root = options.proc_root, .sys_root = options.sys_root});

  if (std::optional<std::string> limits =
          ReadFile(options.proc_root + "/self/limits")) {
    in.rtprio = ParseLimit(*limits, "Max realtime priority");
    in.memlock = ParseLimit(*limits, "Max locked memory");
  }
  in.cap_effective = ReadEffectiveCapabilities(options.proc_root);
  {
    passwd entry;
    passwd* found = nullptr;
    char buf[4096];
    if (getpwuid_r(getuid(), &entry, buf, sizeof(buf), &found) == 0 &&
        found != nullptr) {
      in.user = found->pw_name;
    }
  }

  in.shm.path = options.shm_path;
  struct stat st;
  in.shm.exists =
      stat(options.shm_path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  if (in.shm.exists) {
    in.shm.writable = access(options.shm_path.c_str(), W_OK | X_OK) == 0;
    struct statvfs vfs;
    if (statvfs(options.shm_path.c_str(), &vfs) == 0) {
      in.shm.size_bytes = uint64_t{vfs.f_blocks} * vfs.f_frsize;
      in.shm.free_bytes = uint64_t{vfs.f_bavail} * vfs.f_frsize;
    }
    struct statfs fs;
    if (statfs(options.shm_path.c_str(), &fs) == 0) {
      in.shm.tmpfs = static_cast<int64_t>(fs.f_type) == kTmpfsMagic;
    }
    in.shm.instances = InstanceSizes(options.shm_path + "/tether");
  }

  const std::string cpu_dir = options.sys_root + "/devices/system/cpu";
  std::vector<int> online;
  if (std::optional<std::string> text = ReadFile(cpu_dir + "/online")) {
    online = ParseCpuList(*text).value_or(std::vector<int>());
  }
  if (online.empty()) {
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    for (long cpu = 0; cpu < n; ++cpu) online.push_back(static_cast<int>(cpu));
  }
  in.online_cpus = static_cast<int>(online.size());
  if (std::optional<std::string> text = ReadFile(cpu_dir + "/isolated")) {
    in.isolated_cpus = ParseCpuList(*text).value_or(std::vector<int>());
  }
  for (int cpu : online) {
    if (std::optional<std::string> governor =
            ReadFile(cpu_dir + "/cpu" + std::to_string(cpu) +
                     "/cpufreq/scaling_governor")) {
      in.governors.emplace_back(cpu, std::string(Trim(*governor)));
    }
  }
  return in;
}

}  // namespace tether::tools
