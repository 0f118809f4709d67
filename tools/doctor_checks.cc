#include "tools/doctor_checks.h"

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace tether::tools {
namespace {

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

std::string Release(const DoctorInputs& in) { return KernelReleaseText(in); }

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

// The tether root the facts describe (the default one when unset).
std::string TetherRoot(const ShmFacts& s) {
  return s.root_path.empty() ? "/dev/shm/tether" : s.root_path;
}

CheckResult CheckShm(const DoctorInputs& in) {
  const ShmFacts& s = in.shm;
  const std::string root = TetherRoot(s);
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
  std::string sizes =
      FormatBytes(s.size_bytes) + ", " + FormatBytes(s.free_bytes) + " free";
  if (!s.instances.empty()) {
    uint64_t total = 0;
    std::string each;
    for (const auto& [name, bytes] : s.instances) {
      total += bytes;
      if (each.size() < 160) {
        each += (each.empty() ? "" : ", ") + name + " " + FormatBytes(bytes);
      }
    }
    sizes += "; " + std::to_string(s.instances.size()) + " stack instance" +
             (s.instances.size() == 1 ? "" : "s") + " under " + root +
             " use " + FormatBytes(total) + " (" + each + ")";
  }
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
            ", or remove stale stacks under " + root +
            " (tether clean --root " + root + " --instance NAME)");
  }
  if (!s.instances.empty() && s.instances.front().second > s.free_bytes) {
    return Result(
        "dev_shm", title, Verdict::kWarn,
        "tmpfs, " + sizes + ": another stack as large as \"" +
            s.instances.front().first + "\" would not fit",
        "mount -o remount,size=" +
            std::to_string(
                (s.size_bytes + 2 * s.instances.front().second) / (1 << 20) + 1) +
            "M " +
            s.path + " (Docker: --shm-size), or tether clean --instance NAME "
            "for stacks no longer running");
  }
  return Result("dev_shm", title, Verdict::kOk, "tmpfs, " + sizes);
}

CheckResult CheckHugePages(const DoctorInputs& in) {
  const ShmFacts& s = in.shm;
  const std::string title = "pages of channel files (large messages)";
  if (s.root_mount.empty()) {
    return Result("huge_pages", title, Verdict::kOk,
                  "the mount holding the channel root is unknown (no "
                  "/proc/self/mountinfo)");
  }
  const std::string where = s.root_fstype + " at " + s.root_mount;
  if (s.root_fstype != "tmpfs") {
    return Result("huge_pages", title, Verdict::kOk,
                  "channel files are on " + where);
  }
  if (s.thp_shmem.empty()) {
    return Result("huge_pages", title, Verdict::kOk,
                  where + " has 4 KiB pages: this kernel has no transparent "
                  "huge pages");
  }
  if (s.thp_shmem == "deny") {
    return Result("huge_pages", title, Verdict::kOk,
                  where + " has 4 KiB pages: transparent_hugepage/"
                  "shmem_enabled is deny, which overrides every tmpfs's huge= "
                  "option");
  }
  if (s.thp_shmem == "force" || s.root_huge == "within_size" ||
      s.root_huge == "always") {
    std::string detail =
        where + " gives channel files 2 MiB pages where they span them (" +
        (s.thp_shmem == "force" ? "shmem_enabled is force"
                                : "huge=" + s.root_huge) +
        "), so large messages (images, point clouds) do not miss the TLB";
    if (s.root_huge == "always" || s.thp_shmem == "force") {
      detail += "; small channel files get a 2 MiB page each too "
                "(huge=within_size avoids that)";
    }
    return Result("huge_pages", title, Verdict::kOk, detail);
  }
  const std::string root = TetherRoot(s);
  if (s.collapse_errno == 0) {
    return Result(
        "huge_pages", title, Verdict::kOk,
        where + " has 4 KiB pages (huge=" + s.root_huge + "), and tether "
        "gives channel files of 2 MiB or more huge pages itself "
        "(MADV_COLLAPSE works here), so large messages (images, point "
        "clouds) do not miss the TLB");
  }
  std::string detail =
      where + " has 4 KiB pages (huge=" + s.root_huge + ")" +
      (s.collapse_errno > 0
           ? std::string(", and tether cannot give channel files huge pages "
                         "itself here (MADV_COLLAPSE: ") +
                 std::strerror(s.collapse_errno) +
                 (s.collapse_errno == EINVAL ? "; it needs Linux 6.1" : "") +
                 ")"
           : std::string()) +
      ": right for "
      "control messages. A channel of large messages cycles through "
      "queueDepth + 1 slots or more, whose 4 KiB pages outgrow the TLB: "
      "page walks then take a large share of a 1 MiB message's latency. For "
      "messages of 256 KiB and more, stop the stacks using " + root +
      " and mount a tmpfs with huge pages over it: mount -t tmpfs -o "
      "huge=within_size,mode=1777,size=2G tmpfs " + root +
      " (docs/large-messages.md)";
  if (s.root_huge == "advise") {
    detail += "; huge=advise does not help: channel files are allocated "
              "before they are mapped";
  }
  return Result("huge_pages", title, Verdict::kOk, detail);
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

}  // namespace

