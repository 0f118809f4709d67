// loop: the measured verdict on this boot's io_uring CQ-wait timer for
// real-time waiters (rt_probe.h measures it; `tether doctor --rt-probe`
// runs that and stores the verdict here), kept in a small file keyed by the
// boot id so that every loop started later in the same boot picks its
// deadline mode (DeadlineTimer::kAuto, make_wake_port.h) from a
// measurement instead of assuming. Plain file I/O, no measuring here.
//
// Why a measurement: on PREEMPT_RT, hrtimers not marked HARD expire in the
// ktimers thread (SCHED_FIFO 1), so a real-time loop's io_uring wait timeout
// fires only when no other real-time work runs on its CPU. Linux stable
// 6.12.115 ("io_uring/wait: wake real-time waiters from hard interrupt
// context") made that timer hard for RT waiters; kernels with and without
// the fix are in the field and the version alone does not say (vendor
// kernels backport), so tether measures.
//
// The cache file, one `key=value` per line ('#' lines are comments):
//   boot_id=<contents of /proc/sys/kernel/random/boot_id>
//   kernel=<uname -r>
//   ring_wait=hard|soft|inconclusive
//   summary=<one line with the numbers, for people>
// A file is trusted only if it is a regular file owned by root or by the
// reading user and writable by no one else (another user must not be able
// to switch a real-time loop to soft timers), and its boot id and kernel
// match the running ones.
#ifndef TETHER_LOOP_RT_PROBE_CACHE_H_
#define TETHER_LOOP_RT_PROBE_CACHE_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace tether::loop {

// How the io_uring CQ-wait timeout behaves for a real-time waiter.
enum class RingWaitTimer {
  // It fired on time while other real-time work ran on the waiter's CPU,
  // as a hard timer (clock_nanosleep) does: the loop may wait in io_uring.
  kHard,
  // It was late or missed deadlines that clock_nanosleep kept: the loop
  // must time its deadlines through a hard-timer path (DeadlineTimer::kHard).
  kSoft,
  // The floor itself missed too much (an overloaded CPU) to tell; treated
  // as kSoft by the loop (the safe mode).
  kInconclusive,
};

// "hard", "soft", "inconclusive". Any thread; RT-safe.
std::string_view RingWaitTimerName(RingWaitTimer timer);
// Inverse of RingWaitTimerName(); nullopt for anything else. Any thread.
std::optional<RingWaitTimer> ParseRingWaitTimer(std::string_view name);

// One probe verdict as stored.
struct RtProbeRecord {
  std::string boot_id;
  std::string kernel_release;
  RingWaitTimer ring_wait = RingWaitTimer::kInconclusive;
  std::string summary;  // one line; newlines are replaced by spaces
  // Where it was read from (ReadRtProbeCache), for messages.
  std::string path;
};

// Where the verdict is kept, in the order tried: /run/tether/rt-probe
// (root), then /dev/shm/tether-rt-probe.<euid> (any user; /run is
// root-only on most systems). Any thread; not RT-safe (allocates).
std::vector<std::string> DefaultRtProbeCachePaths();

// This boot's id (/proc/sys/kernel/random/boot_id under `proc_root`),
// trimmed; empty if unreadable. Any thread; not RT-safe.
std::string ReadBootId(const std::string& proc_root = "/proc");

// Writes `record` to the first of `paths` that can be written (creating
// its directory, mode 0755; the file is written to a temporary name with
// mode 0644 and renamed, so readers never see half a file). Returns the
// path written, or the last error naming every path tried.
// Any thread; not RT-safe (file I/O).
absl::Status WriteRtProbeCache(const RtProbeRecord& record,
                               const std::vector<std::string>& paths,
                               std::string* written_path = nullptr);

// The first trusted record among `paths` whose boot id equals `boot_id` and
// kernel equals `kernel_release` (see the file comment for "trusted");
// nullopt when there is none. Never fails: a missing, foreign, stale or
// malformed file is skipped. Any thread; not RT-safe (file I/O).
std::optional<RtProbeRecord> ReadRtProbeCache(
    const std::vector<std::string>& paths, std::string_view boot_id,
    std::string_view kernel_release);

// The file's text for `record` (what WriteRtProbeCache writes), and its
// parse (nullopt when a required key is missing or ring_wait is unknown).
// Any thread; not RT-safe (allocates).
std::string FormatRtProbeRecord(const RtProbeRecord& record);
std::optional<RtProbeRecord> ParseRtProbeRecord(std::string_view text);

}  // namespace tether::loop

#endif  // TETHER_LOOP_RT_PROBE_CACHE_H_
