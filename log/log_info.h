// log: what `tether log info` shows about a log: its time span, and per
// channel the type, message count, rate, bytes and messages missed (from the
// loss records), plus compression and damage.
//
// Threading: any thread; reads the file once. Not RT-safe.
#ifndef TETHER_LOG_LOG_INFO_H_
#define TETHER_LOG_LOG_INFO_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "log/log_reader.h"

namespace tether::log {

struct ChannelInfoRow {
  std::string name;
  std::string type;
  uint64_t messages = 0;
  uint64_t bytes = 0;
  uint64_t missed = 0;
  double rate_hz = 0;  // over the channel's own first..last message
  bool replayable = false;
  // Why not (replay_plan.h WhyNotReplayable: a name is replayed with all
  // its incarnations or not at all), "" if replayable.
  std::string not_replayable;
  // The recorder stopped recording it because its shared memory was
  // corrupt (a loss record says so), at this monotonic time (0: it did not).
  int64_t stopped_corrupt_ns = 0;
};

struct LogInfo {
  std::string path;
  uint64_t file_size = 0;
  bool indexed = false;
  std::string profile;
  std::string library;
  int64_t start_ns = 0;  // monotonic send time of the first message
  int64_t end_ns = 0;
  int64_t start_realtime_ns = 0;
  uint64_t messages = 0;
  uint64_t missed = 0;
  uint64_t chunks = 0;
  std::string compression;  // "zstd", "none", or "zstd, none"
  uint64_t uncompressed_bytes = 0;
  uint64_t compressed_bytes = 0;
  std::vector<ChannelInfoRow> channels;  // by name; the gap channel is left out
  std::vector<McapProblem> problems;
  double duration_s() const { return (end_ns - start_ns) / 1e9; }
  double compression_ratio() const {
    return compressed_bytes > 0
               ? static_cast<double>(uncompressed_bytes) / compressed_bytes
               : 1.0;
  }
};

struct LogInfoOptions {
  // Read the data section by scanning, even when the summary is intact (a
  // chunk index that points at the wrong place loses nothing then).
  bool scan = false;
};

absl::StatusOr<LogInfo> ComputeLogInfo(const std::string& path,
                                       const LogInfoOptions& options = {});

// A few lines and a table for people.
std::string FormatLogInfo(const LogInfo& info);
// One JSON object.
std::string FormatLogInfoJson(const LogInfo& info);

}  // namespace tether::log

#endif  // TETHER_LOG_LOG_INFO_H_
