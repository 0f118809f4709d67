#include "transport/channel_set.h"

#include <sys/stat.h>

#include <cerrno>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tether::transport {
namespace {

// The nearest existing folder at or above `path` (the instance folder may
// not exist yet: its filesystem is its parent's).
std::string ExistingFolder(std::filesystem::path path) {
  std::error_code ec;
  while (!path.empty() && !std::filesystem::is_directory(path, ec) &&
         path != path.parent_path()) {
    path = path.parent_path();
  }
  return path.empty() ? "." : path.string();
}

// Refuses, before anything is created, a stack whose new channels together
// do not fit in the free space of the root's filesystem: created one by one,
// the first channels would fill it and the last would fail, leaving a full
// filesystem behind. Each file counts as what it takes there: its size
// rounded up to the filesystem's blocks.
absl::Status CheckStackFits(const shm::ChannelOptions& options,
                            const StackConfig& stack,
                            const SchemaRegistry& schemas) {
  const std::string dir =
      ExistingFolder(std::filesystem::path(options.root) / options.instance);
  const std::optional<shm::FreeSpace> free = shm::FreeSpaceOf(dir);
  if (!free.has_value()) return absl::OkStatus();
  uint64_t needed = 0;
  int new_channels = 0;
  for (config::Channel::Reader c : stack.channels()) {
    absl::StatusOr<uint64_t> bytes =
        ChannelHandle::BytesToCreate(options, c, schemas, free->block_size);
    if (!bytes.ok()) return bytes.status();
    needed += *bytes;
    new_channels += *bytes > 0 ? 1 : 0;
  }
  if (needed <= free->bytes) return absl::OkStatus();
  return shm::NoSpaceError(
      absl::StrCat("the stack (instance ", options.instance, ") has ",
                   new_channels, " new channel", new_channels == 1 ? "" : "s",
                   " that together need"),
      dir, needed);
}

}  // namespace

absl::StatusOr<shm::ChannelOptions> ChannelSet::FolderOptions(
    const shm::ChannelOptions& options, const StackConfig& stack) {
  shm::ChannelOptions folder = options;
  bool first = true;
  for (config::Channel::Reader c : stack.channels()) {
    absl::StatusOr<shm::ChannelOptions> files =
        ChannelHandle::FileOptions(options, c);
    if (!files.ok()) return files.status();
    const mode_t reader_mode = shm::Channel::ReaderModeFor(*files);
    folder.mode = first ? files->mode : folder.mode | files->mode;
    folder.reader_mode =
        first ? reader_mode : *folder.reader_mode | reader_mode;
    if (!folder.group.has_value()) folder.group = files->group;
    first = false;
  }
  return folder;
}

absl::StatusOr<std::unique_ptr<ChannelSet>> ChannelSet::Create(
    const shm::ChannelOptions& options, const StackConfig& stack,
    const SchemaRegistry& schemas) {
  if (absl::Status fits = CheckStackFits(options, stack, schemas); !fits.ok()) {
    return fits;
  }
  // A missing folder is made for the whole stack, not for whichever channel
  // comes first. One that exists is left to the channels to check (opening
  // one names the folder a reader may not enter, and why).
  struct stat st;
  const std::string dir = absl::StrCat(options.root, "/", options.instance);
  if (::stat(dir.c_str(), &st) != 0 && errno == ENOENT) {
    absl::StatusOr<shm::ChannelOptions> folder = FolderOptions(options, stack);
    if (!folder.ok()) return folder.status();
    absl::StatusOr<std::vector<std::string>> made =
        shm::Channel::MakeInstanceFolder(*folder);
    if (!made.ok()) return made.status();
  }
  std::unique_ptr<ChannelSet> set(new ChannelSet());
  set->options_ = options;
  for (config::Channel::Reader c : stack.channels()) {
    absl::StatusOr<std::unique_ptr<ChannelHandle>> h =
        ChannelHandle::Create(options, c, schemas);
    if (!h.ok()) return h.status();
    set->channels_[c.getName().cStr()] = std::move(*h);
  }
  return set;
}

absl::StatusOr<ChannelHandle*> ChannelSet::Find(const std::string& name) const {
  auto it = channels_.find(name);
  if (it != channels_.end()) return it->second.get();
  std::vector<std::string> names;
  for (const auto& [n, _] : channels_) names.push_back(n);
  return absl::NotFoundError(absl::StrCat(
      "no channel ", name, " in the stack config (channels: ",
      absl::StrJoin(names, ", "), "): add it to the config's channels"));
}

}  // namespace tether::transport
