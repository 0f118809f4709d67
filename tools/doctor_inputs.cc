#include "tools/doctor_inputs.h"

#include <dirent.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "shm/channel.h"
#include "shm/mounts.h"
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

namespace {

// RemoveIPC= in one logind config text ("[Login]" section), if set.
void ReadRemoveIpc(const std::string& path, LogindFacts* facts) {
  std::optional<std::string> text = ReadFile(path);
  if (!text) return;
  facts->present = true;
  int line_no = 0;
  size_t pos = 0;
  while (pos <= text->size()) {
    size_t end = text->find('\n', pos);
    if (end == std::string::npos) end = text->size();
    ++line_no;
    std::string_view line = Trim(std::string_view(*text).substr(pos, end - pos));
    pos = end + 1;
    if (line.rfind("RemoveIPC", 0) != 0) continue;
    const size_t eq = line.find('=');
    if (eq == std::string_view::npos) continue;
    std::string value(Trim(line.substr(eq + 1)));
    for (char& c : value) c = static_cast<char>(std::tolower(c));
    const bool yes = value == "yes" || value == "true" || value == "1" ||
                     value == "on";
    const bool no = value == "no" || value == "false" || value == "0" ||
                    value == "off";
    if (!yes && !no) continue;
    facts->remove_ipc = yes;
    facts->source = path + ":" + std::to_string(line_no);
  }
}

std::string NameOfUser(uid_t uid) {
  passwd entry;
  passwd* found = nullptr;
  char buf[4096];
  if (getpwuid_r(uid, &entry, buf, sizeof(buf), &found) == 0 && found) {
    return found->pw_name;
  }
  return std::to_string(uid);
}

std::string NameOfGroup(gid_t gid) {
  group entry;
  group* found = nullptr;
  char buf[8192];
  if (getgrgid_r(gid, &entry, buf, sizeof(buf), &found) == 0 && found) {
    return found->gr_name;
  }
  return std::to_string(gid);
}

std::optional<ChannelFolderFacts> FolderFacts(const std::string& path,
                                              bool is_root) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return std::nullopt;
  ChannelFolderFacts f;
  f.path = path;
  f.mode = st.st_mode & 07777;
  f.owner = NameOfUser(st.st_uid);
  f.group = NameOfGroup(st.st_gid);
  f.is_root = is_root;
  return f;
}

}  // namespace

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
    in.shm.instances = InstanceSizes(options.tether_root);
  }
  in.shm.root_path = options.tether_root;
  if (std::optional<std::string> thp = ReadFile(
          options.sys_root + "/kernel/mm/transparent_hugepage/shmem_enabled")) {
    // "always within_size advise [never] deny force": the bracketed one.
    const size_t open = thp->find('['), close = thp->find(']');
    if (open != std::string::npos && close != std::string::npos &&
        close > open) {
      in.shm.thp_shmem = thp->substr(open + 1, close - open - 1);
    }
  }
  if (std::optional<std::string> mountinfo =
          ReadFile(options.proc_root + "/self/mountinfo")) {
    // The root itself when it exists (it may be a mount of its own).
    std::error_code ec;
    std::string root =
        std::filesystem::weakly_canonical(options.tether_root, ec).string();
    if (ec || root.empty()) root = options.tether_root;
    if (std::optional<shm::MountFacts> m = shm::FindMount(*mountinfo, root)) {
      in.shm.root_mount = m->point;
      in.shm.root_fstype = m->fstype;
      in.shm.root_huge = m->huge;
    }
  }
  if (options.probe_huge_pages) {
    // Where the root's channel files would be made: the root, or the
    // nearest folder above it (the root is made with the first stack).
    std::filesystem::path dir = options.tether_root;
    std::error_code ec;
    while (!dir.empty() && !std::filesystem::is_directory(dir, ec) &&
           dir.has_parent_path() && dir.parent_path() != dir) {
      dir = dir.parent_path();
    }
    if (!dir.empty()) {
      in.shm.collapse_errno = shm::Channel::ProbeHugePages(dir.string());
    }
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

  // logind.conf, then logind.conf.d/*.conf in name order: the last wins.
  const std::string logind = options.etc_root + "/systemd/logind.conf";
  ReadRemoveIpc(logind, &in.logind);
  std::vector<std::string> dropins;
  if (DIR* d = opendir((logind + ".d").c_str()); d != nullptr) {
    in.logind.present = true;
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name.size() > 5 && name.compare(name.size() - 5, 5, ".conf") == 0) {
        dropins.push_back(logind + ".d/" + name);
      }
    }
    closedir(d);
  }
  std::sort(dropins.begin(), dropins.end());
  for (const std::string& f : dropins) ReadRemoveIpc(f, &in.logind);

  if (std::optional<ChannelFolderFacts> root =
          FolderFacts(options.tether_root, /*is_root=*/true)) {
    in.channel_folders.push_back(*root);
    std::vector<std::string> instances;
    if (DIR* d = opendir(options.tether_root.c_str()); d != nullptr) {
      while (dirent* e = readdir(d)) {
        const std::string name = e->d_name;
        if (name != "." && name != "..") instances.push_back(name);
      }
      closedir(d);
    }
    std::sort(instances.begin(), instances.end());
    for (const std::string& name : instances) {
      if (std::optional<ChannelFolderFacts> f =
              FolderFacts(options.tether_root + "/" + name, false)) {
        in.channel_folders.push_back(*f);
      }
    }
  }
  return in;
}

}  // namespace tether::tools
