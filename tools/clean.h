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
  std::string reason;
};

struct CleanReport {
  std::vector<CleanEntry> entries;
  bool directory_removed = false;  // (or would be, with dry_run)
  std::string directory;
};

// For each channel: opens it (which sweeps registrations of dead
// processes); removes it if no registered publisher or pinning reader is
// left, keeps it otherwise. Temporary files ".<name>.tmp.<pid>.<n>" are
// removed when their creator pid is gone. Other files are kept. Removes the
// instance directory if it ends up empty. `dry_run` changes nothing.
// Unpinned readers are not registered and do not keep a channel.
absl::StatusOr<CleanReport> CleanInstance(const shm::ChannelOptions& options,
                                          bool dry_run);
std::string FormatCleanReport(const CleanReport& report, bool dry_run);

ArgParser CleanParser();
int RunCleanCommand(const ParsedArgs& args, std::ostream& out,
                    std::ostream& err);

}  // namespace tether::tools

#endif  // TETHER_TOOLS_CLEAN_H_
