// loop: EventLoop, the interface robot nodes are written against. A node
// takes an EventLoop* and makes senders, watchers (a callback per new
// message, in order, read in place), fetchers (pull the latest or next
// message), timers, phased loops and on-run callbacks on it. It never picks
// the kind: main() builds a UringEventLoop (real time, shared memory) or a
// test builds loops from a SimulatedEventLoopFactory (virtual time,
// deterministic). Running and exiting belong to those concrete kinds.
//
// Threading: an EventLoop and everything made from it belong to one thread
// (the loop thread). Setup (Make*, Add*, OnRun) happens before Run() or in
// callbacks; it allocates. Callbacks, sends and fetches are RT-safe.
#ifndef TETHER_LOOP_EVENT_LOOP_H_
#define TETHER_LOOP_EVENT_LOOP_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "loop/clock.h"
#include "loop/dispatch.h"
#include "transport/channel_set.h"
#include "transport/framing.h"
#include "transport/raw_endpoints.h"
#include "transport/typed_endpoints.h"

namespace tether::loop {

using transport::MessageContext;
using transport::RawMessage;

// Endpoints handed out by a loop: transport's, with the loop's clock hooked
// in (send and receive times follow the loop's clock; a simulated loop
// learns of each send).
using RawSender = transport::RawPublisher;
template <typename T>
using Sender = transport::Publisher<T>;
using RawFetcher = transport::RawSubscriber;
template <typename T>
using Fetcher = transport::Subscriber<T>;

// What the loop is handling now (EventLoop::context()).
struct EventContext {
  enum class Type { kNone, kOnRun, kTimer, kPhasedLoop, kWatcher };
  Type type = Type::kNone;
  // Timer / phased loop: the time it was due (the grid point, not the late
  // wake-up time). Watcher: the message's monotonic send time. On-run: the
  // time Run() started.
  MonotonicTime monotonic_event_time;
  // Watcher: the message's context; null otherwise.
  const MessageContext* message = nullptr;
};

class EventLoop;

// A timer made by EventLoop::AddTimer(); owned by the loop. Loop thread.
class TimerHandle {
 public:
  // Fires at `base`, then every `period` (if positive) on that grid. A late
  // loop runs it once and counts the skipped expirations. RT-safe.
  void Schedule(MonotonicTime base, Duration period = Duration::zero());
  void Disable();
  RunStats stats() const;

 private:
  friend class EventLoop;
  TimerHandle(EventLoop* loop) : loop_(loop) {}
  EventLoop* loop_;
  TimerId id_{};
  MonotonicTime base_;
  Duration period_ = Duration::zero();
};

// A phased loop made by EventLoop::AddPhasedLoop(); owned by the loop.
class PhasedLoopHandle {
 public:
  // New period and offset from the next phase point on. RT-safe.
  void Reset(Duration period, Duration offset = Duration::zero());
  void Disable();
  void Enable();
  RunStats stats() const;

 private:
  friend class EventLoop;
  PhasedLoopHandle(EventLoop* loop) : loop_(loop) {}
  EventLoop* loop_;
  PhasedLoopId id_{};
  Duration period_ = Duration::zero();
  Duration offset_ = Duration::zero();
};

// Per-watcher counters (for stat tools and tests).
struct WatcherStats {
  uint64_t received = 0;
  uint64_t missed = 0;     // lost before this watcher got to them
  uint64_t malformed = 0;  // typed watchers: invalid bytes, skipped
};

class EventLoop : protected transport::EndpointHooks {
 public:
  ~EventLoop() override;
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  const std::string& name() const { return name_; }

  // --- channels (setup; errors name the channel and say what to fix) ------
  absl::StatusOr<std::unique_ptr<RawSender>> MakeRawSender(
      const std::string& channel);
  template <typename T>
  absl::StatusOr<std::unique_ptr<Sender<T>>> MakeSender(
      const std::string& channel) {
    absl::StatusOr<transport::ChannelHandle*> c = channels_->Find(channel);
    if (!c.ok()) return c.status();
    return Sender<T>::Create(*c, this);
  }

  // Pulls messages without a callback: Latest() (the newest) or Next() (in
  // order, with loss counts). Pins what it returns until the next call.
  absl::StatusOr<std::unique_ptr<RawFetcher>> MakeRawFetcher(
      const std::string& channel);
  template <typename T>
  absl::StatusOr<std::unique_ptr<Fetcher<T>>> MakeFetcher(
      const std::string& channel) {
    absl::StatusOr<transport::ChannelHandle*> c = channels_->Find(channel);
    if (!c.ok()) return c.status();
    return Fetcher<T>::Create(*c, {}, this);
  }

