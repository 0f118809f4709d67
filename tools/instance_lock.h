// tools: at most one launcher per stack instance. A launcher holds an
// exclusive flock on <root>/<instance>/.launcher for its whole life (the
// kernel drops it when the process dies, however it dies), so a second
// launcher of the same instance is refused whether or not either publishes
// the status channel, and `tether clean` can tell a running stack's folder
// from a dead one's.
//
// Main thread of the launcher or a tool; blocks only on the filesystem
// (never waits for the lock); not RT-safe.
#ifndef TETHER_TOOLS_INSTANCE_LOCK_H_
#define TETHER_TOOLS_INSTANCE_LOCK_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "shm/channel.h"
#include "tools/node_process.h"

namespace tether::tools {

// The lock file's name in the instance folder (hidden: not a channel).
inline constexpr char kInstanceLockFile[] = ".launcher";

class InstanceLock {
 public:
  // Takes the lock of options.root/options.instance, creating the folders
  // with shm::Channel::MakeInstanceFolder (so give it the stack's folder
  // options: transport::ChannelSet::FolderOptions) and the lock file (0664)
  // as needed; a failure leaves nothing it made. FailedPrecondition when
  // another process holds it, naming its pid when /proc/locks shows it; the
  // errno's status when the folder or file cannot be made (e.g.
  // PermissionDenied).
  static absl::StatusOr<InstanceLock> Acquire(
      const shm::ChannelOptions& options);

  // The pid holding the lock of that instance, if /proc/locks shows one
  // (0 when it is a process /proc cannot name). Never takes the lock.
  static std::optional<pid_t> Holder(const shm::ChannelOptions& options);

  // For `tether clean`: removes the lock file if no launcher holds it (true;
  // also when there is none), taking the lock while it unlinks so a launcher
  // starting meanwhile either keeps it or retries on a new file. False
  // while a launcher runs the instance.
  static absl::StatusOr<bool> RemoveIfUnused(
      const shm::ChannelOptions& options);

  // For a launcher whose setup failed: removes the lock file, and the
  // folders Acquire created if they are empty, then releases the lock.
  // Nothing of this launcher is left behind when it created nothing else.
  void Abandon();

  InstanceLock(InstanceLock&&) = default;
  InstanceLock& operator=(InstanceLock&&) = default;

  const std::string& path() const { return path_; }

 private:
  InstanceLock(Fd fd, std::string path, std::vector<std::string> made_folders)
      : fd_(std::move(fd)),
        path_(std::move(path)),
        made_folders_(std::move(made_folders)) {}
  Fd fd_;
  std::string path_;
  // The folders Acquire made, outermost first (none: they existed).
  std::vector<std::string> made_folders_;
};

}  // namespace tether::tools

#endif  // TETHER_TOOLS_INSTANCE_LOCK_H_
