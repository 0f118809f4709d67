// shm: process identities stored in shared memory as owner words, and the
// liveness test that lets a survivor reclaim what a dead process held.
#ifndef TETHER_SHM_OWNER_H_
#define TETHER_SHM_OWNER_H_

#include <sys/types.h>

#include <cstdint>

namespace tether::shm {

// An owner word: (process start time in clock ticks, low 32 bits) << 32 | pid.
// The start time beats pid reuse: a new process with a recycled pid has a
// different start time. 0 means "no owner". Pid namespaces are not
// reconciled: processes sharing a channel must share a pid namespace.
using OwnerToken = uint64_t;
inline constexpr OwnerToken kNoOwner = 0;

inline pid_t TokenPid(OwnerToken token) {
  return static_cast<pid_t>(token & 0xffffffffu);
}

// The calling process's token. Reads /proc/self/stat: not RT-safe; callers
// compute it once at setup and keep it. Returns kNoOwner if /proc is absent.
OwnerToken CurrentProcessToken();

// The token of process `pid`, or kNoOwner if it does not exist or is a
// zombie (killed but not yet reaped counts as dead). Reads /proc.
OwnerToken ProcessToken(pid_t pid);

// True when the process named by `token` still runs (same pid, same start
// time, not a zombie). Any thread; reads /proc; not RT-safe.
bool TokenAlive(OwnerToken token);

}  // namespace tether::shm

#endif  // TETHER_SHM_OWNER_H_
