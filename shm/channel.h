// shm: a channel in shared memory — its data file and its reader-state file
// (layout.h): creating, opening, mapping and removing them, recovering what
// dead processes left, and the wake primitives the loop layer sleeps on.
// Publisher and Reader (publisher.h, reader.h) work on an open Channel. See
// layout.h for the protocol, its invariants and who may write which file.
#ifndef TETHER_SHM_CHANNEL_H_
#define TETHER_SHM_CHANNEL_H_

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "shm/mapping_guard.h"
#include "shm/owner.h"
#include "shm/queue_params.h"

namespace tether::shm {

namespace internal {
struct ChannelHeader;
struct ReaderStateHeader;
struct PublisherEntry;
struct ReaderEntry;
struct SlotHeader;
struct SleeperEntry;
struct ChannelAccess;
}  // namespace internal

// Where channel files live and how they are made. Built by main() or the
// layer above; the library reads no environment.
struct ChannelOptions {
  // Channel files are <root>/<instance>/<escaped channel name>.
  std::string root = "/dev/shm/tether";
  std::string instance = "default";
  // File mode of new data files: who may publish (write) and read.
  mode_t mode = 0660;
  // Group of new data files; unset keeps the creator's group.
  std::optional<gid_t> group;
  // File mode of new reader-state files: who may pin and announce sleeps.
  // Unset: `mode` plus group write wherever the group may read the data
  // (0640 -> 0660): the group's readers pin and read in place, others
  // with read access read as guests (unpinned, polling).
  std::optional<mode_t> reader_mode;
  // Group of new reader-state files; unset: `group`.
  std::optional<gid_t> reader_group;
  // Touch every page at open (no page faults later on the send path).
  bool prefault = false;
  // mlock the mapping (needs CAP_IPC_LOCK or a large RLIMIT_MEMLOCK).
  bool lock_memory = false;
  // Back a new data file of 2 MiB or more with huge pages (MADV_COLLAPSE,
  // Linux 6.1; best effort, channel_files.h): a large message then costs
  // what writing it costs, not a page walk per 4 KiB. Off: 4 KiB pages,
  // unless the root's tmpfs gives huge pages itself (huge=within_size).
  bool huge_pages = true;
};

// What a sweep found and reclaimed.
struct SweepReport {
  int dead_publishers = 0;
  int dead_readers = 0;
  int slots_freed = 0;
  int commits_finished = 0;  // half-done sends of dead publishers completed
  int corrupt_entries = 0;   // values out of range (left alone, reported)
  int dead_sleepers = 0;     // sleepers that died asleep (their bit cleared)
  // What this process could not sweep for lack of write access (the data
  // file: dead publishers and orphaned slots; the reader-state file: dead
  // readers and sleepers). Left to a process that can.
  bool skipped_data = false;
  bool skipped_reader_state = false;
};

// Counters for tools (list/stat). A snapshot; values move while read.
struct ChannelStats {
  uint64_t next_queue_index = 0;  // messages committed so far
  int publishers = 0;             // registered (alive or not yet swept)
  int pinning_readers = 0;
  int registered_sleepers = 0;    // waiters registered in the channel
  uint32_t sleepers = 0;          // waiters asleep now
  uint64_t send_failures = 0;     // of the registered publishers
  uint64_t file_size = 0;         // both files together
};

// The processes registered in a channel's registries (publishers, pinning
// readers, waiters), by pid, split by liveness (pid and start time, owner.h).
// Each pid once, in ascending order.
struct RegisteredProcesses {
  std::vector<pid_t> alive;
  std::vector<pid_t> dead;  // not reclaimed (yet): no sweep ran, or none can
};

class Channel;

// One waiter's registration as a sleeper on a channel: the bracket around a
// blocking wait on the channel's wake word (layout.h, "Wake"). Made by
// Channel::RegisterSleeper(); move-only; releases its registry entry when
// destroyed. The Channel must outlive it. One thread at a time.
class Sleeper {
 public:
  Sleeper(Sleeper&& other) noexcept;
  Sleeper& operator=(Sleeper&& other) noexcept;
  Sleeper(const Sleeper&) = delete;
  Sleeper& operator=(const Sleeper&) = delete;
  ~Sleeper();

