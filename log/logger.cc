// The logger's public face: start (the first file, the channels present,
// the threads), stop, stats and notices. The threads' work is in
// logger_drain.cc (discovery, drain) and logger_writer.cc (the files).
#include "log/logger.h"

#include <map>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "log/logger_impl.h"

namespace tether::log {

using internal::MonotonicNow;
using internal::RealtimeNow;

std::optional<std::string> LoggingWarning(const std::string& channel,
                                          double frequency_hz, uint32_t depth,
                                          std::chrono::nanoseconds period) {
  if (frequency_hz <= 0 || depth == 0) return std::nullopt;
  const double period_s = std::chrono::duration<double>(period).count();
  const double needed = 2 * period_s * frequency_hz;
  if (depth >= needed) return std::nullopt;
  uint64_t suggest = 2;
  while (suggest < needed) suggest *= 2;
  return absl::StrFormat(
      "channel %s: queue depth %u holds %.3g ms at %.6g Hz; the logger "
      "drains every %.3g ms and will lose messages when a drain is late: "
      "raise its queueDepth to >= %u (or historySeconds), or record with a "
      "shorter --period",
      channel, depth, 1000.0 * depth / frequency_hz, frequency_hz,
      1000 * period_s, suggest);
}

std::string SplitFileName(const std::string& path, bool splitting, int index) {
  if (!splitting) return path;
  std::string stem = path;
  std::string ext = ".mcap";
  if (stem.size() > 5 && stem.compare(stem.size() - 5, 5, ".mcap") == 0) {
    stem.resize(stem.size() - 5);
  } else {
    ext.clear();
  }
  return absl::StrFormat("%s_%03d%s", stem, index, ext);
}

void Logger::Impl::Notice(std::string text) {
  std::lock_guard lock(notices_mu);
  notices.push_back(std::move(text));
}

void Logger::Impl::NoticeOnce(const std::string& key, std::string text) {
  {
    std::lock_guard lock(channels_mu);
    if (!reported.insert(key).second) return;
  }
  Notice(std::move(text));
}

Logger::Logger(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<Logger>> Logger::Start(LoggerOptions options) {
  if (options.path.empty()) {
    return absl::InvalidArgumentError("no output file given");
  }
  if (options.period.count() <= 0 || options.discovery_period.count() <= 0) {
    return absl::InvalidArgumentError("the drain period must be > 0");
  }
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  impl->splitting = impl->options.split_bytes > 0 ||
                    impl->options.split_duration.count() > 0;
  impl->start_monotonic_ns = MonotonicNow();
  impl->start_realtime_ns = RealtimeNow();
  if (absl::Status s = impl->OpenFile(); !s.ok()) return s;
  impl->Discover(/*at_start=*/true);
  Impl* p = impl.get();
  impl->writer_thread = std::thread([p] { p->WriterLoop(); });
  impl->drain_thread = std::thread([p] { p->DrainLoop(); });
  impl->discovery_thread = std::thread([p] { p->DiscoveryLoop(); });
  return std::unique_ptr<Logger>(new Logger(std::move(impl)));
}

Logger::~Logger() { (void)Stop(); }

absl::Status Logger::Stop() {
  Impl& i = *impl_;
  if (!i.stopped) {
    i.stopped = true;
    {
      std::lock_guard lock(i.stop_mu);
      i.stop.store(true);
    }
    i.stop_cv.notify_all();
    i.discovery_thread.join();
    i.drain_thread.join();
    i.writer_thread.join();
  }
  std::lock_guard lock(i.status_mu);
  return i.write_error;
}

bool Logger::failed() const { return impl_->failed.load(); }

LoggerStats Logger::stats() const {
  const Impl& i = *impl_;
  LoggerStats s;
  std::map<std::string, McapWriterStats::ChannelCount> written;
  bool failed = false;
  {
    std::lock_guard lock(i.status_mu);
    written = i.written;
    failed = !i.write_error.ok();
    s.chunks = i.chunks;
  }
  {
    std::lock_guard lock(i.channels_mu);
    std::map<std::string, LoggerChannelStats> by_name;
    for (const auto& t : i.tracked) {
      LoggerChannelStats& c = by_name[t->description.name];
      c.name = t->description.name;
      c.type_name = t->description.type_name;
      c.messages += t->messages.load(std::memory_order_relaxed);
      c.bytes += t->bytes.load(std::memory_order_relaxed);
      c.missed += t->missed.load(std::memory_order_relaxed);
    }
    for (auto& [name, c] : by_name) {
      if (auto w = written.find(name); w != written.end()) {
        c.written = w->second.messages;
        c.written_bytes = w->second.bytes;
      }
      // Once the writer failed nothing more reaches the file.
      if (failed && c.messages > c.written)
        c.unwritten = c.messages - c.written;
      s.messages += c.messages;
      s.bytes += c.bytes;
      s.missed += c.missed;
      s.written += c.written;
      s.written_bytes += c.written_bytes;
      s.unwritten += c.unwritten;
      s.channels.push_back(std::move(c));
    }
  }
  s.file_bytes = i.closed_file_bytes.load() + i.current_file_bytes.load();
  s.late_drains = i.late_drains.load();
  std::lock_guard lock(i.status_mu);
  s.files = i.files;
  s.error = i.write_error;
  return s;
}

std::vector<std::string> Logger::TakeNotices() {
  std::lock_guard lock(impl_->notices_mu);
  std::vector<std::string> out = std::move(impl_->notices);
  impl_->notices.clear();
  return out;
}

}  // namespace tether::log
