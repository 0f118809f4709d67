#include "loop/event_loop.h"

#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "loop/check.h"
#include "loop/driver.h"
#include "loop/realtime.h"
#include "util/hot_path.h"

namespace tether::loop {
namespace {

// A RealtimeScope around a node's callback when the loop checks
// allocations (EventLoop::set_check_allocations).
class CallbackScope {
 public:
  explicit CallbackScope(bool on) {
    if (on) scope_.emplace();
  }

 private:
  std::optional<RealtimeScope> scope_;
};

// The latest grid point base + k*period at or before `now` (k >= 0), or
// base. What a periodic event was due at when it runs at `now`.
MonotonicTime LatestGridPoint(MonotonicTime base, Duration period,
                              MonotonicTime now) {
  if (period <= Duration::zero() || now <= base) return base;
  return base + ((now - base) / period) * period;
}

}  // namespace

EventLoop::EventLoop(std::string name, const transport::ChannelSet* channels,
                     Dispatcher* dispatcher, const Clock* clock,
                     Driver* driver)
    : name_(std::move(name)),
      channels_(channels),
      dispatcher_(dispatcher),
      clock_(clock),
      driver_(driver) {
  driver_->AddLoop(this);
}

EventLoop::~EventLoop() {
  TETHER_LOOP_CHECK(detached_,
                    "an EventLoop kind must call Detach() in its destructor");
  // The loop's own readers go first: what is left was handed out.
  watchers_.clear();
  std::string senders, fetchers;
  {
    const std::lock_guard<std::mutex> lock(live_endpoints_mutex_);
    const auto list = [](const EndpointCounts& counts) {
      std::map<std::string, int> by_name;  // in a stable order
      for (const auto& [channel, count] : counts) {
        by_name[channel->name()] += count;
      }
      std::string out;
      for (const auto& [name, count] : by_name) {
        absl::StrAppend(&out, out.empty() ? "" : ", ", count, " on ", name);
      }
      return out;
    };
    senders = list(live_senders_);
    fetchers = list(live_fetchers_);
  }
  if (!senders.empty() || !fetchers.empty()) {
    const std::string what = absl::StrCat(
        senders.empty() ? "" : absl::StrCat("senders (", senders, ")"),
        senders.empty() || fetchers.empty() ? "" : " and ",
        fetchers.empty() ? "" : absl::StrCat("fetchers (", fetchers, ")"));
    std::fprintf(stderr,
                 "tether::loop: event loop \"%s\" destroyed while %s it "
                 "made still exist: destroy every sender and fetcher before "
                 "the loop that made it (its next Send() or read would call "
                 "the freed loop)\n",
                 name_.c_str(), what.c_str());
    std::abort();
  }
}

void EventLoop::CountEndpoint(EndpointCounts* counts,
                              const transport::ChannelHandle& channel,
                              int delta) {
  const std::lock_guard<std::mutex> lock(live_endpoints_mutex_);
  auto it = counts->try_emplace(&channel, 0).first;
  if ((it->second += delta) <= 0) counts->erase(it);
}

void EventLoop::PublisherMade(const transport::ChannelHandle& channel) {
  CountEndpoint(&live_senders_, channel, +1);
}

void EventLoop::PublisherGone(const transport::ChannelHandle& channel) {
  CountEndpoint(&live_senders_, channel, -1);
}

void EventLoop::SubscriberMade(const transport::ChannelHandle& channel) {
  CountEndpoint(&live_fetchers_, channel, +1);
}

void EventLoop::SubscriberGone(const transport::ChannelHandle& channel) {
  CountEndpoint(&live_fetchers_, channel, -1);
}

void EventLoop::Detach(bool port_survives) {
  if (detached_) return;
  detached_ = true;
  driver_->RemoveLoop(this, port_survives);
}

absl::StatusOr<std::unique_ptr<RawSender>> EventLoop::MakeRawSender(
    const std::string& channel) {
  absl::StatusOr<transport::ChannelHandle*> c = channels_->Find(channel);
  if (!c.ok()) return c.status();
  return transport::RawPublisher::Create(*c, this);
}

absl::StatusOr<std::unique_ptr<RawFetcher>> EventLoop::MakeRawFetcher(
    const std::string& channel) {
  absl::StatusOr<transport::ChannelHandle*> c = channels_->Find(channel);
  if (!c.ok()) return c.status();
  NoteGuest(*c);
  return transport::RawSubscriber::Create(*c, {}, this);
}

void EventLoop::NoteGuest(transport::ChannelHandle* channel) {
  if (!channel->guest()) return;
  for (const transport::ChannelHandle* noted : guest_noted_) {
    if (noted == channel) return;
  }
  guest_noted_.push_back(channel);
  // Setup: one line per channel, so the user knows why reads are copies.
  std::fprintf(stderr, "tether: loop %s: channel %s: %s\n", name_.c_str(),
               channel->name().c_str(), channel->GuestReason().c_str());
}

void EventLoop::MessageMalformed(const transport::ChannelHandle& channel,
                                 const MessageContext& context,
                                 const std::string& why) {
  for (const transport::ChannelHandle* noted : malformed_noted_) {
    if (noted == &channel) return;
  }
  // Failure path, once per channel: the readers' counters say the rest.
  const AllowAllocationScope allow;
  malformed_noted_.push_back(&channel);
  std::fprintf(stderr,
               "tether: loop %s: channel %s: skipped a malformed message "
               "(queue index %llu, from pid %u): %s; later ones are skipped "
               "and counted (`malformed` in the readers' stats), not logged. "
               "A process that writes this channel sends bytes that are not "
               "a valid %s.\n",
               name_.c_str(), channel.name().c_str(),
               static_cast<unsigned long long>(context.queue_index),
               context.publisher_pid, why.c_str(),
               channel.type_name().c_str());
}

absl::StatusOr<WatcherHandle*> EventLoop::MakeRawWatcher(
    const std::string& channel,
    absl::AnyInvocable<void(const RawMessage&)> fn) {
  absl::StatusOr<transport::ChannelHandle*> c = channels_->Find(channel);
  if (!c.ok()) return c.status();
  return AddWatcher(*c, [fn = std::move(fn)](const RawMessage& m,
                                             WatcherStats&) mutable { fn(m); });
}

absl::StatusOr<WatcherHandle*> EventLoop::AddWatcher(
    transport::ChannelHandle* channel,
    absl::AnyInvocable<void(const RawMessage&, WatcherStats&)> fn) {
  auto w = std::make_unique<internal::Watcher>();
  w->loop = this;
  w->channel_ = channel;
  absl::StatusOr<std::unique_ptr<RawFetcher>> sub =
      transport::RawSubscriber::Create(channel, {}, this);
  if (!sub.ok()) {
    return absl::Status(sub.status().code(),
                        absl::StrCat("watcher on ", channel->name(), " in ",
                                     name_, ": ", sub.status().message()));
  }
  w->subscriber = std::move(*sub);
  w->start_index_ = w->subscriber->next_index();
  NoteGuest(channel);
  if (!w->subscriber->guest_reason().empty()) {
    // Setup: one line, so the user knows why this watcher reads copies.
    std::fprintf(stderr, "tether: loop %s: %s\n", name_.c_str(),
                 w->subscriber->guest_reason().c_str());
  }
  w->wake.emplace(channel->MakeWakeHandle());
  w->fn = std::move(fn);
  if (absl::Status s = driver_->AddWatcher(w.get()); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("watcher on ", channel->name(),
                                               " in ", name_, ": ",
                                               s.message()));
  }
  watchers_.push_back(std::move(w));
  return watchers_.back().get();
}