  // A waiter calls BeginSleep(), then reads the wake word, then re-checks
  // its readers, then waits on the value read; EndSleep() after waking.
  // Between the two, publishers make the FUTEX_WAKE syscall; outside, they
  // skip it. RT-safe: one seq_cst atomic RMW each.
  // EndSleep() returns false when the announcement was gone before it
  // (a process with write access to the reader-state file cleared the
  // bit while this waiter slept: publishers may have skipped its wake).
  void BeginSleep();
  bool EndSleep();
  // True when the registry was full and this sleeper counts anonymously
  // (not reclaimed if its process dies asleep).
  bool anonymous() const { return index_ == kAnonymous; }
  // True when this process cannot write the channel's reader-state file:
  // Begin/EndSleep do nothing, publishers never learn of this waiter, so
  // it must wait with a bounded timeout and re-check (a guest's poll).
  // Also true once the channel's reader state is lost to this process
  // (Channel::reader_state_lost): its announcements reach nobody then.
  bool guest() const;

 private:
  friend class Channel;
  static constexpr int kAnonymous = -1;
  static constexpr int kGuest = -2;
  Sleeper(Channel* channel, int index) : channel_(channel), index_(index) {}
  void Release();
  Channel* channel_;
  int index_;  // registry entry, or kAnonymous, or kGuest
  bool asleep_ = false;
};

// A mapped channel. Not copyable or movable; owned by a unique_ptr. Publishers
// and Readers keep a pointer to it: the Channel must outlive them.
// Thread-safety: all methods may be called from any thread.
class Channel {
 public:
  // Opens the channel `name`, creating it with `params` and `metadata` if it
  // does not exist. Creation is race-free: both files are built under
  // private names and hard-linked into place, the data file last (layout.h),
  // so exactly one creator wins and nobody ever sees a half-initialised
  // channel (openers never wait). If it exists, its params must equal
  // `params` and its metadata must equal `metadata`; one that differs and
  // that no process has open (a stopped stack's, from before a config or
  // schema change) is removed and made anew, and one still in use is
  // FailedPrecondition naming both sides and how to change it
  // (ChangeAdvice). An existing file of another layout version (another
  // tether build's) is handled the same way. Runs a Sweep(). Not RT-safe.
  static absl::StatusOr<std::unique_ptr<Channel>> OpenOrCreate(
      const ChannelOptions& options, std::string_view name,
      const QueueParams& params, std::span<const std::byte> metadata = {});

  // Opens an existing channel, taking its params from the file (checked:
  // the data file's magic, layout version, params hash and sizes; the
  // reader-state file its nonce names, by its size only: a header a
  // process with write access overwrote opens, and CheckConsistency
  // reports it). NotFound if absent, PermissionDenied naming the file, its
  // mode, owner and group, who this process is and what to ask for when a
  // file cannot be read, DataLoss if the files are not a valid channel
  // (or the reader-state file has the wrong size). Each file is
  // mapped read-write when this process may write it, else read-only (see
  // data_writable(), reader_state_writable()). A channel removed (and
  // maybe made anew) while it is opened is opened again, up to
  // kOpenAttempts times; Aborted if it was removed under every attempt.
  // Runs a Sweep(). Not RT-safe.
  static constexpr int kOpenAttempts = 8;
  static absl::StatusOr<std::unique_ptr<Channel>> Open(
      const ChannelOptions& options, std::string_view name);

  // True while some process has the channel open through a Channel (each
  // holds a shared flock on its file while mapped; an open that meets this
  // probe's exclusive lock waits it out): what tools check before
  // removing a channel, whatever its registries say (an unpinned reader
  // registers nowhere). Files of tether builds before layout 2 hold no lock.
  // Any thread; not RT-safe (opens the file).
  static absl::StatusOr<bool> InUse(const ChannelOptions& options,
                                    std::string_view name);

