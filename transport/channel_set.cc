#include "transport/channel_set.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "transport/text_hints.h"

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

// Refuses, before anything is created, channels (a stack's and the
// caller's `more`) that together do not fit in the free space of the root's
// filesystem: created one by one, the first channels would fill it and the
// last would fail. Each file counts as what it takes there: its size
// rounded up to the filesystem's blocks.
absl::Status CheckStackFits(
    const shm::ChannelOptions& options,
    const std::vector<config::Channel::Reader>& channels, size_t more,
    const SchemaRegistry& schemas) {
  const std::string dir =
      ExistingFolder(std::filesystem::path(options.root) / options.instance);
  const std::optional<shm::FreeSpace> free = shm::FreeSpaceOf(dir);
  if (!free.has_value()) return absl::OkStatus();
  uint64_t needed = 0;
  int new_channels = 0;
  std::vector<std::string> new_more;
  for (size_t i = 0; i < channels.size(); ++i) {
    absl::StatusOr<uint64_t> bytes = ChannelHandle::BytesToCreate(
        options, channels[i], schemas, free->block_size);
    if (!bytes.ok()) return bytes.status();
    if (*bytes == 0) continue;
    needed += *bytes;
    ++new_channels;
    if (i >= channels.size() - more) {
      new_more.push_back(channels[i].getName().cStr());
    }
  }
  if (needed <= free->bytes) return absl::OkStatus();
  return shm::NoSpaceError(
      absl::StrCat("the stack (instance ", options.instance, ") has ",
                   new_channels, " new channel", new_channels == 1 ? "" : "s",
                   new_more.empty()
                       ? ""
                       : absl::StrCat(" (with ", absl::StrJoin(new_more, ", "),
                                      ")"),
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
    const SchemaRegistry& schemas,
    std::span<const config::Channel::Reader> more) {
  std::vector<config::Channel::Reader> channels;
  for (config::Channel::Reader c : stack.channels()) channels.push_back(c);
  channels.insert(channels.end(), more.begin(), more.end());
  if (absl::Status fits =
          CheckStackFits(options, channels, more.size(), schemas);
      !fits.ok()) {
    return fits;
  }
  std::unique_ptr<ChannelSet> set(new ChannelSet());
  set->options_ = options;
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
    set->made_folders_ = std::move(*made);
  }
  for (config::Channel::Reader c : channels) {
    absl::StatusOr<std::unique_ptr<ChannelHandle>> h =
        ChannelHandle::Create(options, c, schemas);
    if (!h.ok()) {
      // A stack half made is worse than none: take back what this call made.
      set->Abandon();
      return h.status();
    }
    if ((*h)->created()) set->created_.push_back(c.getName().cStr());
    set->channels_[c.getName().cStr()] = std::move(*h);
  }
  return set;
}

void ChannelSet::Abandon() {
  for (const std::string& name : created_) {
    channels_.erase(name);  // Unmapped: our own lock no longer counts.
    absl::StatusOr<bool> busy = shm::Channel::InUse(options_, name);
    if (busy.ok() && !*busy) (void)shm::Channel::Remove(options_, name);
  }
  created_.clear();
  channels_.clear();
  for (auto it = made_folders_.rbegin(); it != made_folders_.rend(); ++it) {
    if (::rmdir(it->c_str()) != 0) break;  // Not empty: someone else's too.
  }
  made_folders_.clear();
}

absl::StatusOr<ChannelHandle*> ChannelSet::Find(const std::string& name) const {
  auto it = channels_.find(name);
  if (it != channels_.end()) return it->second.get();
  std::vector<std::string> names;
  for (const auto& [n, _] : channels_) names.push_back(n);
  const bool relative = !name.empty() && name[0] != '/';
  return absl::NotFoundError(absl::StrCat(
      "no channel ", name, " in the stack config (channels: ",
      internal::ListNames(names), "): ",
      relative ? "channel names start with \"/\""
               : "add it to the config's channels",
      internal::DidYouMean(relative ? absl::StrCat("/", name) : name, names)));
}

}  // namespace tether::transport
