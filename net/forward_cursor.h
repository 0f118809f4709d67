// net: where a bridge's forwarding of one out channel got to, kept across
// the bridge's restarts, so that the messages sent while no bridge ran
// (it crashed, was killed, or was restarted by the launcher) are counted as
// lost at the sender instead of silently never crossing.
//
// A file per (channel, bridge name) beside the channel in the instance
// folder (shm::Channel::CompanionPathFor, kind "net-cursor"): a magic, the
// channel incarnation it is about (its nonce), the next queue index to
// forward, and the stream the bridge's frames of this channel form (its id,
// the last frame sequence number written, the messages lost at the sender
// in all), mapped shared. Advance() and Record() are stores into that
// mapping, no syscall, so the cursor survives a SIGKILL (the page is the
// tmpfs file's) and costs the bridge's loop nothing it would notice. The
// stream lets a receiver count across a restart exactly: the next run goes
// on with the sequence numbers and the lost count (net/frame.idl).
//
// A file truncated under a running bridge (another process, `truncate`)
// would make the next store a SIGBUS: the mapping is guarded
// (shm/mapping_guard.h), the store lands on a private zero page, and
// damaged() says so; the bridge then opens the cursor again. A file
// removed, replaced or cut short inside its page (no SIGBUS) is found by
// Gone(), which the bridge asks at every status, with the same remedy.
//
// Exactness: Record() precedes the DDS write of a frame and Advance()
// follows it, so a bridge killed between the two counts that frame's
// message twice: as lost at the sender by the next run, and as a frame
// missing at the receiver (killed before the write) or delivered (after
// it). It never counts a lost message as forwarded nor reuses a sequence
// number (which a receiver would drop as a duplicate). Each method stores
// the lost count before the position, so a kill between two stores counts
// more, never less. Two bridges of one name forwarding one channel of one
// instance would share the file: the first one's Open() holds a lock on it
// (flock), and a second one's fails (it then runs as a stream of its own,
// without a cursor).
//
// Threads: one at a time, on the thread that sets up or forwards (the
// bridge's setup thread, then its loop thread, which also opens a cursor
// again after damaged()).
#ifndef TETHER_NET_FORWARD_CURSOR_H_
#define TETHER_NET_FORWARD_CURSOR_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "shm/channel.h"

namespace tether::net {

class ForwardCursor {
 public:
  // Opens (or creates, mode 0600 within the caller's umask) the cursor of
  // `channel` (incarnation `incarnation`) for bridge `bridge`. `start` is
  // the index from which this run sees every message (where its watcher
  // starts: loop::WatcherHandle::start_index): a cursor with no position yet,
  // a file left by another incarnation of the channel, or one that is not
  // a cursor, starts there (what such a file said is about messages that
  // no longer exist, and messages sent before a bridge first ran are not
  // losses). So a first run that dies before it forwards anything still
  // leaves a position, and the next run counts what that run never sent.
  // Errors (permissions, a full filesystem) say what and where; the caller
  // may run without a cursor then.
  //
  // The stream: a file kept goes on with its stream; a new or unusable
  // file, or one an older build left (no stream; its position is kept),
  // starts a new one (a random id, nothing written, nothing lost), or
  // `keep` when given (a cursor made again under a running bridge).
  struct Stream {
    uint64_t id = 0;
    uint64_t last_seq = 0;  // frames written so far (sequence of the last)
    uint64_t lost = 0;      // messages lost at the sender, in all
  };
  static absl::StatusOr<std::unique_ptr<ForwardCursor>> Open(
      const shm::ChannelOptions& options, const std::string& channel,
      const std::string& bridge, uint64_t incarnation, uint64_t start,
      const Stream* keep = nullptr);
  ~ForwardCursor();

  // Why Open() started at `start` although a file was there ("" when it
  // kept the file's position or made the file): what the file's position
  // would have counted is not counted, and the caller says so. E.g. "it
  // was of another incarnation of the channel".
  const std::string& started_afresh() const { return started_afresh_; }
  // The file was truncated under this process since Open(): Advance()
  // stores no longer reach it. RT-safe (one atomic load).
  bool damaged() const;
  ForwardCursor(const ForwardCursor&) = delete;
  ForwardCursor& operator=(const ForwardCursor&) = delete;

  // This run sees every message from `first` on (where its watcher
  // starts): how many messages of the channel were sent between the
  // position (past the last one an earlier run of this bridge handled, or
  // where an earlier run started) and it. nullopt when the cursor is ahead
  // of `first` (a position past where this run's watcher started: not made
  // by a run of this incarnation; nothing is counted rather than a negative
  // gap).
  // The gap is added to the stream's lost count and the position moves to
  // `first`, so a run that dies before it forwards anything leaves its
  // count behind it and the next run counts only what came after `first`.
  // Call once, before Advance.
  std::optional<uint64_t> Resume(uint64_t first);
  // The message with queue index `index` was handled (forwarded, dropped
  // and counted, or skipped as this bridge's own).
  void Advance(uint64_t index);
  // Why the file is no longer this cursor's ("" while it is): removed,
  // replaced by another file, or cut short without a SIGBUS (a truncation
  // inside its page): stores then reach no file a next run would read.
  // The caller makes the cursor again (at position(), with stream()). Two
  // syscalls (stat, fstat): for a periodic check, not per message.
  std::string Gone() const;
  // The next index to handle, as this process last stored it (readable
  // when the file is gone).
  uint64_t position() const { return position_; }
  // The stream as this process last stored it.
  Stream stream() const { return stream_; }
  // The frame with sequence number `seq`, of the message at queue index
  // `index`, is about to be written, with `lost` messages lost at the
  // sender in all (net/frame.idl): the count, the number, then the
  // position at `index` (the messages `lost` counted before it are not
  // counted again by a next run).
  void Record(uint64_t seq, uint64_t lost, uint64_t index);

  const std::string& path() const { return path_; }

  // The kind name in the file's name (shm::Channel::CompanionPathFor).
  static constexpr char kKind[] = "net-cursor";
  // The file: a magic word, the channel's incarnation, then the position
  // (the next index to handle) at this byte offset, then the stream's id,
  // last sequence number and lost count, each 8 bytes, native endian.
  // Tests write what older builds or damage leave.
  static constexpr size_t kPositionOffset = 16;
  // What builds before the stream left: the first three words.
  static constexpr size_t kStreamlessSize = 24;

 private:
  struct File;
  ForwardCursor(std::string path, int fd, File* file, int guard,
                std::string afresh)
      : path_(std::move(path)),
        fd_(fd),
        file_(file),
        guard_(guard),
        started_afresh_(std::move(afresh)) {}

  std::string path_;
  int fd_;      // open for the lock (flock) while the cursor lives
  File* file_;  // the mapping (one page)
  // What was last stored in it, readable without touching the mapping.
  uint64_t position_ = 0;
  Stream stream_;
  int guard_;   // shm::internal::RegisterMapping's index, or -1
  std::string started_afresh_;
};

}  // namespace tether::net

#endif  // TETHER_NET_FORWARD_CURSOR_H_