  // True when the file at `name`'s path is a data file whose every mapper
  // holds the shared flock InUse() probes (layout kFirstLockingLayout up to
  // this build's): its header names our magic and such a layout, or, with
  // the magic damaged, its nonce still names one of its reader-state files.
  // Then InUse() alone says whether any process maps it, even when Open()
  // refuses it (truncated, grown, corrupt params); for other files (older
  // layouts, junk, a header that cannot be read) only /proc/*/maps can.
  // Reads the header with pread; maps nothing. Any thread; not RT-safe.
  static bool LockTellsUse(const ChannelOptions& options,
                           std::string_view name);

  // Removes the channel if no process has it open (InUse), deciding and
  // removing under one exclusive flock, so that a process opening it at
  // that moment never keeps an orphan (Map checks the path after its lock
  // and opens again). True if removed; false if in use (or made anew
  // meanwhile). What tether clean calls. Any thread; not RT-safe.
  static absl::StatusOr<bool> RemoveIfUnused(const ChannelOptions& options,
                                             std::string_view name);

  // Removes the channel's data file and its reader-state files (mapped
  // handles stay valid until closed). For channels nobody uses (tether
  // clean checks InUse first).
  static absl::Status Remove(const ChannelOptions& options,
                             std::string_view name);

  // Channel names present under options.root/options.instance (unescaped),
  // sorted. Reader-state files and leftover temporary files of crashed
  // creators are not listed.
  static absl::StatusOr<std::vector<std::string>> List(
      const ChannelOptions& options);

  // The file path of channel `name`: '/' and '%' in names are escaped as
  // %2F and %25 so a name is one file.
  static std::string PathFor(const ChannelOptions& options,
                             std::string_view name);

  // A file another component keeps in the instance folder about channel
  // `name` (the net bridge's forwarding cursor): ".<escaped name>@<kind>.
  // <escaped owner>". A dot file, so List() skips it; `tether clean`
  // removes it once its channel is gone. '@' is in no escaped channel name
  // (see kStateMarker), so the name is recovered exactly.
  static std::string CompanionPathFor(const ChannelOptions& options,
                                      std::string_view name,
                                      std::string_view kind,
                                      std::string_view owner);
  // The channel a file name in an instance folder is a companion of, or
  // nullopt when it is not a companion file.
  static std::optional<std::string> CompanionOf(std::string_view file);

  // The command that removes the channels of options' instance that no
  // live process uses, corrupt ones included: "tether clean --root <root>
  // --instance <instance>" (shell-quoted where needed), for messages that
  // say how to recover.
  static std::string CleanCommand(const ChannelOptions& options);

  // How to change channel `name` (another shape or type than a config now
  // asks for), for the errors that refuse such an open: stop the processes
  // that still use it, if any (InUse), and run CleanCommand(); never remove
  // the file under a live process (it keeps the old channel, and the stack
  // splits in two). Call it while this process does not have the channel
  // open (its own lock would count). Error path; not RT-safe.
  static std::string ChangeAdvice(const ChannelOptions& options,
                                  std::string_view name);

  // The mode of the reader-state files made with `options`:
  // options.reader_mode, or `mode` plus group write where the group may
  // read the data (0640 -> 0660). Any thread; RT-safe.
  static mode_t ReaderModeFor(const ChannelOptions& options);

  // Makes the instance folder options.root/options.instance and whatever
  // folders above it are missing, as docs/security.md promises. Folders
  // above the instance get 1777, like /dev/shm: every stack's user may add
  // an instance, and nobody may remove another's. The instance folder gets
  // options.group (unset: ours) and the mode the channel files of
  // `options` need: the owner everything; the group enters when it may
  // read either file and creates files when it may write the data file;
  // others enter when they may read; setgid with a group, never sticky
  // (e.g. 0640 with a group: 2750; 0660: 2770). The umask never narrows
  // either. This is the one place folder modes are decided: OpenOrCreate
  // makes its folder here, and so must anyone who makes the folder before
  // its channels (the launcher's lock). Folders that exist are left as
  // they are. Fails (and leaves nothing made) when a folder cannot be made
  // or given its group, or when the instance folder is not a folder or
  // anyone may write it. Returns the folders it made, outermost first (a
  // caller whose setup fails may remove them). Setup only; not RT-safe.
  static absl::StatusOr<std::vector<std::string>> MakeInstanceFolder(
      const ChannelOptions& options);

  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;
  ~Channel();

