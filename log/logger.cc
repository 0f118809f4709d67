#include "log/logger.h"

#include <fnmatch.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "transport/channel_handle.h"
#include "transport/raw_endpoints.h"

namespace tether::log {
namespace {

int64_t Now(clockid_t clock) {
  timespec ts;
  ::clock_gettime(clock, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}
int64_t MonotonicNow() { return Now(CLOCK_MONOTONIC); }
int64_t RealtimeNow() { return Now(CLOCK_REALTIME); }

void SleepUntil(int64_t monotonic_ns) {
  timespec ts;
  ts.tv_sec = monotonic_ns / 1'000'000'000;
  ts.tv_nsec = monotonic_ns % 1'000'000'000;
  while (::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) ==
         EINTR) {
  }
}

bool GlobMatch(const std::string& pattern, const std::string& name) {
  return ::fnmatch(pattern.c_str(), name.c_str(), 0) == 0;
}

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

}  // namespace

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

struct Logger::Impl {
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
  absl::Status write_error;  // guarded by status_mu
  mutable std::mutex status_mu;
  std::vector<std::string> files;
  std::atomic<uint64_t> closed_file_bytes{0};
  std::atomic<uint64_t> current_file_bytes{0};
  std::atomic<bool> failed{false};
  std::atomic<uint64_t> late_drains{0};
  int64_t start_monotonic_ns = 0;
  int64_t start_realtime_ns = 0;

  void Notice(std::string text) {
    std::lock_guard lock(notices_mu);
    notices.push_back(std::move(text));
  }
  void NoticeOnce(const std::string& key, std::string text) {
    {
      std::lock_guard lock(channels_mu);
      if (!reported.insert(key).second) return;
    }
    Notice(std::move(text));
  }

  bool Wanted(const std::string& name) const {
    if (!options.include.empty() &&
        std::none_of(options.include.begin(), options.include.end(),
                     [&](const std::string& p) { return GlobMatch(p, name); })) {
      return false;
    }
    return std::none_of(
        options.exclude.begin(), options.exclude.end(),
        [&](const std::string& p) { return GlobMatch(p, name); });
  }

  // --- discovery ------------------------------------------------------------
  void Discover(bool at_start) {
    absl::StatusOr<std::vector<std::string>> names =
        shm::Channel::List(options.channels);
    if (!names.ok()) {
      NoticeOnce("list", absl::StrCat("cannot list channels: ",
                                      names.status().message()));
      return;
    }
    for (const std::string& name : *names) {
      if (!Wanted(name)) continue;
      struct stat st;
      if (::stat(shm::Channel::PathFor(options.channels, name).c_str(), &st) !=
          0) {
        continue;  // removed meanwhile
      }
      Tracked* existing = nullptr;
      {
        std::lock_guard lock(channels_mu);
        for (const auto& t : tracked) {
          if (t->description.name == name && !t->retired.load()) {
            existing = t.get();
          }
        }
      }
      if (existing != nullptr && existing->ino == st.st_ino) continue;
      absl::StatusOr<std::unique_ptr<transport::ChannelHandle>> handle =
          transport::ChannelHandle::Open(options.channels, name);
      if (!handle.ok()) {
        NoticeOnce(absl::StrCat("open ", name, " ", st.st_ino),
                   absl::StrCat("not recording ", name, ": ",
                                handle.status().message()));
        continue;
      }
      transport::SubscriberOptions so;
      so.pin = false;
      so.from_oldest = !at_start || options.from_oldest;
      absl::StatusOr<std::unique_ptr<transport::RawSubscriber>> sub =
          transport::RawSubscriber::Create(handle->get(), so);
      if (!sub.ok()) {
        NoticeOnce(absl::StrCat("sub ", name, " ", st.st_ino),
                   absl::StrCat("not recording ", name, ": ",
                                sub.status().message()));
        continue;
      }
      auto t = std::make_unique<Tracked>();
      t->description = DescribeChannel(**handle);
      t->handle = std::move(*handle);
      t->sub = std::move(*sub);
      t->ino = st.st_ino;
      if (std::optional<std::string> w = LoggingWarning(
              name, t->description.frequency_hz, t->description.queue_depth,
              options.period)) {
        Notice(absl::StrCat("warning: ", *w));
      }
      if (existing != nullptr) {
        existing->retired.store(true);
        Notice(absl::StrCat("channel ", name,
                            " was re-created; recording the new one"));
      } else if (!at_start) {
        Notice(absl::StrCat("recording new channel ", name, " (",
                            t->description.type_name, ")"));
      }
      std::lock_guard lock(channels_mu);
      t->index = static_cast<uint32_t>(tracked.size());
      to_adopt.push_back(t.get());
      tracked.push_back(std::move(t));
    }
  }

