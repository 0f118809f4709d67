// log: the logger. Records every channel of an instance (or those matching
// names/globs), including channels that appear while it runs, into MCAP
// files (log_format.h), with each message's send times, publisher, sequence
// and receive time, and a record of every message it missed.
//
// It adds no cost to real-time publishers: it reads with unpinned cursors
// (no pin entries, no pins a publisher has to step around) and never sleeps
// on a channel's wake word, so no send ever makes a wake syscall for it.
// Instead a drain thread wakes on its own timer every `period` (10 ms) and
// copies out what arrived on every channel; a writer thread compresses and
// writes; a discovery thread looks for new channels. A channel whose queue
// cannot hold one period at its rate loses messages to the logger: the
// logger warns about such channels when it finds them (LoggingWarning) and
// counts and records every loss (log_gap.capnp).
//
// Memory is bounded: if the writer falls behind (a slow disk) by more than
// `max_backlog_bytes`, the drain thread drops what it read and records the
// drop as a gap; nothing is lost silently.
//
// Threading: Start/Stop from one thread; stats() and TakeNotices() from any
// thread. Not RT-safe (its own threads allocate and do I/O), by design off
// every real-time thread.
#ifndef TETHER_LOG_LOGGER_H_
#define TETHER_LOG_LOGGER_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "log/log_format.h"
#include "log/mcap_writer.h"
#include "shm/channel.h"

namespace tether::log {

struct LoggerOptions {
  // Where the channels are.
  shm::ChannelOptions channels;
  // Channel names or globs ('*' also matches '/'); empty: every channel.
  std::vector<std::string> include;
  std::vector<std::string> exclude;
  // The output file. With splitting, files are <stem>_000.mcap, _001, ...
  std::string path;
  bool overwrite = false;
  // How often the drain thread copies out new messages.
  std::chrono::nanoseconds period = std::chrono::milliseconds(10);
  // How often to look for new channels.
  std::chrono::nanoseconds discovery_period = std::chrono::milliseconds(250);
  // Channels present at start: also record what is still in their queues
  // (channels found later always are, from their oldest message).
  bool from_oldest = false;
  // Start a new file after this many bytes / this long (0: never).
  uint64_t split_bytes = 0;
  std::chrono::nanoseconds split_duration{0};
  McapWriterOptions mcap;
  // Close a chunk at least this often, bounding what a crash loses.
  std::chrono::nanoseconds chunk_period = std::chrono::seconds(1);
  // Read but unwritten bytes beyond which drained messages are dropped (and
  // recorded as gaps).
  uint64_t max_backlog_bytes = 256ull << 20;
  // Extra key/values for the tether.recording metadata (e.g. the command).
  mcap::KeyValueMap recording_metadata;
};

struct LoggerChannelStats {
  std::string name;
  std::string type_name;
  uint64_t messages = 0;  // read from the channel to be written
  uint64_t bytes = 0;     // their payload bytes
  uint64_t missed = 0;    // never read (all reasons), recorded as gaps
  // Of `messages`: in chunks that reached the files whole (what a reader of
  // the files finds), and, once the writer failed, the rest: read from the
  // channel but lost to the write error, in no file. Until Stop() some of
  // `messages` are on their way (neither). After a Stop() without error,
  // written == messages.
  uint64_t written = 0;
  uint64_t written_bytes = 0;
  uint64_t unwritten = 0;
};

struct LoggerStats {
  uint64_t messages = 0;
  uint64_t bytes = 0;       // payload bytes
  uint64_t missed = 0;
  uint64_t written = 0;  // sums of the channels' fields
  uint64_t written_bytes = 0;
  uint64_t unwritten = 0;
  uint64_t chunks = 0;  // chunks that reached the files whole
  // In the files so far (all files; while recording, counting the open
  // chunk uncompressed).
  uint64_t file_bytes = 0;
  uint64_t late_drains = 0; // drains that started more than a period late
  std::vector<LoggerChannelStats> channels;  // sorted by name
  std::vector<std::string> files;            // written so far
  absl::Status error;  // the writer's first error (e.g. disk full)
};

// A warning when `depth` messages do not hold two drain periods at
// `frequency_hz` (a late drain must not lose messages), else nullopt.
// "channel /x: queue depth 16 holds 16 ms at 1000 Hz; the logger drains
// every 10 ms: raise queueDepth to >= 32 (or historySeconds), or record with
// a shorter --period". Any thread.
std::optional<std::string> LoggingWarning(const std::string& channel,
                                          double frequency_hz, uint32_t depth,
                                          std::chrono::nanoseconds period);

class Logger {
 public:
  // Opens the first file, finds the channels and starts the threads.
  // Errors: the file cannot be created (AlreadyExists, PermissionDenied...),
  // InvalidArgument for bad options.
  static absl::StatusOr<std::unique_ptr<Logger>> Start(LoggerOptions options);
  // Stop()s if still running.
  ~Logger();
  Logger(const Logger&) = delete;
  Logger& operator=(const Logger&) = delete;

  // Drains once more, writes everything read, closes the file with its
  // summary and joins the threads. Returns the first error met while
  // recording. Idempotent.
  absl::Status Stop();

  // A snapshot. Any thread.
  LoggerStats stats() const;
  // Lines for the user since the last call: channels added, warnings.
  // Any thread.
  std::vector<std::string> TakeNotices();
  // True once the writer has failed (it stops writing; Stop() reports why).
  bool failed() const;

  struct Impl;

 private:
  explicit Logger(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The file names a split recording uses: "<stem>_<index>.mcap" (index from
// 0, three digits) for `path` "<stem>.mcap"; `path` itself when not
// splitting. Any thread.
std::string SplitFileName(const std::string& path, bool splitting, int index);

}  // namespace tether::log

#endif  // TETHER_LOG_LOGGER_H_