  // 0 if a channel file of 2 MiB or more made in `dir` gets huge pages
  // (ChannelOptions::huge_pages) on this kernel, else why not as an errno
  // (EINVAL: Linux before 6.1, THP off or shmem_enabled "deny"; EAGAIN or
  // ENOMEM: no free huge page now; EOPNOTSUPP: `dir` is not a filesystem
  // that has them). Builds, collapses and drops a 2 MiB unnamed file
  // (O_TMPFILE) in `dir`. Not RT-safe (a tool's probe: tether doctor).
  static int ProbeHugePages(const std::string& dir);

  // The bytes of a channel (both files) with `params` and `metadata_size`
  // bytes of metadata (what creating it reserves). Any thread; RT-safe.
  static uint64_t FileSizeFor(const QueueParams& params,
                              uint32_t metadata_size);

  // What the two files of such a channel take on a filesystem that
  // allocates in blocks of `block_size` bytes (FreeSpace::block_size): each
  // file's size (FileSizeFor's two parts) rounded up to whole blocks -- what
  // creating it takes from the free space. Any thread; RT-safe.
  static uint64_t SpaceFor(const QueueParams& params, uint32_t metadata_size,
                           uint64_t block_size);

  const std::string& name() const { return name_; }
  const std::string& path() const { return path_; }
  // Random per creation of the channel's file: two handles with the same
  // nonce are of one incarnation of the channel (a re-created channel of
  // the same name has another).
  uint64_t nonce() const { return nonce_; }
  // The reader-state file (<path>@readers.<nonce>).
  const std::string& reader_state_path() const { return state_path_; }
  const QueueParams& params() const { return params_; }

  // --- access (what this process may write) --------------------------------
  // This process can write the data file: it may publish and sweep dead
  // publishers. Else the data file is mapped PROT_READ. Any thread.
  bool data_writable() const { return data_writable_; }
  // This process can write the reader-state file: its readers may pin and
  // announce sleeps. Else it reads as a guest (unpinned, polling), as it
  // does once the reader state is lost (below). Any thread.
  bool reader_state_writable() const {
    return state_writable_ && !reader_state_lost();
  }
  // True once this handle no longer shares the reader state: the file
  // shrank under this process (the guard's SIGBUS) or had the wrong size
  // at open (a writer of it truncated or grew it). The handle then works,
  // not corrupt, on a private state: its publishers wake on every send,
  // its pins protect nothing across processes (readers count what was
  // overwritten), new readers are guests, and Stats() is its own.
  // OpenOrCreate makes the channel anew once unused. Any thread; RT-safe.
  bool reader_state_lost() const {
    if (state_lost_.load(std::memory_order_acquire) == kStateLost) return true;
    // A SIGBUS the guard absorbed (counted) that nothing has looked at yet.
    if (internal::CorruptionEvents() == 0) return false;
    (void)MappingDamaged();
    return state_lost_.load(std::memory_order_acquire) == kStateLost;
  }
  // Why this process reads as a guest, in words for a log line (who it is,
  // the file's mode, owner and group, what to ask for); empty when the
  // reader state is writable. Setup only (allocates).
  std::string GuestReason() const;
  // True when this handle's OpenOrCreate made the channel's files (false
  // when it opened existing ones): what a caller whose setup fails may take
  // back (Remove). Any thread.
  bool created() const { return created_; }
  std::span<const std::byte> metadata() const { return metadata_; }

