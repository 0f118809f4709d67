// The logger's discovery and drain threads: finding the channels to record
// and copying what arrived on them, every period, into batches for the
// writer (logger_writer.cc).
#include "log/logger_impl.h"

#include <fnmatch.h>
#include <sys/stat.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <mutex>

#include "absl/strings/str_cat.h"

namespace tether::log {
namespace {

using internal::MonotonicNow;
using internal::RealtimeNow;

constexpr int64_t kStopCheckNs = 50'000'000;

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

}  // namespace

bool Logger::Impl::Wanted(const std::string& name) const {
  if (!options.include.empty() &&
      std::none_of(options.include.begin(), options.include.end(),
                   [&](const std::string& p) { return GlobMatch(p, name); })) {
    return false;
  }
  return std::none_of(
      options.exclude.begin(), options.exclude.end(),
      [&](const std::string& p) { return GlobMatch(p, name); });
}

void Logger::Impl::Discover(bool at_start) {
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

void Logger::Impl::DiscoveryLoop() {
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

void Logger::Impl::AddGap(Batch* b, Tracked* t, uint64_t missed, uint64_t first,
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

void Logger::Impl::DrainChannel(Tracked* t, Batch* b, int64_t offset) {
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

std::unique_ptr<internal::Batch> Logger::Impl::TakeSpare() {
  std::lock_guard lock(queue_mu);
  if (spare.empty()) return std::make_unique<Batch>();
  std::unique_ptr<Batch> b = std::move(spare.back());
  spare.pop_back();
  return b;
}

void Logger::Impl::Submit(std::unique_ptr<Batch> b, int64_t offset) {
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

void Logger::Impl::DrainLoop() {
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
    // In steps of at most 50 ms, so a Stop() is not kept waiting for a
    // long --period (record --duration ended up to a period late).
    for (int64_t t = MonotonicNow(); t < next && !stop.load();
         t = MonotonicNow()) {
      SleepUntil(std::min(next, t + kStopCheckNs));
    }
  }
  std::lock_guard lock(queue_mu);
  drain_done = true;
  queue_cv.notify_one();
}

}  // namespace tether::log