  void DiscoveryLoop() {
    while (!stop.load()) {
      {
        std::unique_lock lock(stop_mu);
        stop_cv.wait_for(lock, options.discovery_period,
                         [&] { return stop.load(); });
      }
      if (stop.load()) break;
      Discover(/*at_start=*/false);
    }
  }

  // --- drain ------------------------------------------------------------------
  void AddGap(Batch* b, Tracked* t, uint64_t missed, uint64_t first,
              uint64_t last, GapRecord::Reason reason, int64_t mono,
              int64_t offset) {
    t->missed.fetch_add(missed, std::memory_order_relaxed);
    Gap g;
    g.channel = t->index;
    g.record.channel = t->description.name;
    g.record.missed = missed;
    g.record.first_queue_index = first;
    g.record.last_queue_index = last;
    g.record.reason = reason;
    g.record.detected_monotonic_ns = mono;
    g.realtime_ns = mono + offset;
    b->gaps.push_back(std::move(g));
  }

  void DrainChannel(Tracked* t, Batch* b, int64_t offset) {
    if (t->corrupt) return;
    transport::RawMessage m;
    for (;;) {
      const transport::ReceiveStatus s = t->sub->Next(&m);
      if (s == transport::ReceiveStatus::kNothingNew) return;
      const int64_t mono = MonotonicNow();
      if (s != transport::ReceiveStatus::kOk) {
        t->corrupt = true;
        AddGap(b, t, 0, t->last_queue_index + 1, t->last_queue_index + 1,
               GapRecord::Reason::kCorruptChannel, mono, offset);
        Notice(absl::StrCat("stopped recording ", t->description.name,
                            ": its shared memory is corrupt (",
                            transport::ToString(s), ")"));
        return;
      }
      const uint64_t qi = m.context.queue_index;
      if (m.context.missed > 0) {
        const uint64_t first = qi >= m.context.missed ? qi - m.context.missed : 0;
        AddGap(b, t, m.context.missed, first, qi - 1,
               GapRecord::Reason::kOverwritten, mono, offset);
      }
      const size_t at = b->arena.size();
      b->arena.insert(b->arena.end(), m.bytes.begin(), m.bytes.end());
      // Unpinned: the slot may have been reused while we copied.
      if (!t->sub->StillValid(m)) {
        b->arena.resize(at);
        AddGap(b, t, 1, qi, qi, GapRecord::Reason::kOverwrittenWhileCopying,
               mono, offset);
      } else {
        b->entries.push_back({t->index, static_cast<uint32_t>(m.bytes.size()),
                              at, m.context,
                              m.context.monotonic_receive_ns + offset});
        t->messages.fetch_add(1, std::memory_order_relaxed);
        t->bytes.fetch_add(m.bytes.size(), std::memory_order_relaxed);
      }
      t->sub->Release();
      t->have_last = true;
      t->last_queue_index = qi;
    }
  }

