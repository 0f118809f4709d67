// tools: the facts `tether doctor` judges (tools/doctor_checks.h): kernel
// features, resource limits, capabilities, /dev/shm and CPUs, gathered from
// injectable /proc, /sys and shm paths so tests can use a fake tree.
#ifndef TETHER_TOOLS_DOCTOR_INPUTS_H_
#define TETHER_TOOLS_DOCTOR_INPUTS_H_

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "loop/kernel_probe.h"

namespace tether::tools {

// Where the facts come from. Tests point these at a fake tree.
struct DoctorOptions {
  // Reads <proc_root>/self/status (CapEff), <proc_root>/self/limits and
  // <proc_root>/sys/kernel/io_uring_disabled.
  std::string proc_root = "/proc";
  // Reads <sys_root>/kernel/realtime and <sys_root>/devices/system/cpu/
  // {online,isolated,cpuN/cpufreq/scaling_governor}.
  std::string sys_root = "/sys";
  // The directory channels live under (statvfs, access).
  std::string shm_path = "/dev/shm";
  // Reads <etc_root>/systemd/logind.conf and logind.conf.d/*.conf.
  std::string etc_root = "/etc";
  // The tether root whose instance folders are checked for other users.
  std::string tether_root = "/dev/shm/tether";
  // Whether large channel files made there get huge pages: builds and drops
  // a 2 MiB unnamed file there (shm::Channel::ProbeHugePages).
  bool probe_huge_pages = true;
};

// systemd-logind's RemoveIPC, as its config files set it.
struct LogindFacts {
  bool present = false;  // <etc>/systemd/logind.conf or its .d folder exists
  // The effective setting (the last file that sets it wins), nullopt when
  // no file sets it (systemd's default is yes).
  std::optional<bool> remove_ipc;
  std::string source;  // "file:line" of the effective setting
};

// A folder channels live in (the tether root itself, then each instance).
struct ChannelFolderFacts {
  std::string path;
  uint32_t mode = 0;  // permission bits incl. setgid/sticky
  std::string owner;
  std::string group;
  bool is_root = false;  // the tether root, not an instance
};

inline constexpr uint64_t kUnlimited = std::numeric_limits<uint64_t>::max();

// A soft/hard resource limit as /proc/self/limits shows it.
struct ResourceLimit {
  uint64_t soft = 0;  // kUnlimited for "unlimited".
  uint64_t hard = 0;
};

struct ShmFacts {
  std::string path;
  bool exists = false;  // A directory.
  bool writable = false;
  bool tmpfs = false;
  uint64_t size_bytes = 0;
  uint64_t free_bytes = 0;  // Available to this (unprivileged) user.
  // The stack instances under the tether root (root_path) and the bytes
  // their channel files take (allocated blocks), largest first.
  std::vector<std::pair<std::string, uint64_t>> instances;
  // The filesystem the tether root is on (its mount point and type, from
  // <proc_root>/self/mountinfo through shm::FindMount) and its tmpfs
  // `huge=` option ("never" when a tmpfs has none; empty when unknown or
  // not a tmpfs).
  std::string root_mount;
  std::string root_fstype;
  std::string root_huge;
  std::string root_path;  // the tether root those describe
  // <sys_root>/kernel/mm/transparent_hugepage/shmem_enabled's chosen value
  // ("never", "deny", "force", ...); empty when the kernel has no THP.
  std::string thp_shmem;
  // shm::Channel::ProbeHugePages on the root (or the nearest folder above
  // it that exists): 0 when tether gives large channel files huge pages
  // itself, else the errno; -1 when not probed.
  int collapse_errno = -1;
};


// Everything the checks judge. Plain data: tests build it by hand.
struct DoctorInputs {
  loop::KernelFeatures kernel;
  std::optional<ResourceLimit> rtprio;
  std::optional<ResourceLimit> memlock;
  std::optional<uint64_t> cap_effective;  // nullopt if unreadable.
  std::string user;                       // For the limits.conf fix.
  ShmFacts shm;
  int online_cpus = 0;             // 0 if unknown.
  std::vector<int> isolated_cpus;  // From .../cpu/isolated; empty if none.
  // "cpuN: governor" for each online CPU with cpufreq; empty without cpufreq.
  std::vector<std::pair<int, std::string>> governors;
  LogindFacts logind;
  // The tether root (first, when it exists) and its instance folders.
  std::vector<ChannelFolderFacts> channel_folders;
};

// Reads the facts: probes the kernel (loop::ProbeKernel), reads the files
// and statvfs's the shm path under `options`. Missing files become absent
// facts, never errors. Main thread; not RT-safe; makes syscalls, allocates.
DoctorInputs GatherDoctorInputs(const DoctorOptions& options);

// The kernel release for messages: "(unknown)" when it was not found.
// Any thread; allocates.
std::string KernelReleaseText(const DoctorInputs& inputs);

// Parses a CPU list such as "0-3,8,10-11" ("" is empty); nullopt if
// malformed. Any thread; not RT-safe (allocates).
std::optional<std::vector<int>> ParseCpuList(std::string_view text);

}  // namespace tether::tools

#endif  // TETHER_TOOLS_DOCTOR_INPUTS_H_
