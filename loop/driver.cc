#include "loop/driver.h"

#include <cstdio>

#include "loop/check.h"
#include "loop/event_loop.h"
#include "loop/wake_port.h"
#include "util/hot_path.h"

namespace tether::loop {
namespace {

constexpr uint64_t kStopCookie = ~uint64_t{0};

// For log lines.
long long Millis(Duration d) {
  return static_cast<long long>(
      std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
}

uint64_t CookieOf(const internal::Watcher* w) {
  return reinterpret_cast<uint64_t>(w);
}

}  // namespace

Driver::Driver(Dispatcher* dispatcher, const Clock* clock, WakePort* port)
    : dispatcher_(dispatcher), clock_(clock), port_(port) {
  TETHER_LOOP_CHECK(dispatcher != nullptr && clock != nullptr &&
                        port != nullptr,
                    "a Driver needs a dispatcher, a clock and a port");
}

// The port's owner destroys it with the driver: nothing to unwatch.
Driver::~Driver() = default;

void Driver::AddLoop(EventLoop* loop) {
  loops_.push_back(loop);
  corruption_events_scanned_ = ~uint64_t{0};  // scan the new loop's channels
  if (loop->channels() != nullptr) {
    reported_.reserve(reported_.size() + loop->channels()->channels().size());
    lost_reported_.reserve(lost_reported_.size() +
                           loop->channels()->channels().size());
  }
}

void Driver::RemoveLoop(EventLoop* loop, bool unwatch) {
  for (size_t i = 0; i < loops_.size(); ++i) {
    if (loops_[i] != loop) continue;
    loops_.erase(loops_.begin() + static_cast<std::ptrdiff_t>(i));
    if (i < started_loops_) --started_loops_;
    break;
  }
  std::vector<internal::Watcher*> kept;
  delivery_budget_ = 0;
  guest_watchers_ = 0;
  for (internal::Watcher* w : watchers_) {
    if (w->loop == loop) {
      if (unwatch && !w->stats_.corrupt) port_->Unwatch(CookieOf(w));
      continue;
    }
    w->index = kept.size();
    delivery_budget_ += w->channel_->params().queue_depth;
    if (w->wake->guest()) ++guest_watchers_;
    kept.push_back(w);
  }
  watchers_ = std::move(kept);
}

absl::Status Driver::AddWatcher(internal::Watcher* w) {
  if (absl::Status s = port_->Watch(w->wake->word(), CookieOf(w));
      !s.ok()) {
    return s;
  }
  w->index = watchers_.size();
  watchers_.push_back(w);
  delivery_budget_ += w->channel_->params().queue_depth;
  if (w->wake->guest()) ++guest_watchers_;
  return absl::OkStatus();
}

absl::Status Driver::WatchStop(int stop_fd, const StopSignals* signals) {
  TETHER_LOOP_CHECK(stop_fd_ < 0 && stop_signals_ == nullptr,
                    "WatchStop called twice");
  if (signals != nullptr) {
    // A word, which every port can wait on (futex_waitv cannot wait on fds).
    if (absl::Status s = port_->Watch(signals->word(), kStopCookie); !s.ok()) {
      return s;
    }
  } else if (stop_fd >= 0) {
    if (absl::Status s = port_->WatchFd(stop_fd, kStopCookie); !s.ok()) {
      return s;
    }
    stop_fd_ = stop_fd;
  }
  stop_signals_ = signals;
  return absl::OkStatus();
}

void Driver::Exit() {
  exit_.store(true, std::memory_order_release);
  port_->Wake();
}

bool Driver::StopRequested() const {
  return stop_signals_ != nullptr && stop_signals_->stop_requested();
}

void Driver::StartNewLoops() {
  // Index loop: an on-run callback may make another loop.
  while (started_loops_ < loops_.size()) {
    loops_[started_loops_++]->Start();
  }
}

TETHER_HOT_PATH Driver::RunEnd Driver::Run() {
  StartNewLoops();
  for (;;) {
    if (exit_.load(std::memory_order_acquire)) return RunEnd::kExit;
    if (StopRequested()) return RunEnd::kStopped;
    RunDueEvents();
    if (exit_.load(std::memory_order_acquire)) return RunEnd::kExit;
    DeliverArrived();
    if (exit_.load(std::memory_order_acquire)) return RunEnd::kExit;
    if (started_loops_ < loops_.size()) {
      StartNewLoops();
      continue;
    }
    ReportCorruptChannels();
    bool stopped = false;
    std::optional<MonotonicTime> deadline = dispatcher_->NextDeadline();
    if (guest_watchers_ > 0 || announcement_cleared_) {
      // Nobody wakes a guest: look again at least every kGuestPoll. Nor,
      // reliably, a waiter whose announcements get cleared.
      const MonotonicTime poll = clock_->Now() + kGuestPoll;
      if (!deadline.has_value() || poll < *deadline) deadline = poll;
    }
    const WaitResult r = port_->Wait(
        deadline, *this,
        [&stopped](uint64_t cookie) { stopped |= cookie == kStopCookie; });
    if (stopped && (stop_signals_ == nullptr || StopRequested())) {
      return RunEnd::kStopped;
    }
    if (r.idle) return RunEnd::kIdle;
  }
}

TETHER_HOT_PATH void Driver::RunDueEvents() {
  for (std::optional<MonotonicTime> next = dispatcher_->NextDeadline();
       next.has_value() && *next <= clock_->Now() &&
       !exit_.load(std::memory_order_relaxed);
       next = dispatcher_->NextDeadline()) {
    dispatcher_->RunDue(clock_->Now());
  }
}

bool Driver::Refill(internal::Watcher& w) {
  if (w.has_pending) return true;
  if (w.stats_.corrupt || !w.subscriber->HasNext()) return false;
  switch (w.subscriber->Next(&w.pending)) {
    case transport::ReceiveStatus::kOk:
      w.has_pending = true;
      return true;
    case transport::ReceiveStatus::kCorrupt:
      MarkCorrupt(w);
      return false;
    case transport::ReceiveStatus::kNothingNew:
    case transport::ReceiveStatus::kMalformed:
      return false;
  }
  return false;
}

TETHER_HOT_PATH void Driver::CheckOverwrittenWhileRead(internal::Watcher& w) {
  const uint64_t now = w.subscriber->overwritten_while_read();
  if (now == w.stats_.overwritten_while_read) return;
  const bool first = w.stats_.overwritten_while_read == 0;
  w.stats_.overwritten_while_read = now;
  if (!first) return;
  // Error path, once per watcher: one line naming who could do this.
  std::fprintf(stderr,
               "tether: loop %s: channel %s: a message pinned for a callback "
               "was overwritten while it ran: a process with write access to "
               "%s %s (counted in overwritten_while_read; what the callback "
               "read may be torn)\n",
               w.loop->name().c_str(), w.channel_->name().c_str(),
               w.channel_->reader_state_path().c_str(),
               w.channel_->reader_state_lost()
                   ? "truncated or grew it, so pins are no longer shared "
                     "between processes (`tether list` says how to re-create "
                     "the channel)"
                   : "cleared pins");
}

[[gnu::cold]] void Driver::NoteAnnouncementCleared(internal::Watcher& w) {
  // A state that was lost meanwhile starts afresh without it: said apart.
  if (w.channel_->reader_state_lost() || w.announcement_cleared) return;
  w.announcement_cleared = true;
  announcement_cleared_ = true;
  std::fprintf(stderr,
               "tether: loop %s: channel %s: a process with write access to "
               "%s cleared this loop's wake announcement while it slept, so "
               "publishers skipped its wakes (messages came up to %lld ms "
               "late, found by its lost-wake check); the loop looks for "
               "messages every %lld ms from now on, and those lost are "
               "counted as missed\n",
               w.loop->name().c_str(), w.channel_->name().c_str(),
               w.channel_->reader_state_path().c_str(),
               Millis(kLostWakeCheck),
               Millis(kGuestPoll));
}

void Driver::MarkCorrupt(internal::Watcher& w) {
  // Error path: one unwatch (a syscall on uring_futex) and one line.
  w.stats_.corrupt = true;
  w.has_pending = false;
  w.subscriber->Release();
  port_->Unwatch(CookieOf(&w));
  ++corrupt_watchers_;
  FirstReport(w.channel_, &reported_);
  const std::string_view what = w.channel_->corruption();
  std::fprintf(stderr,
               "tether: loop %s: channel %s is corrupt (%.*s); stopped "
               "watching it, the rest of the loop runs on. Remove %s and "
               "restart the stack's nodes on it.\n",
               w.loop->name().c_str(), w.channel_->name().c_str(),
               static_cast<int>(what.size()), what.data(),
               w.channel_->path().c_str());
}

bool Driver::FirstReport(const transport::ChannelHandle* channel,
                         std::vector<const transport::ChannelHandle*>* list) {
  for (const transport::ChannelHandle* r : *list) {
    if (r == channel) return false;
  }
  if (list->size() < list->capacity()) list->push_back(channel);
  return true;
}

TETHER_HOT_PATH void Driver::ReportCorruptChannels() {
  // Every iteration: one atomic load unless a corruption was found since.
  const uint64_t events = transport::ChannelHandle::CorruptionEvents();
  if (events == corruption_events_scanned_) return;
  corruption_events_scanned_ = events;
  ReportNewCorruption();
}

[[gnu::cold]] void Driver::ReportNewCorruption() {
  // A watcher whose channel lost its reader state (a SIGBUS the guard
  // absorbed counts as an event) can no longer be woken by publishers in
  // other processes: it polls from now on, as a guest does.
  guest_watchers_ = 0;
  for (const internal::Watcher* w : watchers_) {
    if (w->wake->guest()) ++guest_watchers_;
  }
  for (EventLoop* loop : loops_) {
    if (loop->channels() == nullptr) continue;
    for (const auto& [name, channel] : loop->channels()->channels()) {
      if (!channel->corrupt() && channel->reader_state_lost() &&
          FirstReport(channel.get(), &lost_reported_)) {
        std::fprintf(
            stderr,
            "tether: loop %s: channel %s: a process with write access to "
            "%s truncated or grew it, so this process no longer shares pins "
            "and wake announcements there: it goes on, wakes readers on "
            "every send and looks for messages every %lld ms; `tether list` "
            "says how to re-create the channel\n",
            loop->name().c_str(), name.c_str(),
            channel->reader_state_path().c_str(),
            Millis(kGuestPoll));
      }
      if (!channel->corrupt()) continue;
      // Empty while another thread is still writing its finding: the count
      // moves once it is written, and the next scan reports it.
      const std::string_view what = channel->corruption();
      if (what.empty() || !FirstReport(channel.get(), &reported_)) continue;
      std::fprintf(stderr,
                   "tether: loop %s: channel %s is corrupt (%.*s); its sends "
                   "fail and its reads find nothing from now on (counted in "
                   "the senders' and fetchers' stats), the rest of the loop "
                   "runs on. Remove %s and restart the stack's nodes on it.\n",
                   loop->name().c_str(), name.c_str(),
                   static_cast<int>(what.size()), what.data(),
                   channel->path().c_str());
    }
  }
}

TETHER_HOT_PATH int Driver::DeliverArrived() {
  int delivered = 0;
  // Bounded: messages that keep arriving while we deliver wait for the next
  // iteration, after the timers that came due meanwhile.
  for (uint64_t budget = delivery_budget_; budget > 0; --budget) {
    // Each watcher's next message, pinned; run the oldest, refill, repeat.
    internal::Watcher* oldest = nullptr;
    for (internal::Watcher* w : watchers_) {
      if (!Refill(*w)) continue;
      if (oldest == nullptr || w->pending.context.monotonic_send_ns <
                                   oldest->pending.context.monotonic_send_ns) {
        oldest = w;
      }
    }
    if (oldest == nullptr) break;
    oldest->has_pending = false;
    oldest->loop->RunWatcherCallback(*oldest);
    ++delivered;
    if (exit_.load(std::memory_order_relaxed) || StopRequested()) break;
  }
  return delivered;
}

TETHER_HOT_PATH void Driver::BeginSleep() {
  for (internal::Watcher* w : watchers_) {
    if (!w->stats_.corrupt) w->wake->BeginSleep();
  }
}

TETHER_HOT_PATH bool Driver::HasPendingWork() {
  if (exit_.load(std::memory_order_relaxed) || StopRequested()) return true;
  for (internal::Watcher* w : watchers_) {
    if (w->stats_.corrupt) continue;
    if (w->has_pending || w->subscriber->HasNext()) return true;
  }
  return false;
}

TETHER_HOT_PATH void Driver::EndSleep() {
  for (internal::Watcher* w : watchers_) {
    if (!w->stats_.corrupt && !w->wake->EndSleep()) [[unlikely]] {
      NoteAnnouncementCleared(*w);
    }
  }
}

}  // namespace tether::loop