  std::unique_ptr<Batch> TakeSpare() {
    std::lock_guard lock(queue_mu);
    if (spare.empty()) return std::make_unique<Batch>();
    std::unique_ptr<Batch> b = std::move(spare.back());
    spare.pop_back();
    return b;
  }

  void Submit(std::unique_ptr<Batch> b, int64_t offset) {
    std::lock_guard lock(queue_mu);
    if (backlog_bytes + b->bytes() > options.max_backlog_bytes &&
        !b->entries.empty()) {
      // The writer is too far behind: keep the record of what we drop.
      const int64_t mono = MonotonicNow();
      std::vector<Entry> entries = std::move(b->entries);
      b->entries.clear();
      b->arena.clear();
      std::stable_sort(entries.begin(), entries.end(),
                       [](const Entry& x, const Entry& y) {
                         return x.channel < y.channel;
                       });
      std::unique_lock<std::mutex> channels(channels_mu);
      for (size_t i = 0; i < entries.size();) {
        size_t j = i;
        while (j + 1 < entries.size() &&
               entries[j + 1].channel == entries[i].channel &&
               entries[j + 1].context.queue_index ==
                   entries[j].context.queue_index + 1) {
          ++j;
        }
        Tracked* t = tracked[entries[i].channel].get();
        uint64_t bytes = 0;
        for (size_t k = i; k <= j; ++k) bytes += entries[k].size;
        t->messages.fetch_sub(j - i + 1, std::memory_order_relaxed);
        t->bytes.fetch_sub(bytes, std::memory_order_relaxed);
        AddGap(b.get(), t, j - i + 1, entries[i].context.queue_index,
               entries[j].context.queue_index,
               GapRecord::Reason::kWriterBacklog, mono, offset);
        i = j + 1;
      }
    }
    backlog_bytes += b->bytes();
    queue.push_back(std::move(b));
    queue_cv.notify_one();
  }

  void DrainLoop() {
    std::vector<Tracked*> active;
    int64_t next = MonotonicNow();
    const int64_t period = options.period.count();
    for (;;) {
      const bool last = stop.load();
      std::unique_ptr<Batch> b = TakeSpare();
      {
        std::lock_guard lock(channels_mu);
        for (Tracked* t : to_adopt) {
          active.push_back(t);
          b->added.push_back(t->index);
        }
        to_adopt.clear();
      }
      const int64_t offset = RealtimeNow() - MonotonicNow();
      for (size_t i = 0; i < active.size();) {
        Tracked* t = active[i];
        DrainChannel(t, b.get(), offset);
        if (t->retired.load()) {
          active.erase(active.begin() + i);  // drained for the last time
        } else {
          ++i;
        }
      }
      // One drain in send-time order (channels were read one after another).
      std::stable_sort(b->entries.begin(), b->entries.end(),
                       [](const Entry& x, const Entry& y) {
                         return x.context.monotonic_send_ns <
                                y.context.monotonic_send_ns;
                       });
      Submit(std::move(b), offset);
      if (last) break;
      next += period;
      const int64_t now = MonotonicNow();
      if (now > next + period) {
        late_drains.fetch_add(1, std::memory_order_relaxed);
        next = now;
      }
      SleepUntil(next);
    }
    std::lock_guard lock(queue_mu);
    drain_done = true;
    queue_cv.notify_one();
  }

  // --- writer -----------------------------------------------------------------
  void Fail(const absl::Status& s) {
    {
      std::lock_guard lock(status_mu);
      if (write_error.ok()) write_error = s;
    }
    if (!failed.exchange(true)) {
      Notice(absl::StrCat("recording stopped: ", s.message()));
    }
  }

