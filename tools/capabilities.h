// tools: this process's Linux capabilities, as /proc/<pid>/status shows them
// (the CapEff line), for the checks that depend on privileges: the doctor's
// real-time limits and the launcher's user switch. One parser for both.
#ifndef TETHER_TOOLS_CAPABILITIES_H_
#define TETHER_TOOLS_CAPABILITIES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tether::tools {

// Capability bit numbers (<linux/capability.h>).
inline constexpr int kCapSetgid = 6;
inline constexpr int kCapSetuid = 7;
inline constexpr int kCapIpcLock = 14;
inline constexpr int kCapSysNice = 23;

// The effective set from the text of a /proc/<pid>/status file: the hex
// value of its "CapEff:" line. nullopt if there is no such line or its value
// is not hex. Any thread; does not allocate.
std::optional<uint64_t> ParseCapEff(std::string_view proc_status);

// ParseCapEff of <proc_root>/self/status; nullopt if it cannot be read.
// Any thread; reads a file; allocates.
std::optional<uint64_t> ReadEffectiveCapabilities(
    const std::string& proc_root = "/proc");

// True if bit `cap` is set in `caps`. Any thread; RT-safe.
inline bool HasCapability(uint64_t caps, int cap) {
  return cap >= 0 && cap < 64 && ((caps >> cap) & 1) != 0;
}

}  // namespace tether::tools

#endif  // TETHER_TOOLS_CAPABILITIES_H_