  // Calls `fn` for every message sent on `channel` after this call, in
  // order, read in place (valid during the call only). Lost messages show in
  // the context's `missed`. RT-safe dispatch, as RT-safe as `fn`.
  absl::Status MakeRawWatcher(
      const std::string& channel,
      absl::AnyInvocable<void(const RawMessage&)> fn);
  // Typed: every message is checked (bounds, limits) before `fn` sees it; a
  // malformed one is skipped and counted (watcher_stats), never a crash.
  // Fails if the channel carries another type (both names in the error).
  template <typename T>
  absl::Status MakeWatcher(
      const std::string& channel,
      absl::AnyInvocable<void(typename T::Reader, const MessageContext&)> fn) {
    absl::StatusOr<transport::ChannelHandle*> c = channels_->Find(channel);
    if (!c.ok()) return c.status();
    if (absl::Status s = transport::CheckChannelType<T>(**c); !s.ok()) return s;
    return AddWatcher(*c, [this, fn = std::move(fn)](
                              const RawMessage& m, WatcherStats& stats) mutable {
      transport::SlotMessageReader reader(m.bytes);
      if (transport::VisitRoot<T>(reader, [&](typename T::Reader root) {
            fn(root, m.context);
          }) != transport::FramingStatus::kOk) {
        ++stats.malformed;
      }
    });
  }
  // Counters of the i-th watcher made on this loop.
  WatcherStats watcher_stats(size_t i) const;

  // --- time -------------------------------------------------------------
  TimerHandle* AddTimer(absl::AnyInvocable<void()> fn);
  // `fn(cycles)` at offset + k*period; cycles > 1 reports missed cycles.
  PhasedLoopHandle* AddPhasedLoop(absl::AnyInvocable<void(int cycles)> fn,
                                  Duration period,
                                  Duration offset = Duration::zero());
  // Runs once when the loop starts, before any timer or watcher.
  void OnRun(absl::AnyInvocable<void()> fn);

  MonotonicTime monotonic_now() const { return clock_->Now(); }
  virtual int64_t realtime_now_ns() const = 0;
  const EventContext& context() const { return context_; }

 protected:
  // `channels`, `dispatcher` and `clock` must outlive the loop.
  EventLoop(std::string name, const transport::ChannelSet* channels,
            Dispatcher* dispatcher, const Clock* clock);

  struct Watcher {
    transport::ChannelHandle* channel = nullptr;
    std::unique_ptr<RawFetcher> subscriber;
    absl::AnyInvocable<void(const RawMessage&, WatcherStats&)> fn;
    WatcherStats stats;
    RawMessage pending;        // the next message, pinned (uring merge)
    bool has_pending = false;
    EventId delivery{};        // simulated loops: the delivery event
  };

  // Kind-specific step after a watcher is made (the uring loop watches its
  // channel's wake word; the simulated loop makes its delivery event).
  virtual absl::Status WatcherAdded(Watcher& watcher) = 0;

  // Runs `watcher`'s callback on its next message (if any); false when
  // nothing was there. Sets the context while it runs. RT-safe.
  bool DeliverOne(Watcher& watcher);
  // Delivers every new message of every watcher, across channels in send
  // time order (each channel in order). RT-safe; no allocation.
  int DeliverAllInOrder();
  // Runs the on-run callbacks with the on-run context.
  void RunOnRunCallbacks();

  // transport::EndpointHooks: stamp from this loop's clock.
  void StampSend(transport::SendTimes* times) override;
  void AfterSend(transport::ChannelHandle*) override {}
  int64_t MonotonicNowNs() override {
    return static_cast<int64_t>(ToMonotonicNs(clock_->Now()));
  }

  const std::vector<std::unique_ptr<Watcher>>& watchers() const {
    return watchers_;
  }
  Dispatcher* dispatcher() const { return dispatcher_; }
  const transport::ChannelSet* channels() const { return channels_; }

 private:
  friend class TimerHandle;
  friend class PhasedLoopHandle;
  absl::Status AddWatcher(
      transport::ChannelHandle* channel,
      absl::AnyInvocable<void(const RawMessage&, WatcherStats&)> fn);
  void RunWatcherCallback(Watcher& w);

  const std::string name_;
  const transport::ChannelSet* const channels_;
  Dispatcher* const dispatcher_;
  const Clock* const clock_;
  EventContext context_;
  std::vector<std::unique_ptr<Watcher>> watchers_;
  std::vector<std::unique_ptr<TimerHandle>> timers_;
  std::vector<std::unique_ptr<PhasedLoopHandle>> phased_loops_;
  std::vector<absl::AnyInvocable<void()>> on_run_;
};

}  // namespace tether::loop

#endif  // TETHER_LOOP_EVENT_LOOP_H_