  absl::Status EnsureChannel(uint32_t index) {
    if (mcap_id.count(index) > 0) return absl::OkStatus();
    const ChannelDescription* d;
    {
      std::lock_guard lock(channels_mu);
      d = &tracked[index]->description;
    }
    // A re-created channel of the same shape keeps its MCAP channel.
    for (const auto& [other, id] : mcap_id) {
      const ChannelDescription* o;
      {
        std::lock_guard lock(channels_mu);
        o = &tracked[other]->description;
      }
      if (*o == *d) {
        mcap_id[index] = id;
        return absl::OkStatus();
      }
    }
    absl::StatusOr<uint16_t> schema =
        file->AddSchema(d->type_name, kCapnpEncoding, d->schema);
    if (!schema.ok()) return schema.status();
    absl::StatusOr<uint16_t> id =
        file->AddChannel(*schema, d->name, kCapnpEncoding, ChannelMetadata(*d));
    if (!id.ok()) return id.status();
    mcap_id[index] = *id;
    return absl::OkStatus();
  }

  absl::Status OpenFile() {
    McapWriterOptions mo = options.mcap;
    mo.overwrite = options.overwrite;
    mo.profile = kTetherProfile;
    if (mo.library == "tether") mo.library = "tether record";
    const std::string path = SplitFileName(options.path, splitting, file_index);
    absl::StatusOr<std::unique_ptr<McapWriter>> w = McapWriter::Create(path, mo);
    if (!w.ok()) return w.status();
    file = std::move(*w);
    {
      std::lock_guard lock(status_mu);
      files.push_back(path);
    }
    mcap_id.clear();
    file_messages.clear();
    file_missed.clear();
    gap_sequence = 0;
    file_started_ns = MonotonicNow();
    chunk_started_ns = file_started_ns;
    char host[256] = {};
    ::gethostname(host, sizeof(host) - 1);
    mcap::KeyValueMap meta = options.recording_metadata;
    meta["instance"] = options.channels.instance;
    meta["root"] = options.channels.root;
    meta["host"] = host;
    meta["pid"] = absl::StrCat(::getpid());
    meta["start_realtime_ns"] = absl::StrCat(start_realtime_ns);
    meta["start_monotonic_ns"] = absl::StrCat(start_monotonic_ns);
    meta["realtime_offset_ns"] = absl::StrCat(RealtimeNow() - MonotonicNow());
    meta["drain_period_ns"] = absl::StrCat(options.period.count());
    meta["file_index"] = absl::StrCat(file_index);
    if (absl::Status s = file->WriteMetadata({kRecordingMetadata, meta});
        !s.ok()) {
      return s;
    }
    absl::StatusOr<uint16_t> gap_schema =
        file->AddSchema(GapTypeName(), kCapnpEncoding, GapSchema());
    if (!gap_schema.ok()) return gap_schema.status();
    absl::StatusOr<uint16_t> gap =
        file->AddChannel(*gap_schema, kGapChannel, kCapnpEncoding,
                         {{"tether.role", "loss records of this log"}});
    if (!gap.ok()) return gap.status();
    gap_channel = *gap;
    return absl::OkStatus();
  }

  absl::Status CloseFile() {
    if (file == nullptr) return absl::OkStatus();
    mcap::KeyValueMap summary;
    {
      std::lock_guard lock(channels_mu);
      for (const auto& [index, id] : mcap_id) {
        const std::string& name = tracked[index]->description.name;
        summary[absl::StrCat("messages ", name)] =
            absl::StrCat(file_messages[index]);
        summary[absl::StrCat("missed ", name)] = absl::StrCat(file_missed[index]);
      }
    }
    summary["end_realtime_ns"] = absl::StrCat(RealtimeNow());
    absl::Status s = file->WriteMetadata({kSummaryMetadata, summary});
    absl::Status c = file->Close();
    closed_file_bytes.fetch_add(file->stats().file_bytes);
    current_file_bytes.store(0);
    file.reset();
    return s.ok() ? c : s;
  }

