// shm internal: the files behind a channel -- names and their escaping,
// instance folders and their modes, building a file under a private name
// with its space reserved, laying out a fresh data or reader-state file, and
// the error messages of the filesystem (access, no space). Used by
// channel.cc to create, open, list and remove channels. Setup only: every
// function here may allocate and make syscalls; none is RT-safe.
#ifndef TETHER_SHM_CHANNEL_FILES_H_
#define TETHER_SHM_CHANNEL_FILES_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "shm/channel.h"
#include "shm/owner.h"
#include "shm/queue_params.h"

namespace tether::shm::internal {

// A creator's private name for a file it is still building:
// .<escaped name>.tmp.<pid>.<counter>.
inline constexpr std::string_view kTmpMarker = ".tmp.";
// Reader-state files are <escaped name>@readers.<16 hex digits of the
// nonce>: '@' never appears in an escaped channel name's own file.
inline constexpr char kStateMarker[] = "@readers.";

std::string HumanBytes(uint64_t n);

absl::Status NoSpaceStatus(const std::string& name, const std::string& dir,
                           uint64_t bytes);

// Channel `name`'s file could not be made or named in `dir` (ENOSPC after
// the space check passed): out of inodes (say so, with the tmpfs option
// that grows them) or filled since. ResourceExhausted.
absl::Status NoRoomForAFile(const std::string& name, const std::string& dir);

std::string Escape(std::string_view name);

std::string Unescape(std::string_view file);

absl::Status ErrnoStatus(int err, const std::string& what);

// The mode of an instance folder: the owner has everything; the group may
// enter (and list) when it may read either file, and create or remove
// files when it may write the data file (its publishers may create the
// channels they use); others may enter when they may read the data. The
// setgid bit makes files that members create inherit the folder's group.
// No sticky bit: inside an instance, any member who may write the folder
// may remove another member's leftovers (tether clean), which the sticky
// bit would forbid.
mode_t InstanceDirMode(mode_t mode, mode_t reader_mode, bool has_group);

// mkdir -p of options.root/options.instance (Channel::MakeInstanceFolder
// says what each folder gets). Appends the folders it made to `made`,
// outermost first; on an error removes them again (and leaves `made` as it
// was).
absl::Status MakeDirs(const ChannelOptions& options,
                      std::vector<std::string>* made);

std::string DescribeParams(const QueueParams& p);

uint64_t NewNonce();

std::string StatePath(const std::string& data_path, uint64_t nonce);

// Lays out a fresh data file in a zeroed mapping.
void Initialise(std::byte* base, const QueueParams& p,
                std::span<const std::byte> metadata, uint64_t nonce);

// Lays out a fresh reader-state file in a zeroed mapping.
void InitialiseState(std::byte* base, const QueueParams& p, uint64_t nonce,
                     OwnerToken creator);

// A file of `size` bytes under a private name in `dir`, space reserved,
// laid out by `init` — the first half of race-free creation (the caller
// links it into place). Returns its private name and fd, or an error (and
// leaves nothing behind).
struct BuiltFile {
  std::string tmp;
  int fd = -1;
};

// `huge`: after `init`, ask for huge pages (CollapseToHugePages), best
// effort.
absl::StatusOr<BuiltFile> BuildFile(
    const std::string& dir, const std::string& escaped,
    const std::string& name, uint64_t size, mode_t mode,
    std::optional<gid_t> group, bool huge,
    const std::function<void(std::byte*)>& init);

// Huge pages for large data files without a tmpfs mount option or sysfs
// (docs/large-messages.md). Since Linux 6.1, madvise(MADV_COLLAPSE) backs
// the 2 MiB-aligned ranges of a tmpfs file's page cache with huge pages
// whatever transparent_hugepage/shmem_enabled says (unless it is "deny"),
// and a process that maps the file at a 2 MiB-aligned address maps each of
// them with one TLB entry. A 1 MiB message written into rotating slots on
// 4 KiB pages walks page tables for most of its 256 pages; on huge pages it
// costs what the copy costs. Both functions are called where channels are
// made and opened, never on a real-time path; they may block in the kernel
// (a collapse copies the pages).

// mmap(nullptr, size, prot, flags, fd, 0) at an address aligned to
// kHugePage when size >= kHugePage, so that the file's huge pages map as
// such (the kernel aligns shmem mappings only where its settings give
// shmem huge pages). MAP_FAILED and errno as mmap's; munmap(result, size)
// undoes it.
void* MapFile(int fd, uint64_t size, int prot, int flags);

// madvise(MADV_COLLAPSE) over the whole huge pages of a MapFile mapping.
// Returns 0, or the errno: EINVAL where the kernel cannot (before 6.1, THP
// off, shmem_enabled "deny"), EAGAIN or ENOMEM when no huge page could be
// had. On failure the file keeps its 4 KiB pages and works as before; its
// contents are never changed.
int CollapseToHugePages(std::byte* base, uint64_t size);

// The nonce of reader-state file name `f` of escaped channel `escaped`, or
// nullopt if `f` is not one.
std::optional<uint64_t> StateNonce(std::string_view f, std::string_view escaped);

// Removes the reader-state files of channel `escaped` in `dir` other than
// `keep`'s, when `only_dead_creators`, only those whose creator died (left
// between a creator's two links). Best effort.
void RemoveStateFiles(const std::string& dir, const std::string& escaped,
                      std::optional<uint64_t> keep, bool only_dead_creators);

}  // namespace tether::shm::internal

#endif  // TETHER_SHM_CHANNEL_FILES_H_
