// log: the logger's private parts (logger.h), shared by its three files:
// logger.cc (start, stop, stats, notices), logger_drain.cc (the discovery
// and drain threads: finding channels and copying what arrived on them into
// batches) and logger_writer.cc (the writer thread: batches into MCAP
// files, chunks, compression, splitting). Included only by those files.
#ifndef TETHER_LOG_LOGGER_IMPL_H_
#define TETHER_LOG_LOGGER_IMPL_H_

#include <time.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "log/log_format.h"
#include "log/logger.h"
#include "log/mcap_writer.h"
#include "transport/channel_handle.h"
#include "transport/raw_endpoints.h"

namespace tether::log {
namespace internal {

inline int64_t ClockNow(clockid_t clock) {
  timespec ts;
  ::clock_gettime(clock, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}
inline int64_t MonotonicNow() { return ClockNow(CLOCK_MONOTONIC); }
inline int64_t RealtimeNow() { return ClockNow(CLOCK_REALTIME); }

// One recorded channel. Created by discovery; its reading side belongs to
// the drain thread; counters are read by stats().
struct Tracked {
  uint32_t index = 0;
  ChannelDescription description;
  std::unique_ptr<transport::ChannelHandle> handle;
  std::unique_ptr<transport::RawSubscriber> sub;
  ino_t ino = 0;
  // Drain thread only.
  bool have_last = false;
  uint64_t last_queue_index = 0;
  bool corrupt = false;
  // Set by discovery when the channel file was replaced by a new one.
  std::atomic<bool> retired{false};
  std::atomic<uint64_t> messages{0};
  std::atomic<uint64_t> bytes{0};
  std::atomic<uint64_t> missed{0};
};

struct Entry {
  uint32_t channel;
  uint32_t size;
  uint64_t offset;  // in the batch's arena
  transport::MessageContext context;
  int64_t realtime_receive_ns;
};

struct Gap {
  uint32_t channel;
  GapRecord record;
  int64_t realtime_ns;
};

// What one drain read: handed from the drain thread to the writer.
struct Batch {
  std::vector<uint32_t> added;  // channels to declare before the messages
  std::vector<Gap> gaps;
  std::vector<Entry> entries;
  std::vector<std::byte> arena;
  size_t bytes() const {
    return arena.size() + entries.size() * sizeof(Entry) +
           gaps.size() * sizeof(Gap);
  }
  void Clear() {
    added.clear();
    gaps.clear();
    entries.clear();
    arena.clear();
  }
};

}  // namespace internal

// The logger's state and its threads' work. Which thread owns what is said
// at each group; what two threads share is behind the named mutex or atomic.
struct Logger::Impl {
  using Tracked = internal::Tracked;
  using Entry = internal::Entry;
  using Gap = internal::Gap;
  using Batch = internal::Batch;

  LoggerOptions options;
  bool splitting = false;

  // Channels: append-only; pointers stay valid until the Impl dies.
  mutable std::mutex channels_mu;
  std::vector<std::unique_ptr<Tracked>> tracked;
  std::vector<Tracked*> to_adopt;
  std::set<std::string> reported;  // notices already given (once each)

  std::mutex notices_mu;
  std::vector<std::string> notices;

  std::mutex queue_mu;
  std::condition_variable queue_cv;
  std::deque<std::unique_ptr<Batch>> queue;
  std::vector<std::unique_ptr<Batch>> spare;
  uint64_t backlog_bytes = 0;
  bool drain_done = false;

  std::atomic<bool> stop{false};
  std::mutex stop_mu;
  std::condition_variable stop_cv;
  std::thread drain_thread, writer_thread, discovery_thread;
  bool stopped = false;

  // Writer thread (and Start before the threads run).
  std::unique_ptr<McapWriter> file;
  int file_index = 0;
  std::map<uint32_t, uint16_t> mcap_id;  // tracked index -> channel id
  uint16_t gap_channel = 0;
  uint32_t gap_sequence = 0;
  int64_t file_started_ns = 0;
  int64_t chunk_started_ns = 0;
  std::map<uint32_t, uint64_t> file_messages, file_missed;
  std::vector<std::byte> trailer;
  // What reached the files (messages in chunks written whole), by channel
  // name: of the closed files (writer thread only), and of all files
  // including the current one (guarded by status_mu, for stats()).
  std::map<uint16_t, std::string> id_names;  // current file's channel ids
  std::map<std::string, McapWriterStats::ChannelCount> written_closed;
  std::map<std::string, McapWriterStats::ChannelCount> written;
  uint64_t chunks_closed = 0;  // writer thread only
  uint64_t chunks = 0;         // guarded by status_mu
  absl::Status write_error;  // guarded by status_mu
  mutable std::mutex status_mu;
  std::vector<std::string> files;
  std::atomic<uint64_t> closed_file_bytes{0};
  std::atomic<uint64_t> current_file_bytes{0};
  std::atomic<bool> failed{false};
  std::atomic<uint64_t> late_drains{0};
  int64_t start_monotonic_ns = 0;
  int64_t start_realtime_ns = 0;

  // --- logger.cc: notices for the user. Any thread.
  void Notice(std::string text);
  // Once per `key` for the logger's life (e.g. one channel that cannot be
  // opened, however often discovery meets it).
  void NoticeOnce(const std::string& key, std::string text);

  // --- logger_drain.cc: finding channels (Start, then the discovery thread)
  // and reading them (the drain thread).
  bool Wanted(const std::string& name) const;
  // Opens the wanted channels not yet tracked (or re-created since) and
  // hands them to the drain thread through `to_adopt`.
  void Discover(bool at_start);
  void DiscoveryLoop();
  // Counts `missed` messages of `t` as lost and queues their gap record.
  void AddGap(Batch* b, Tracked* t, uint64_t missed, uint64_t first,
              uint64_t last, GapRecord::Reason reason, int64_t mono,
              int64_t offset);
  // Copies what arrived on `t` since the last drain into `b`.
  void DrainChannel(Tracked* t, Batch* b, int64_t offset);
  std::unique_ptr<Batch> TakeSpare();
  // Hands `b` to the writer, or, past max_backlog_bytes, only its gaps and a
  // gap for every message it drops.
  void Submit(std::unique_ptr<Batch> b, int64_t offset);
  void DrainLoop();

  // --- logger_writer.cc: the files (Start, then the writer thread).
  // Keeps the first error and stops writing.
  void Fail(const absl::Status& s);
  // Declares tracked channel `index` in the current file, once.
  absl::Status EnsureChannel(uint32_t index);
  absl::Status OpenFile();
  absl::Status CloseFile();
  // Updates `written` from the closed files and the current file's stats.
  void PublishWritten();
  absl::Status WriteBatch(const Batch& b);
  void WriterLoop();
};

}  // namespace tether::log

#endif  // TETHER_LOG_LOGGER_IMPL_H_