namespace {

CheckResult CheckRemoveIpc(const DoctorInputs& in) {
  const std::string title = "systemd-logind RemoveIPC";
  const LogindFacts& l = in.logind;
  if (!l.present) {
    return Result("logind_remove_ipc", title, Verdict::kOk,
                  "no systemd-logind config (logind is not managing logins)");
  }
  const std::string fix =
      "printf '[Login]\\nRemoveIPC=no\\n' > "
      "/etc/systemd/logind.conf.d/tether.conf && systemctl restart "
      "systemd-logind; or run the stack as a system user (uid below 1000, "
      "which logind leaves alone)";
  if (!l.remove_ipc.has_value()) {
    return Result("logind_remove_ipc", title, Verdict::kWarn,
                  "RemoveIPC is not set, and systemd's default is yes: when a "
                  "non-system user's last login session ends, logind deletes "
                  "the files that user owns in /dev/shm, so channels created "
                  "by a stack run as a normal user vanish under it",
                  fix);
  }
  if (*l.remove_ipc) {
    return Result("logind_remove_ipc", title, Verdict::kWarn,
                  "RemoveIPC=yes (" + l.source +
                      "): when a non-system user's last login session ends, "
                      "logind deletes the files that user owns in /dev/shm, "
                      "so channels of a stack run as a normal user vanish "
                      "under it",
                  fix);
  }
  return Result("logind_remove_ipc", title, Verdict::kOk,
                "RemoveIPC=no (" + l.source + ")");
}

std::string OctalMode(uint32_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "%04o", mode);
  return buf;
}

CheckResult CheckChannelFolders(const DoctorInputs& in) {
  const std::string title = "channel folders (other users of a stack)";
  if (in.channel_folders.empty()) {
    return Result("channel_folders", title, Verdict::kOk,
                  "no tether root yet (created with the first channel)");
  }
  std::vector<std::string> problems, fixes;
  for (const ChannelFolderFacts& f : in.channel_folders) {
    const std::string what = f.path + " (mode " + OctalMode(f.mode) +
                             ", owner " + f.owner + ", group " + f.group + ")";
    if (f.is_root) {
      if ((f.mode & 0001) == 0) {
        problems.push_back(what + ": users other than " + f.owner +
                           " and group " + f.group +
                           " cannot reach any instance in it");
        fixes.push_back("chmod 1777 " + f.path +
                        " (like /dev/shm: anyone may add an instance, nobody "
                        "may remove another's)");
      }
      continue;
    }
    if ((f.mode & 0011) == 0) {
      problems.push_back(what + ": only " + f.owner +
                         " can enter it, so a stack's nodes or tools running "
                         "as other users cannot open its channels");
      fixes.push_back("give the stack's channels a group (\"group\" in the "
                      "stack config; tether creates the folder with it), or "
                      "chgrp GROUP " + f.path + " && chmod 2750 " + f.path);
    }
    if ((f.mode & 01000) != 0) {
      problems.push_back(what + ": the sticky bit stops the group's users "
                         "removing each other's leftover channel files");
      fixes.push_back("chmod -t " + f.path);
    }
    if ((f.mode & 0002) != 0 && (f.mode & 01000) == 0) {
      problems.push_back(what + ": every user may replace its channel files "
                         "(tether refuses to create channels there)");
      fixes.push_back("chmod o-w " + f.path);
    }
  }
  if (problems.empty()) {
    return Result("channel_folders", title, Verdict::kOk,
                  std::to_string(in.channel_folders.size()) +
                      " folder(s); other users of their groups can enter them");
  }
  std::string detail, fix;
  for (size_t i = 0; i < problems.size(); ++i) {
    detail += (i ? "; " : "") + problems[i];
    fix += (i ? "; " : "") + fixes[i];
  }
  return Result("channel_folders", title, Verdict::kWarn, detail, fix);
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

std::vector<CheckResult> RunDoctorChecks(const DoctorInputs& inputs) {
  return {
      CheckIoUring(inputs),     CheckFutexOps(inputs),  CheckRingSetup(inputs),
      CheckWakeBackend(inputs), CheckPreemptRt(inputs), CheckRtprio(inputs),
      CheckMemlock(inputs),     CheckShm(inputs),       CheckHugePages(inputs),
      CheckCpus(inputs),
      CheckGovernor(inputs),    CheckRemoveIpc(inputs),
      CheckChannelFolders(inputs),
  };
}

bool AnyFailed(const std::vector<CheckResult>& results) {
  for (const CheckResult& r : results) {
    if (r.verdict == Verdict::kFail) return true;
  }
  return false;
}

}  // namespace tether::tools