  // --- corruption (sticky, per handle) -------------------------------------
  // True once an operation on this handle found the channel's memory
  // inconsistent (a bad ring entry, tail, slot state or size, a loan taken
  // away) or the file was truncated under this process (mapping_guard.h).
  // From then on Send reports kCorrupt, Next/Latest report kCorrupt and
  // HasNext is true (so a waiting loop looks, sees kCorrupt and stops).
  // Any thread; RT-safe. Inline: every send and receive asks, and in a
  // process where nothing was ever damaged or found corrupt it is two loads.
  bool corrupt() const {
    // The caller's accesses to the mapping stay before the count is read,
    // so a SIGBUS they raised on this thread has been counted by then (the
    // out-of-line call this replaced was such a barrier by accident).
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (corrupt_state_.load(std::memory_order_acquire) != 0) return true;
    if (internal::CorruptionEvents() == 0) return false;
    return MappingDamaged();
  }
  // The first finding: what was wrong and where, e.g. "ring entry 5 (queue
  // index 4101) has tag 12, which fits no queue index there". Empty while
  // not corrupt. Any thread; valid while the Channel lives.
  std::string_view corruption() const;
  // Records a finding (the first one wins) and makes the handle corrupt.
  // `what` is text; `a` and `b`, unless kNone, are appended as " (a, b)".
  // RT-safe: no allocation (fixed buffer). Any thread.
  static constexpr uint64_t kNone = ~uint64_t{0};
  void ReportCorruption(const char* what, uint64_t a = kNone,
                        uint64_t b = kNone) const;
  // A publisher that stopped on a corrupt channel tells its readers in
  // every process (the header's corrupt_found, a wake-word bump and a wake
  // of all waiters: layout.h), so that a reader whose own reads never
  // meet the damage reports it instead of waiting for sends that stopped.
  // Only with write access to the data file. RT-safe: two stores and one
  // FUTEX_WAKE. Any thread.
  void AnnounceCorruption() const;
  // A setup error for this corrupt channel (DataLoss): "channel <name> is
  // corrupt: <finding> (<path>); <consequence>. To recover, stop the
  // processes that use it (stop the stack), then run `<CleanCommand>` ...
  // and start them again". What every endpoint and tool that refuses a
  // corrupt channel returns, so the recovery reads the same everywhere.
  // Call only when corrupt(). Setup only (allocates); any thread.
  absl::Status CorruptionError(std::string_view consequence) const;
  // Process-wide: how many times a handle became corrupt or a channel
  // mapping was repaired after a SIGBUS (a truncated file, which corrupt()
  // then reports). A scan of many channels for corruption needs to run only
  // when this moved. Any thread; RT-safe (one atomic load).
  static uint64_t CorruptionEvents();

  // Checks the whole shared structure once: header, tail against the ring,
  // every ring entry's tag and slot, every slot's state, size and owner,
  // registries (O(depth + pool + registries)), and the reader-state file:
  // its header, pin bits and sleeper bits of readers that are not
  // registered. OK, or DataLoss saying what is wrong and where. A finding
  // in the data file makes the handle corrupt; one in the reader-state file
  // does not (a reader must not be able to stop publishers; messages are
  // intact). Tools run it when they open a channel; opening runs it too.
  // Tolerates live publishers and readers. Not RT-safe (O(file)); any
  // thread. Defined in audit.cc.
  absl::Status CheckConsistency() const;

  // Reclaims registrations, loans and pins of dead processes and finishes
  // or discards their half-done sends (see layout.h), in the files this
  // process can write (the report says what it skipped). Lock-free; safe
  // with live publishers and readers. O(pool + registries); not RT-safe
  // (reads /proc for liveness). Defined in recovery.cc. Any thread.
  SweepReport Sweep();

  // Counters for tools. A snapshot of values that move while read. Any
  // thread; RT-safe (loads only), O(registries). Defined in audit.cc.
  ChannelStats Stats() const;

  // Who is registered in the channel's registries, alive or dead. For tools
  // deciding about a channel whose dead cannot be swept (a corrupt one:
  // Sweep() leaves it as it is), where Stats() counts the dead too. Reads
  // /proc per entry; allocates; not RT-safe. Defined in recovery.cc. Any
  // thread.
  RegisteredProcesses Registered() const;

  // --- wake primitives (for loop/) -----------------------------------------
  // The 32-bit futex word readers wait on (shared futex, never PRIVATE). It
  // stays valid while the Channel lives. Any thread; RT-safe.
  std::atomic<uint32_t>* wake_word() const;
  // Current value of the wake word (acquire). RT-safe.
  uint32_t LoadWakeWord() const;
  // Registers a waiter (one per loop or tool that sleeps on this channel):
  // an entry of the channel's sleeper registry, so that a waiter that dies
  // asleep is swept like any dead owner. When all 64 entries are taken
  // (after a sweep), the sleeper counts anonymously instead (see Sleeper).
  // Setup: not RT-safe (may sweep, reads /proc). Any thread.
  Sleeper RegisterSleeper();
  // Wakes every waiter now (e.g. to stop a loop): bumps the wake word when
  // the data file is writable, then FUTEX_WAKE. RT-safe, one syscall.
  void WakeAll();