  absl::Status WriteBatch(const Batch& b) {
    for (uint32_t index : b.added) {
      if (absl::Status s = EnsureChannel(index); !s.ok()) return s;
    }
    for (const Gap& g : b.gaps) {
      if (absl::Status s = EnsureChannel(g.channel); !s.ok()) return s;
      std::vector<std::byte> data = EncodeGap(g.record);
      const uint64_t t = static_cast<uint64_t>(g.realtime_ns);
      // Its context: when the loss was noticed, on the monotonic clock.
      trailer.clear();
      AppendContextRecord({gap_channel, gap_sequence, g.record.detected_monotonic_ns,
                           g.record.detected_monotonic_ns,
                           static_cast<uint32_t>(::getpid()), 0, gap_sequence},
                          &trailer);
      if (absl::Status s = file->WriteMessage(
              {gap_channel, gap_sequence++, t, t, data}, trailer);
          !s.ok()) {
        return s;
      }
      file_missed[g.channel] += g.record.missed;
    }
    for (const Entry& e : b.entries) {
      if (absl::Status s = EnsureChannel(e.channel); !s.ok()) return s;
      const uint16_t id = mcap_id[e.channel];
      const transport::MessageContext& c = e.context;
      trailer.clear();
      AppendContextRecord({id, c.queue_index, c.monotonic_send_ns,
                           c.monotonic_receive_ns, c.publisher_pid,
                           c.publisher_index, c.publisher_sequence},
                          &trailer);
      mcap::Message m;
      m.channel_id = id;
      m.sequence = static_cast<uint32_t>(c.queue_index);
      m.log_time = static_cast<uint64_t>(e.realtime_receive_ns);
      m.publish_time = static_cast<uint64_t>(c.realtime_send_ns);
      m.data = std::span<const std::byte>(b.arena.data() + e.offset, e.size);
      if (absl::Status s = file->WriteMessage(m, trailer); !s.ok()) return s;
      ++file_messages[e.channel];
    }
    const int64_t now = MonotonicNow();
    if (now - chunk_started_ns >= options.chunk_period.count()) {
      if (absl::Status s = file->FlushChunk(); !s.ok()) return s;
      chunk_started_ns = now;
    }
    current_file_bytes.store(file->stats().file_bytes + file->open_chunk_bytes());
    const bool by_size = options.split_bytes > 0 &&
                         file->stats().file_bytes + file->open_chunk_bytes() >=
                             options.split_bytes;
    const bool by_time = options.split_duration.count() > 0 &&
                         now - file_started_ns >= options.split_duration.count();
    if (by_size || by_time) {
      if (absl::Status s = CloseFile(); !s.ok()) return s;
      ++file_index;
      if (absl::Status s = OpenFile(); !s.ok()) return s;
      std::vector<uint32_t> all;
      {
        std::lock_guard lock(channels_mu);
        for (const auto& t : tracked) {
          if (!t->retired.load()) all.push_back(t->index);
        }
      }
      for (uint32_t index : all) {
        if (absl::Status s = EnsureChannel(index); !s.ok()) return s;
      }
      Notice(absl::StrCat("continuing in ", file->path()));
    }
    return absl::OkStatus();
  }

  void WriterLoop() {
    for (;;) {
      std::unique_ptr<Batch> b;
      {
        std::unique_lock lock(queue_mu);
        queue_cv.wait(lock, [&] { return !queue.empty() || drain_done; });
        if (queue.empty()) break;
        b = std::move(queue.front());
        queue.pop_front();
      }
      if (!failed.load()) {
        if (absl::Status s = WriteBatch(*b); !s.ok()) Fail(s);
      }
      const size_t bytes = b->bytes();
      b->Clear();
      std::lock_guard lock(queue_mu);
      backlog_bytes -= bytes;
      if (spare.size() < 8) spare.push_back(std::move(b));
    }
    if (file != nullptr) {
      if (absl::Status s = CloseFile(); !s.ok()) Fail(s);
    }
  }
};

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
      s.messages += c.messages;
      s.bytes += c.bytes;
      s.missed += c.missed;
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
