// tools: `tether clean` as a library — removes the channels of an instance
// that no live process uses, and creators' leftover temporary files.
#ifndef TETHER_TOOLS_CLEAN_H_
#define TETHER_TOOLS_CLEAN_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "shm/channel.h"
#include "tools/arg_parser.h"

namespace tether::tools {

struct CleanEntry {
  std::string name;   // channel name, or file name for a temporary file
  bool removed = false;  // (or would be, with dry_run)
  bool corrupt = false;  // a channel whose memory is corrupt
  // A file that cannot be opened as a channel of this build (another
  // layout, damaged, junk).
  bool unopenable = false;
  std::string reason = {};
};

struct CleanReport {
  std::vector<CleanEntry> entries;
  bool directory_removed = false;  // (or would be, with dry_run)
  std::string directory;
};

// For each channel: opens it (which sweeps registrations of dead
// processes); removes it if no registered publisher, pinning reader or
// waiter is left and no process has it open (shm::Channel::InUse), keeps it
// otherwise. A channel that opens corrupt cannot be swept: it is removed if
// no process registered in it is alive (looked up, shm::Channel::Registered)
// and no process has it open, kept otherwise, and reported as corrupt with
// its finding and the command to run once its users are stopped. A file
// that cannot be opened as a channel (another layout version, damaged, or
// junk) is removed when no process has it mapped: when its header says
// every mapper holds the flock (Channel::LockTellsUse), InUse decides;
// otherwise /proc/*/maps are searched, and when some process's maps are
// unreadable it is kept unless `force`. Temporary files ".<name>.tmp.<pid>.<n>" are removed when their
// creator pid is gone. Other files are kept. Removes the instance directory
// if it ends up empty. `dry_run` changes nothing.
absl::StatusOr<CleanReport> CleanInstance(const shm::ChannelOptions& options,
                                          bool dry_run, bool force = false);
std::string FormatCleanReport(const CleanReport& report, bool dry_run);

ArgParser CleanParser();
int RunCleanCommand(const ParsedArgs& args, std::ostream& out,
                    std::ostream& err);

}  // namespace tether::tools

#endif  // TETHER_TOOLS_CLEAN_H_