 private:
  friend class Publisher;
  friend class Reader;
  friend struct internal::ChannelAccess;  // tests, audits and fuzzers

  Channel() = default;
  static absl::StatusOr<std::unique_ptr<Channel>> Map(
      const ChannelOptions& options, std::string name, std::string path,
      int fd, bool writable, const std::optional<QueueParams>& expected,
      std::span<const std::byte> expected_metadata);

  // --- the parts of the file (layout.h), for Publisher, Reader, recovery ---
  internal::ChannelHeader* header() const { return header_; }
  internal::ReaderStateHeader* state_header() const { return state_header_; }
  internal::PublisherEntry* publisher_entry(uint32_t i) const;
  internal::ReaderEntry* reader_entry(uint32_t i) const;
  internal::SleeperEntry* sleeper_entry(uint32_t i) const;
  // Inline (every send and receive takes several): plain address arithmetic
  // on offsets validated when the channel was mapped; callers bound `slot`.
  std::atomic<uint64_t>* ring_entry(uint64_t queue_index) const {
    return reinterpret_cast<std::atomic<uint64_t>*>(base_ + ring_offset_) +
           (queue_index & ring_mask_);
  }
  internal::SlotHeader* slot_header(uint64_t slot) const {
    return reinterpret_cast<internal::SlotHeader*>(
        base_ + slot_headers_offset_ + slot * kSlotHeaderBytes);
  }
  // Slot `slot`'s pin word in the reader-state file (bit k: reader k).
  std::atomic<uint64_t>* pin_word(uint64_t slot) const {
    return reinterpret_cast<std::atomic<uint64_t>*>(state_base_ +
                                                    pins_offset_) +
           slot;
  }
  std::byte* payload(uint64_t slot) const {
    return base_ + payloads_offset_ + slot * payload_stride_;
  }
  // sizeof(internal::SlotHeader), which this header only declares (checked
  // in channel.cc).
  static constexpr uint64_t kSlotHeaderBytes = 64;
  // This process's owner token (recomputed after fork). Setup only: may
  // read /proc.
  OwnerToken self_token();

  // Claims a kFree, unpinned slot for publisher `owner`, starting the scan at
  // `*hint` (advanced past the slot returned). With `sweep`, runs one Sweep()
  // and rescans if none is found (not RT-safe then). Returns the slot, or
  // -1. O(pool).
  int64_t ClaimFreeSlot(uint32_t owner, uint64_t* hint, bool sweep);
  bool ClaimIfFree(uint64_t slot, uint32_t owner);
  // recovery.cc: ClaimFreeSlot's failure path. A healthy channel always
  // has a free slot (the pool holds the ring, one loan per publisher and
  // one pin per pinning reader), so when none is, pins hold the rest:
  // clears the pin bits no reader can have set (a bit of no reader entry,
  // of an unregistered entry, or set in two slots: a reader pins one slot
  // at a time) and returns whether it cleared any. A process with write
  // access to the reader-state file set them (garbage, or hostile); a
  // real reader's pin cleared with them is counted by that reader
  // (overwritten_while_read). O(pool), no allocation, no syscall: RT-safe.
  bool ClearImpossiblePins();

  // recovery.cc: reclaiming what dead processes left (see Sweep()).
  // Takes a dead owner's registry entry over (CAS to our token) so no other
  // sweeper cleans it at the same time and nobody registers in it before it
  // is clean. False if the owner lives, the entry is free, or another
  // sweeper won.
  bool TakeOverDeadEntry(std::atomic<OwnerToken>& owner);
  void SweepPublisher(uint32_t index, SweepReport* report);
  void SweepReader(uint32_t index, SweepReport* report);
  void SweepSleeper(uint32_t index, SweepReport* report);
  friend class Sleeper;
  void SweepOrphanedSlots(SweepReport* report);
  // audit.cc: what is wrong in the reader-state file, or empty.
  std::string ReaderStateProblem() const;

