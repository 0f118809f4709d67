#include "tools/doctor.h"

#include <pwd.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "tools/json_writer.h"

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

std::string FormatBytes(uint64_t bytes) {
  if (bytes == kUnlimited) return "unlimited";
  char buf[32];
  constexpr uint64_t kKiB = 1024, kMiB = kKiB << 10, kGiB = kMiB << 10;
  if (bytes >= kGiB) {
    std::snprintf(buf, sizeof(buf), "%.1f GiB", double(bytes) / double(kGiB));
  } else if (bytes >= kMiB) {
    std::snprintf(buf, sizeof(buf), "%.1f MiB", double(bytes) / double(kMiB));
  } else if (bytes >= kKiB) {
    std::snprintf(buf, sizeof(buf), "%.1f KiB", double(bytes) / double(kKiB));
  } else {
    std::snprintf(buf, sizeof(buf), "%" PRIu64 " bytes", bytes);
  }
  return buf;
}

std::string FormatLimit(uint64_t value) {
  return value == kUnlimited ? "unlimited" : std::to_string(value);
}

std::string FormatCpuList(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(cpus[i]);
    if (j > i) out += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

bool HasCap(const DoctorInputs& in, int cap) {
  return in.cap_effective.has_value() && HasCapability(*in.cap_effective, cap);
}

std::string UserOrPlaceholder(const DoctorInputs& in) {
  return in.user.empty() ? "<user>" : in.user;
}

std::string Release(const DoctorInputs& in) {
  return in.kernel.kernel_release.empty() ? "(unknown)"
                                          : in.kernel.kernel_release;
}

CheckResult Result(std::string id, std::string title, Verdict verdict,
                   std::string detail, std::string fix = "") {
  return CheckResult{std::move(id), std::move(title), verdict,
                     std::move(detail), std::move(fix)};
}

CheckResult CheckIoUring(const DoctorInputs& in) {
  const loop::KernelFeatures& k = in.kernel;
  const std::string title = "io_uring enabled";
  if (!k.io_uring) {
    std::string fix;
    const int sysctl = k.io_uring_disabled_sysctl.value_or(0);
    if (sysctl == 2) {
      fix =
          "sysctl -w kernel.io_uring_disabled=0, and put "
          "'kernel.io_uring_disabled = 0' in /etc/sysctl.d/99-tether.conf";
    } else if (sysctl == 1) {
      fix = "add " + UserOrPlaceholder(in) +
            " to the group whose id is in /proc/sys/kernel/io_uring_group, "
            "or sysctl -w kernel.io_uring_disabled=0";
    } else if (k.io_uring_setup_errno == ENOMEM) {
      fix = "raise RLIMIT_MEMLOCK ('" + UserOrPlaceholder(in) +
            " - memlock unlimited' in /etc/security/limits.conf)";
    } else {
      fix =
          "allow io_uring_setup, io_uring_enter and io_uring_register in "
          "the seccomp profile (container runtime), or boot a kernel built "
          "with CONFIG_IO_URING";
    }
    return Result("io_uring", title, Verdict::kFail,
                  std::string(loop::IoUringStatus(k).message()), fix);
  }
  if (k.io_uring_disabled_sysctl == 1) {
    return Result(
        "io_uring", title, Verdict::kWarn,
        "io_uring works for this process, but kernel.io_uring_disabled=1 "
        "limits it to root (CAP_SYS_ADMIN) and kernel.io_uring_group: nodes "
        "running as other users cannot create rings",
        "sysctl -w kernel.io_uring_disabled=0, or add the node users to the "
        "group in /proc/sys/kernel/io_uring_group");
  }
  std::string detail = "io_uring_setup works";
  if (k.io_uring_disabled_sysctl.has_value()) {
    detail += " (kernel.io_uring_disabled=" +
              std::to_string(*k.io_uring_disabled_sysctl) + ")";
  }
  return Result("io_uring", title, Verdict::kOk, detail);
}

CheckResult CheckFutexOps(const DoctorInputs& in) {
  const loop::KernelFeatures& k = in.kernel;
  const std::string title = "io_uring futex ops (Linux >= 6.7)";
  if (!k.io_uring) {
    return Result("io_uring_futex", title, Verdict::kFail,
                  "not probed: io_uring is unavailable",
                  "fix the io_uring check first");
  }
  if (k.op_futex_wait && k.op_futex_wake) {
    return Result("io_uring_futex", title, Verdict::kOk,
                  std::string("FUTEX_WAIT and FUTEX_WAKE supported") +
                      (k.op_futex_waitv ? ", FUTEX_WAITV too" : ""));
  }
  return Result(
      "io_uring_futex", title, Verdict::kWarn,
      "kernel " + Release(in) +
          " lacks IORING_OP_FUTEX_WAIT: loops fall back to a futex_waitv "
          "thread (one more thread hop per wake)",
      "boot Linux >= 6.7 (Debian 12: linux-image-amd64 or "
      "linux-image-rt-amd64 from bookworm-backports)");
}

CheckResult CheckRingSetup(const DoctorInputs& in) {
  const loop::KernelFeatures& k = in.kernel;
  const std::string title =
      "ring setup (SINGLE_ISSUER, DEFER_TASKRUN, registered ring fd)";
  if (!k.io_uring) {
    return Result("ring_setup", title, Verdict::kFail,
                  "not probed: io_uring is unavailable",
                  "fix the io_uring check first");
  }
  std::string missing;
  const auto note = [&](bool ok, const char* what) {
    if (ok) return;
    if (!missing.empty()) missing += ", ";
    missing += what;
  };
  note(k.setup_single_issuer, "SINGLE_ISSUER (6.0)");
  note(k.setup_defer_taskrun, "DEFER_TASKRUN (6.1)");
  note(k.register_ring_fd, "registered ring fd (5.18)");
  if (missing.empty()) {
    return Result("ring_setup", title, Verdict::kOk,
                  "all accepted: completions run in the loop thread only");
  }
  return Result("ring_setup", title, Verdict::kWarn,
                "not accepted: " + missing +
                    "; loops run without them (more task-work interrupts)",
                "boot Linux >= 6.1");
}

CheckResult CheckWakeBackend(const DoctorInputs& in) {
  const std::string title = "wake backend";
  absl::StatusOr<loop::WakeBackendChoice> choice =
      loop::ChooseWakeBackend(in.kernel);
  if (!choice.ok()) {
    return Result("wake_backend", title, Verdict::kFail,
                  std::string(choice.status().message()),
                  "see the io_uring checks above");
  }
  return Result("wake_backend", title, Verdict::kOk,
                std::string(loop::WakeBackendName(choice->backend)) + ": " +
                    choice->reason);
}

CheckResult CheckPreemptRt(const DoctorInputs& in) {
  const std::string title = "real-time kernel (PREEMPT_RT)";
  if (in.kernel.preempt_rt) {
    return Result("preempt_rt", title, Verdict::kOk,
                  "kernel " + Release(in) + " is PREEMPT_RT");
  }
  return Result(
      "preempt_rt", title, Verdict::kWarn,
      "kernel " + Release(in) + " is not PREEMPT_RT (" +
          in.kernel.kernel_build +
          "): wake-up and scheduling latency are not bounded; expect "
          "occasional millisecond jitter under load",
      "Debian: apt-get install linux-image-rt-amd64, reboot into it (uname "
      "-v then says PREEMPT_RT). Debian 12's RT kernel is 6.1, which lacks "
      "io_uring futex ops; bookworm-backports has a newer one");
}

CheckResult CheckRtprio(const DoctorInputs& in) {
  const std::string title = "real-time priority (RLIMIT_RTPRIO, CAP_SYS_NICE)";
  const std::string limits_fix =
      "add '" + UserOrPlaceholder(in) +
      " - rtprio 99' to /etc/security/limits.d/tether.conf and log in again "
      "(systemd services: LimitRTPRIO=99), or grant CAP_SYS_NICE";
  const std::string soft =
      in.rtprio ? FormatLimit(in.rtprio->soft) : std::string("unknown");
  if (HasCap(in, kCapSysNice)) {
    return Result("rtprio", title, Verdict::kOk,
                  "CAP_SYS_NICE: SCHED_FIFO at any priority (the RLIMIT_RTPRIO "
                  "soft limit, " +
                      soft + ", does not apply)");
  }
  if (!in.rtprio.has_value()) {
    return Result("rtprio", title, Verdict::kWarn,
                  "could not read RLIMIT_RTPRIO from /proc/self/limits",
                  limits_fix);
  }
  if (in.rtprio->soft == 0) {
    return Result("rtprio", title, Verdict::kWarn,
                  "RLIMIT_RTPRIO is 0 and no CAP_SYS_NICE: real-time nodes "
                  "cannot switch to SCHED_FIFO",
                  limits_fix);
  }
  return Result("rtprio", title, Verdict::kOk,
                "RLIMIT_RTPRIO allows SCHED_FIFO up to priority " + soft);
}

CheckResult CheckMemlock(const DoctorInputs& in) {
  const std::string title = "locked memory (RLIMIT_MEMLOCK, CAP_IPC_LOCK)";
  const std::string soft =
      in.memlock ? FormatBytes(in.memlock->soft) : std::string("unknown");
  if (HasCap(in, kCapIpcLock)) {
    return Result("memlock", title, Verdict::kOk,
                  "CAP_IPC_LOCK: mlockall is not limited (the RLIMIT_MEMLOCK "
                  "soft limit, " +
                      soft + ", does not apply)");
  }
  const std::string fix =
      "add '" + UserOrPlaceholder(in) +
      " - memlock unlimited' to /etc/security/limits.d/tether.conf and log "
      "in again (systemd services: LimitMEMLOCK=infinity), or grant "
      "CAP_IPC_LOCK";
  if (!in.memlock.has_value()) {
    return Result("memlock", title, Verdict::kWarn,
                  "could not read RLIMIT_MEMLOCK from /proc/self/limits", fix);
  }
  if (in.memlock->soft < kMinMemlockBytes) {
    return Result("memlock", title, Verdict::kWarn,
                  "RLIMIT_MEMLOCK is " + soft +
                      " and no CAP_IPC_LOCK: mlockall() in a real-time node "
                      "fails once its memory and mapped channels exceed that",
                  fix);
  }
  return Result("memlock", title, Verdict::kOk, "RLIMIT_MEMLOCK is " + soft);
}

CheckResult CheckShm(const DoctorInputs& in) {
  const ShmFacts& s = in.shm;
  const std::string title = s.path + " (channel files)";
  if (!s.exists) {
    return Result("dev_shm", title, Verdict::kFail,
                  s.path + " does not exist: channels cannot be created",
                  "mount -t tmpfs -o mode=1777 tmpfs " + s.path +
                      " (and add it to /etc/fstab)");
  }
  if (!s.writable) {
    return Result("dev_shm", title, Verdict::kFail,
                  s.path + " is not writable by this user",
                  "chmod 1777 " + s.path);
  }
  const std::string sizes =
      FormatBytes(s.size_bytes) + ", " + FormatBytes(s.free_bytes) + " free";
  if (!s.tmpfs) {
    return Result("dev_shm", title, Verdict::kWarn,
                  s.path + " is not a tmpfs (" + sizes +
                      "): channel pages may be written back to disk",
                  "mount -t tmpfs -o mode=1777 tmpfs " + s.path);
  }
  if (s.free_bytes < kMinShmFreeBytes) {
    return Result(
        "dev_shm", title, Verdict::kWarn,
        "tmpfs, " + sizes + ": channels are sized up front and may not fit",
        "mount -o remount,size=2G " + s.path +
            ", or remove stale channel files under " + s.path + "/tether");
  }
  return Result("dev_shm", title, Verdict::kOk, "tmpfs, " + sizes);
}

CheckResult CheckCpus(const DoctorInputs& in) {
  const std::string title = "CPUs and isolation";
  const std::string count = in.online_cpus > 0
                                ? std::to_string(in.online_cpus) + " online"
                                : std::string("online count unknown");
  if (!in.isolated_cpus.empty()) {
    return Result("cpus", title, Verdict::kOk,
                  count + "; isolated: " + FormatCpuList(in.isolated_cpus) +
                      " (pin real-time nodes there)");
  }
  if (in.online_cpus == 1) {
    return Result("cpus", title, Verdict::kOk,
                  count + "; none isolated (one CPU: nothing to isolate)");
  }
  const std::string last =
      in.online_cpus > 1 ? std::to_string(in.online_cpus - 1) : "N";
  return Result(
      "cpus", title, Verdict::kWarn,
      count +
          "; none isolated: real-time nodes share CPUs with everything "
          "else",
      "add 'isolcpus=" + last + " nohz_full=" + last + " rcu_nocbs=" + last +
          "' to GRUB_CMDLINE_LINUX in /etc/default/grub, run update-grub, "
          "reboot, and pin real-time nodes to those CPUs in the stack config");
}

CheckResult CheckGovernor(const DoctorInputs& in) {
  const std::string title = "CPU frequency governor";
  if (in.governors.empty()) {
    return Result("cpu_governor", title, Verdict::kOk,
                  "no cpufreq interface (a VM, or frequency fixed by "
                  "firmware)");
  }
  std::vector<int> slow;
  std::string names;
  for (const auto& [cpu, governor] : in.governors) {
    if (governor != "performance") {
      slow.push_back(cpu);
      if (names.find(governor) == std::string::npos) {
        names += (names.empty() ? "" : ", ") + governor;
      }
    }
  }
  if (slow.empty()) {
    return Result("cpu_governor", title, Verdict::kOk,
                  "performance on every CPU");
  }
  return Result("cpu_governor", title, Verdict::kWarn,
                "CPUs " + FormatCpuList(slow) + " use " + names +
                    ": frequency changes add wake-up latency",
                "cpupower frequency-set -g performance (Debian package "
                "linux-cpupower)");
}

// Appends `text` wrapped at `width` columns, each line starting with
// `indent`.
void AppendWrapped(std::string& out, std::string_view text, size_t indent,
                   size_t width = 79) {
  size_t column = 0;
  bool line_start = true;
  while (!text.empty()) {
    const size_t space = text.find(' ');
    const std::string_view word = text.substr(0, space);
    text = space == std::string_view::npos ? std::string_view()
                                           : text.substr(space + 1);
    if (word.empty()) continue;
    if (!line_start && column + 1 + word.size() > width) {
      out += "\n";
      line_start = true;
    }
    if (line_start) {
      out.append(indent, ' ');
      column = indent;
      line_start = false;
    } else {
      out += " ";
      ++column;
    }
    out += word;
    column += word.size();
  }
  out += "\n";
}

}  // namespace