WatcherStats EventLoop::watcher_stats(size_t i) const {
  return i < watchers_.size() ? watchers_[i]->stats_ : WatcherStats{};
}

absl::StatusOr<EventLoop::ChannelPeers> EventLoop::Peers(
    const std::string& channel) const {
  absl::StatusOr<transport::ChannelHandle*> c = channels_->Find(channel);
  if (!c.ok()) return c.status();
  const shm::ChannelStats stats = (*c)->stats();
  ChannelPeers peers;
  peers.publishers = stats.publishers;
  peers.readers = stats.pinning_readers;
  peers.waiters = stats.registered_sleepers;
  peers.messages = stats.next_queue_index;
  peers.send_failures = stats.send_failures;
  return peers;
}

absl::StatusOr<EventLoop::ChannelPeers> EventLoop::LivePeers(
    const std::string& channel) {
  absl::StatusOr<transport::ChannelHandle*> c = channels_->Find(channel);
  if (!c.ok()) return c.status();
  (void)(*c)->Sweep();
  return Peers(channel);
}

absl::Status EventLoop::OnReaders(const std::string& channel, int readers,
                                  absl::AnyInvocable<void()> fn,
                                  Duration poll) {
  absl::StatusOr<transport::ChannelHandle*> c = channels_->Find(channel);
  if (!c.ok()) return c.status();
  timers_.push_back(std::unique_ptr<TimerHandle>(new TimerHandle(this)));
  TimerHandle* timer = timers_.back().get();
  transport::ChannelHandle* handle = *c;
  timer->id_ = dispatcher_->AddTimer(
      [this, timer, handle, readers, fn = std::move(fn)]() mutable {
        if (handle->stats().pinning_readers < readers) return;
        timer->Disable();
        context_ = {EventContext::Type::kTimer, clock_->Now(), nullptr};
        {
          const CallbackScope scope(check_allocations_);
          fn();
        }
        context_ = {};
      });
  timer->Schedule(clock_->Now(), poll);
  return absl::OkStatus();
}

