// shm: which filesystem a path is on, from /proc/self/mountinfo — for error
// messages that name the mount to grow (a full tmpfs) and for `tether
// doctor`'s page-size advice. Setup and error paths only: reads a file and
// allocates; any thread.
#ifndef TETHER_SHM_MOUNTS_H_
#define TETHER_SHM_MOUNTS_H_

#include <optional>
#include <string>
#include <string_view>

namespace tether::shm {

struct MountFacts {
  std::string point;   // the mount point, e.g. "/dev/shm"
  std::string fstype;  // e.g. "tmpfs"
  // A tmpfs's huge= option ("never" when it has none); empty otherwise.
  std::string huge;
};

// The mount holding `path` (absolute, resolved) in a mountinfo(5) text: the
// longest mount point that is `path` or a folder above it; of equal ones the
// last (mounted on top). nullopt when no line matches. Pure: tests pass
// their own text; malformed lines are skipped.
std::optional<MountFacts> FindMount(std::string_view mountinfo,
                                    const std::string& path);

// The same for this process's mounts (reads /proc/self/mountinfo; `path`
// is resolved as far as it exists). nullopt when that file is unreadable.
std::optional<MountFacts> MountOf(const std::string& path);

}  // namespace tether::shm

#endif  // TETHER_SHM_MOUNTS_H_
