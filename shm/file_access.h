// shm internal: opening a channel's files with the access this process has,
// and errors that name the real cause of a denial (who this process is, the
// file's mode, owner and group, which directory it cannot enter, what to ask
// for). Part of the queue library; setup only (allocates, reads /etc/group
// through NSS).
#ifndef TETHER_SHM_FILE_ACCESS_H_
#define TETHER_SHM_FILE_ACCESS_H_

#include <sys/types.h>

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tether::shm::internal {

struct OpenedFile {
  int fd = -1;
  bool writable = false;
};

// Opens `path` read-write if this process may write it, else read-only
// (O_NOFOLLOW: a symlink planted in a channel folder is refused).
// NotFound if absent; PermissionDenied from AccessDenied() when it cannot
// even be read. `what` names the file in errors ("channel /a", "the reader
// state of channel /a").
absl::StatusOr<OpenedFile> OpenBestAccess(const std::string& path,
                                          const std::string& what);

// "uid 65534 (nobody), groups nogroup(65534)": who this process is.
std::string DescribeSelf();
// "mode 0640, owner root, group tether": the file as ls -l shows it.
std::string DescribeFile(const std::string& path);
// What to do so this process can `verb` ("read", "write") `path`: join the
// file's group (never group root: then give the stack a group), or have
// the stack's config open it up.
std::string AccessFix(const std::string& path, const std::string& verb);

// PermissionDenied for `verb` on `path`: names the first directory on the
// way that this process cannot enter, or the file with its mode, owner and
// group, who this process is and the fix.
absl::Status AccessDenied(const std::string& path, const std::string& what,
                          const std::string& verb);

// True when this process is in group `gid` (primary or supplementary).
bool InGroup(gid_t gid);

}  // namespace tether::shm::internal

#endif  // TETHER_SHM_FILE_ACCESS_H_