TETHER_HOT_PATH void EventLoop::RunWatcherCallback(internal::Watcher& w) {
  const MessageContext& c = w.pending.context;
  ++w.stats_.received;
  w.stats_.missed += c.missed;
  context_ = {EventContext::Type::kWatcher,
              FromMonotonicNs(static_cast<uint64_t>(c.monotonic_send_ns)), &c};
  {
    const CallbackScope scope(check_allocations_);
    w.fn(w.pending, w.stats_);
  }
  context_ = {};
  w.subscriber->Release();
  driver_->CheckOverwrittenWhileRead(w);
}

void EventLoop::Start() {
  if (started_) return;
  started_ = true;
  for (auto& fn : on_run_) {
    context_ = {EventContext::Type::kOnRun, clock_->Now(), nullptr};
    const CallbackScope scope(check_allocations_);
    fn();
  }
  context_ = {};
  on_run_.clear();
}

TETHER_HOT_PATH void EventLoop::StampSend(transport::SendTimes* times) {
  times->monotonic_ns = ToMonotonicNs(clock_->Now());
  times->realtime_ns = static_cast<uint64_t>(realtime_now_ns());
}

TimerHandle* EventLoop::AddTimer(absl::AnyInvocable<void()> fn) {
  timers_.push_back(std::unique_ptr<TimerHandle>(new TimerHandle(this)));
  TimerHandle* h = timers_.back().get();
  h->id_ = dispatcher_->AddTimer([this, h, fn = std::move(fn)]() mutable {
    context_ = {EventContext::Type::kTimer,
                LatestGridPoint(h->base_, h->period_, clock_->Now()), nullptr};
    {
      const CallbackScope scope(check_allocations_);
      fn();
    }
    context_ = {};
  });
  return h;
}

PhasedLoopHandle* EventLoop::AddPhasedLoop(
    absl::AnyInvocable<void(int cycles)> fn, Duration period, Duration offset) {
  phased_loops_.push_back(
      std::unique_ptr<PhasedLoopHandle>(new PhasedLoopHandle(this)));
  PhasedLoopHandle* h = phased_loops_.back().get();
  h->period_ = period;
  h->offset_ = offset;
  h->id_ = dispatcher_->AddPhasedLoop(
      [this, h, fn = std::move(fn)](int cycles) mutable {
        context_ = {EventContext::Type::kPhasedLoop,
                    LatestGridPoint(MonotonicTime() + h->offset_ % h->period_,
                                    h->period_, clock_->Now()),
                    nullptr};
        {
          const CallbackScope scope(check_allocations_);
          fn(cycles);
        }
        context_ = {};
      },
      period, offset);
  return h;
}

void EventLoop::OnRun(absl::AnyInvocable<void()> fn) {
  if (!started_) {
    on_run_.push_back(std::move(fn));
    return;
  }
  // Already running: a one-shot event at the next iteration, in the on-run
  // context.
  const EventId id =
      dispatcher_->AddEvent([this, fn = std::move(fn)]() mutable {
        context_ = {EventContext::Type::kOnRun, clock_->Now(), nullptr};
        {
          const CallbackScope scope(check_allocations_);
          fn();
        }
        context_ = {};
      });
  dispatcher_->Schedule(id, clock_->Now());
}

void TimerHandle::Schedule(MonotonicTime base, Duration period) {
  base_ = base;
  period_ = period;
  loop_->dispatcher_->ScheduleTimer(id_, base, period);
}

void TimerHandle::Disable() { loop_->dispatcher_->DisableTimer(id_); }

RunStats TimerHandle::stats() const {
  return loop_->dispatcher_->timer_stats(id_);
}

void PhasedLoopHandle::Reset(Duration period, Duration offset) {
  period_ = period;
  offset_ = offset;
  loop_->dispatcher_->ResetPhasedLoop(id_, period, offset);
}

void PhasedLoopHandle::Disable() { loop_->dispatcher_->DisablePhasedLoop(id_); }
void PhasedLoopHandle::Enable() { loop_->dispatcher_->EnablePhasedLoop(id_); }

RunStats PhasedLoopHandle::stats() const {
  return loop_->dispatcher_->phased_loop_stats(id_);
}

}  // namespace tether::loop