  std::string name_;
  std::string path_;
  std::string clean_command_;  // CleanCommand() of the options it opened with
  QueueParams params_;
  std::span<const std::byte> metadata_;
  std::string state_path_;
  std::byte* base_ = nullptr;
  size_t size_ = 0;
  int fd_ = -1;  // kept open: its shared flock says "in use" (InUse)
  bool data_writable_ = false;
  std::byte* state_base_ = nullptr;
  size_t state_size_ = 0;
  bool state_writable_ = false;
  bool created_ = false;
  internal::ChannelHeader* header_ = nullptr;
  internal::ReaderStateHeader* state_header_ = nullptr;
  uint64_t nonce_ = 0;
  uint64_t publishers_offset_ = 0;
  uint64_t readers_offset_ = 0;
  uint64_t sleepers_offset_ = 0;
  uint64_t pins_offset_ = 0;
  uint64_t ring_offset_ = 0;
  uint64_t slot_headers_offset_ = 0;
  uint64_t payloads_offset_ = 0;
  uint64_t payload_stride_ = 0;
  uint64_t ring_mask_ = 0;
  OwnerToken self_token_ = kNoOwner;
  // The pid self_token_ was computed in; differs in a forked child.
  pid_t token_pid_ = 0;
  // mapping_guard.h entries of the two mappings (-1: unguarded).
  int guard_ = -1;
  int state_guard_ = -1;
  // corrupt()'s slow path: reports (once) and returns true when a SIGBUS
  // repaired the data file's mapping; one that repaired the reader state's
  // makes the state lost instead (LoseReaderState), unless that fails.
  bool MappingDamaged() const;
  // recovery.cc: replaces the reader-state mapping with a private one,
  // once, and wakes every waiter (a send that read the guard's zero pages
  // skipped its wake). False if it could not. Any thread; a failure path
  // of send and receive (one mmap, no allocation, no lock).
  bool LoseReaderState() const;
  // A private, populated reader state for `params` and `nonce` (at `at`,
  // MAP_FIXED, or anywhere when null) whose publishers always wake
  // (kLostStateSleepers). MAP_FAILED with errno on failure.
  static void* MapPrivateState(void* at, size_t size, const QueueParams& params,
                               uint64_t nonce);
  static constexpr int kStateShared = 0;
  static constexpr int kStateLosing = 1;
  static constexpr int kStateLost = 2;
  mutable std::atomic<int> state_lost_{kStateShared};
  // The reader-state file's size when Map() found it wrong, or kNone when
  // the loss (if any) came later.
  uint64_t state_size_at_open_ = kNone;
  bool lock_memory_ = false;  // ChannelOptions::lock_memory: mlock'ed
  // Corruption, sticky: 0 clean, 1 being recorded, 2 recorded.
  mutable std::atomic<int> corrupt_state_{0};
  mutable char corruption_[240] = {};
};

inline bool Sleeper::guest() const {
  return index_ == kGuest ||
         (channel_ != nullptr && channel_->reader_state_lost());
}

// The free space of a filesystem, as statvfs(2) gives it.
struct FreeSpace {
  // Bytes an unprivileged process may still use (f_bavail blocks).
  uint64_t bytes = 0;
  // The unit files are allocated in (f_frsize; f_bsize on a filesystem that
  // leaves f_frsize 0): every file takes a whole number of them.
  uint64_t block_size = 1;
};

// The free space of the filesystem holding `dir` (which must exist), or
// nullopt when statvfs fails. Setup only.
std::optional<FreeSpace> FreeSpaceOf(const std::string& dir);

// Why `what_needs` `bytes` (e.g. "channel /robot/imu needs") does not fit in
// the filesystem of `dir`, with what is free there and how to make room
// (ResourceExhausted). Setup only.
absl::Status NoSpaceError(std::string_view what_needs, const std::string& dir,
                          uint64_t bytes);

}  // namespace tether::shm

#endif  // TETHER_SHM_CHANNEL_H_