std::string_view VerdictName(Verdict verdict) {
  switch (verdict) {
    case Verdict::kOk:
      return "OK";
    case Verdict::kWarn:
      return "WARN";
    case Verdict::kFail:
      return "FAIL";
  }
  return "FAIL";
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

std::vector<CheckResult> RunDoctorChecks(const DoctorInputs& inputs) {
  return {
      CheckIoUring(inputs),     CheckFutexOps(inputs),  CheckRingSetup(inputs),
      CheckWakeBackend(inputs), CheckPreemptRt(inputs), CheckRtprio(inputs),
      CheckMemlock(inputs),     CheckShm(inputs),       CheckCpus(inputs),
      CheckGovernor(inputs),
  };
}

bool AnyFailed(const std::vector<CheckResult>& results) {
  for (const CheckResult& r : results) {
    if (r.verdict == Verdict::kFail) return true;
  }
  return false;
}

std::string FormatDoctorText(const DoctorInputs& inputs,
                             const std::vector<CheckResult>& results) {
  std::string out = "tether doctor: Linux " + Release(inputs) + ", " +
                    std::to_string(inputs.online_cpus) + " CPUs\n";
  int counts[3] = {0, 0, 0};
  for (const CheckResult& r : results) {
    ++counts[static_cast<int>(r.verdict)];
    std::string head(VerdictName(r.verdict));
    head.resize(6, ' ');
    out += "\n" + head + r.title + "\n";
    AppendWrapped(out, r.detail, 6);
    if (!r.fix.empty()) AppendWrapped(out, "fix: " + r.fix, 6);
  }
  out += "\n" + std::to_string(counts[0]) + " OK, " +
         std::to_string(counts[1]) + " WARN, " + std::to_string(counts[2]) +
         " FAIL\n";
  return out;
}

std::string FormatDoctorJson(const DoctorInputs& inputs,
                             const std::vector<CheckResult>& results) {
  int counts[3] = {0, 0, 0};
  for (const CheckResult& r : results) ++counts[static_cast<int>(r.verdict)];
  const loop::KernelFeatures& k = inputs.kernel;
  absl::StatusOr<loop::WakeBackendChoice> backend = loop::ChooseWakeBackend(k);

  JsonWriter json;
  json.BeginObject();
  json.Key("ok").Bool(counts[2] == 0);
  json.Key("counts").BeginObject();
  json.Key("ok").Int(counts[0]);
  json.Key("warn").Int(counts[1]);
  json.Key("fail").Int(counts[2]);
  json.EndObject();
  json.Key("wake_backend");
  if (backend.ok()) {
    json.String(loop::WakeBackendName(backend->backend));
  } else {
    json.Null();
  }
  json.Key("kernel").BeginObject();
  json.Key("release").String(k.kernel_release);
  json.Key("build").String(k.kernel_build);
  json.Key("preempt_rt").Bool(k.preempt_rt);
  json.Key("io_uring").Bool(k.io_uring);
  json.Key("io_uring_disabled_sysctl");
  if (k.io_uring_disabled_sysctl) {
    json.Int(*k.io_uring_disabled_sysctl);
  } else {
    json.Null();
  }
  json.Key("setup_single_issuer").Bool(k.setup_single_issuer);
  json.Key("setup_defer_taskrun").Bool(k.setup_defer_taskrun);
  json.Key("register_ring_fd").Bool(k.register_ring_fd);
  json.Key("op_futex_wait").Bool(k.op_futex_wait);
  json.Key("op_futex_wake").Bool(k.op_futex_wake);
  json.Key("op_futex_waitv").Bool(k.op_futex_waitv);
  json.Key("futex_waitv_syscall").Bool(k.futex_waitv_syscall);
  json.EndObject();
  json.Key("checks").BeginArray();
  for (const CheckResult& r : results) {
    json.BeginObject();
    json.Key("id").String(r.id);
    json.Key("title").String(r.title);
    json.Key("verdict").String(VerdictName(r.verdict));
    json.Key("detail").String(r.detail);
    json.Key("fix").String(r.fix);
    json.EndObject();
  }
  json.EndArray();
  json.EndObject();
  return json.str();
}

}  // namespace tether::tools
