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
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "loop/clock.h"
#include "loop/dispatch.h"
#include "loop/realtime.h"
#include "loop/watcher.h"
#include "transport/channel_set.h"
#include "transport/framing.h"
#include "transport/raw_endpoints.h"
#include "transport/typed_endpoints.h"
#include "util/hot_path.h"

namespace tether::loop {

using transport::MessageContext;
using transport::RawMessage;

// Endpoints handed out by a loop: transport's, with the loop's clock hooked
// in (send and receive times follow the loop's clock, real or virtual).
// Lifetime: an endpoint keeps pointers into its loop and channel, so it
// must be destroyed before the loop that made it (declare senders and
// fetchers as members of the node, which the loop outlives).
using RawSender = transport::RawPublisher;
template <typename T>
using Sender = transport::Publisher<T>;
using RawFetcher = transport::RawSubscriber;
template <typename T>
using Fetcher = transport::Subscriber<T>;
// What node code builds and sends with (no need to name transport::).
template <typename T>
using Loan = transport::Loan<T>;
using PublishStatus = transport::PublishStatus;
using PublishResult = transport::PublishResult;
using ReceiveStatus = transport::ReceiveStatus;
template <typename T>
using Message = transport::Message<T>;

// What the loop is handling now (EventLoop::context()).
struct EventContext {
  enum class Type { kNone, kOnRun, kTimer, kPhasedLoop, kWatcher };
  Type type = Type::kNone;
  // Timer / phased loop: the time it was due (the grid point, not the late
  // wake-up time). Watcher: the message's monotonic send time. On-run: the
  // time the loop started.
  MonotonicTime monotonic_event_time;
  // Watcher: the message's context; null otherwise.
  const MessageContext* message = nullptr;
};

class Driver;
class EventLoop;

// A timer made by EventLoop::AddTimer(); owned by the loop (valid while the
// loop lives). Loop thread only.
class TimerHandle {
 public:
  // Fires at `base`, then every `period` (if positive) on that grid. A late
  // loop runs it once and counts the skipped expirations. Replaces an
  // earlier schedule. RT-safe: no allocation, O(log timers).
  void Schedule(MonotonicTime base, Duration period = Duration::zero());
  // Stops it (no-op when not scheduled). RT-safe.
  void Disable();
  // Runs and skipped expirations so far. RT-safe.
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
// Loop thread only.
class PhasedLoopHandle {
 public:
  // New period and offset from the next phase point on. RT-safe.
  void Reset(Duration period, Duration offset = Duration::zero());
  // Stops / restarts it (at the first phase point after now). RT-safe.
  void Disable();
  void Enable();
  // Runs and missed phase points so far. RT-safe.
  RunStats stats() const;

 private:
  friend class EventLoop;
  PhasedLoopHandle(EventLoop* loop) : loop_(loop) {}
  EventLoop* loop_;
  PhasedLoopId id_{};
  Duration period_ = Duration::zero();
  Duration offset_ = Duration::zero();
};

// The interface a node is written against. Made by a UringEventLoop (one per
// process) or a SimulatedEventLoopFactory (many, on virtual time); a node
// never knows which. Not copyable or movable.
class EventLoop : protected transport::EndpointHooks {
 public:
  ~EventLoop() override;
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // The node's name (logs, errors). Any thread.
  const std::string& name() const { return name_; }

  // --- channels ---------------------------------------------------------
  // All of these are setup calls: loop thread (before running or from a
  // callback), not RT-safe (they register in the channel and allocate).
  // Errors name the channel and say what to fix: NotFound for a channel the
  // loop's stack does not have (listing those it has), FailedPrecondition
  // for another message type (both names), ResourceExhausted when the
  // channel's maxPublishers / maxPinned are all taken.

  // A publisher on `channel`: Loan() -> write -> Send(), or Publish() of
  // framed bytes. Its sends are RT-safe (no allocation, no lock, at most one
  // syscall: the wake, only when a reader sleeps). Destroy it before the
  // loop (and the loop before the ChannelSet): a loop destroyed while a
  // sender it made lives aborts, naming the sender's channel.
  absl::StatusOr<std::unique_ptr<RawSender>> MakeRawSender(
      const std::string& channel);
  // Typed: MakeLoan() builds T in place in the slot; Send() commits it.
  template <typename T>
  absl::StatusOr<std::unique_ptr<Sender<T>>> MakeSender(
      const std::string& channel) {
    absl::StatusOr<transport::ChannelHandle*> c = channels_->Find(channel);
    if (!c.ok()) return c.status();
    return Sender<T>::Create(*c, this);
  }

  // Pulls messages without a callback: Latest() (the newest) or Next() (in
  // order, with loss counts). Pins what it returns until the next call. Its
  // reads are RT-safe. Takes one of the channel's maxPinned entries. Destroy
  // it before the loop: a loop destroyed while a fetcher it made lives
  // aborts, naming the fetcher's channel.
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
  // order, read in place (valid during the call only), across channels in
  // send-time order. Lost messages show in the context's `missed`. Takes one
  // of the channel's maxPinned entries. Dispatch is RT-safe; `fn` runs on
  // the loop thread and is as RT-safe as it is written. A channel found
  // corrupt stops its watcher (WatcherStats::corrupt) and the loop runs on.
  // Returns the watcher's handle (its stats), owned by the loop.
  absl::StatusOr<WatcherHandle*> MakeRawWatcher(
      const std::string& channel,
      absl::AnyInvocable<void(const RawMessage&)> fn);
  // Typed: every message is checked (bounds, limits) before `fn` sees it; a
  // malformed one is skipped and counted (watcher_stats), never a crash,
  // and the loop logs one line for the first on each channel (stderr:
  // channel, queue index, publisher pid, why). The check is RT-safe for
  // valid messages and may allocate on its failure path only (framing.h),
  // also with allocation checking on. A pointer of the wrong kind for its
  // field (a list where the schema has a struct: in bounds, so the check
  // passes) throws kj::Exception when `fn` reads that field: the loop
  // catches it and counts and logs the message as malformed the same way
  // (what `fn` did before that read stays done). With allocation checking
  // on, `fn` runs in a failure-path scope (util/failure_path.h): its
  // allocations are reported when it returns normally, and forgiven (with
  // the exception's) when a kj::Exception left it; a callback that catches
  // Cap'n Proto's exception itself has returned normally, so it aborts.
  // Fails if the channel carries another type (both names in the error).
  template <typename T>
  absl::StatusOr<WatcherHandle*> MakeWatcher(
      const std::string& channel,
      absl::AnyInvocable<void(typename T::Reader, const MessageContext&)> fn) {
    absl::StatusOr<transport::ChannelHandle*> c = channels_->Find(channel);
    if (!c.ok()) return c.status();
    if (absl::Status s = transport::CheckChannelType<T>(**c); !s.ok()) return s;
    transport::ChannelHandle* channel_handle = *c;
    return AddWatcher(
        *c, [this, typed = TypedWatch<T>{channel_handle, std::move(fn), {}}](
                const RawMessage& m, WatcherStats& stats) mutable {
          DeliverTyped<T>(typed, m, stats);
        });
  }
  // Counters of the i-th watcher made on this loop (zeros for an unknown
  // index); the handle MakeWatcher() returned says the same. Loop thread;
  // RT-safe.
  WatcherStats watcher_stats(size_t i) const;

  // Who else is on `channel` now (a snapshot from its shared registries):
  // registered publishers, pinning readers (watchers and fetchers, of every
  // process), registered waiters, messages so far, and failed sends of its
  // publishers. NotFound for a channel the loop's stack does not have. Any
  // time on the loop thread; RT-safe (loads only, O(registries)).
  struct ChannelPeers {
    int publishers = 0;
    int readers = 0;
    int waiters = 0;
    uint64_t messages = 0;
    uint64_t send_failures = 0;
  };
  absl::StatusOr<ChannelPeers> Peers(const std::string& channel) const;
  // The same after reclaiming what dead processes left on `channel` (its
  // registrations, pins and loans: shm::Channel::Sweep), so that a peer
  // killed since counts no more: Peers() keeps counting a killed process
  // until some process sweeps (opens do, and `tether list`). For noticing
  // that the other side is gone. Loop thread; not RT-safe (reads /proc;
  // call it from a slow timer, not from a real-time callback).
  absl::StatusOr<ChannelPeers> LivePeers(const std::string& channel);

  // Runs `fn` once, on the loop thread, as soon as `channel` has at least
  // `readers` pinning readers (watchers or fetchers, in any process) -- the
  // startup handshake: a message sent before the other side's watcher
  // exists is never seen by it. Checked every `poll` (and at once when the
  // loop starts). NotFound for an unknown channel. Setup: loop thread,
  // allocates.
  absl::Status OnReaders(const std::string& channel, int readers,
                         absl::AnyInvocable<void()> fn,
                         Duration poll = std::chrono::milliseconds(1));

  // --- time -------------------------------------------------------------
  // A timer running `fn` on the loop thread, disabled until its
  // TimerHandle::Schedule(). Setup: loop thread, allocates. The handle lives
  // as long as the loop.
  TimerHandle* AddTimer(absl::AnyInvocable<void()> fn);
  // `fn(cycles)` at every phase point offset + k*period (on the monotonic
  // clock's epoch), from the first one after now; cycles > 1 reports missed
  // cycles (the loop ran late). `period` must be positive (aborts
  // otherwise). Setup: loop thread, allocates.
  PhasedLoopHandle* AddPhasedLoop(absl::AnyInvocable<void(int cycles)> fn,
                                  Duration period,
                                  Duration offset = Duration::zero());
  // Runs `fn` once when the loop starts, before any timer or watcher, in
  // the order added. On a loop that already started it runs at the loop's
  // next iteration. Setup: loop thread, allocates.
  void OnRun(absl::AnyInvocable<void()> fn);

  // The loop's clock: real CLOCK_MONOTONIC, or virtual time in simulation.
  // Loop thread; RT-safe.
  MonotonicTime monotonic_now() const { return clock_->Now(); }
  // Wall-clock time in ns since the epoch on the loop's clock (CLOCK_REALTIME,
  // or the simulation's virtual equivalent). Loop thread; RT-safe.
  virtual int64_t realtime_now_ns() const = 0;
  // What the loop is handling now: valid inside a callback. Loop thread.
  const EventContext& context() const { return context_; }

  // With `on`, every callback this loop runs (timers, phased loops,
  // watchers, on-run) runs inside a RealtimeScope (realtime.h): in a binary
  // that links //loop:rt_alloc_check, a heap allocation there aborts with a
  // stack trace, so the checker guards a real node, not only tests. The
  // message checks of typed watchers and fetchers run inside it, in a
  // failure-path scope (framing.h): a valid message that made them allocate
  // aborts, a malformed one is skipped and reported, not fatal. A typed message
  // that passes the check but has a pointer of the wrong kind for a field
  // makes Cap'n Proto throw when `fn` reads that field, which allocates: a
  // typed watcher catches it and counts the message as malformed (see
  // MakeWatcher), as Fetcher::Read() does; a field read straight from a
  // fetched root throws to the caller and, with checking on, aborts.
  // Setup; loop thread.
  void set_check_allocations(bool on) { check_allocations_ = on; }
  bool check_allocations() const { return check_allocations_; }

 protected:
  // `channels`, `dispatcher`, `clock` and `driver` must outlive the loop.
  // The loop registers with `driver`, which runs it.
  EventLoop(std::string name, const transport::ChannelSet* channels,
            Dispatcher* dispatcher, const Clock* clock, Driver* driver);

  // transport::EndpointHooks: stamp from this loop's clock.
  void StampSend(transport::SendTimes* times) override;
  TETHER_HOT_PATH int64_t MonotonicNowNs() override {
    return static_cast<int64_t>(ToMonotonicNs(clock_->Now()));
  }
  // One line on stderr for the first malformed message of each channel
  // this loop reads (typed watchers and fetchers); later ones are only
  // counted. Failure path: allocates and writes, inside an
  // AllowAllocationScope.
  void MessageMalformed(const transport::ChannelHandle& channel,
                        const MessageContext& context,
                        const std::string& why) override;
  // Count the senders and fetchers this loop made that still exist:
  // destroying the loop before one of them aborts, naming it (its next
  // Send() or read would call the freed loop). The loop's own watchers are
  // subscribers too; they are gone before the count is read. Any thread.
  void PublisherMade(const transport::ChannelHandle& channel) override;
  void PublisherGone(const transport::ChannelHandle& channel) override;
  void SubscriberMade(const transport::ChannelHandle& channel) override;
  void SubscriberGone(const transport::ChannelHandle& channel) override;

  // Unregisters the loop's watchers and the loop from the driver. Every
  // kind calls it first in its destructor, while the driver, port and
  // channels still exist (the base destructor runs after the kind's
  // members are gone). `port_survives`: the driver's port lives on (other
  // loops use it), so the watchers are unwatched there. Not RT-safe.
  void Detach(bool port_survives);

  Dispatcher* dispatcher() const { return dispatcher_; }
  const transport::ChannelSet* channels() const { return channels_; }

 private:
  friend class TimerHandle;
  friend class PhasedLoopHandle;
  friend class Driver;
  absl::StatusOr<WatcherHandle*> AddWatcher(
      transport::ChannelHandle* channel,
      absl::AnyInvocable<void(const RawMessage&, WatcherStats&)> fn);
  // For the Driver: runs the on-run callbacks (once), and one watcher's
  // callback on its pending message, each with its context set. RT-safe as
  // the callbacks are.
  void Start();
  void RunWatcherCallback(internal::Watcher& w);

  // A typed watcher's state and its per-message work (MakeWatcher). Not
  // inlined into the type-erased callback that calls it, so that its code
  // stays with the rest of the hot path (util/hot_path.h). RT-safe for a
  // well-formed message as `fn` is.
  template <typename T>
  struct TypedWatch {
    transport::ChannelHandle* channel;
    absl::AnyInvocable<void(typename T::Reader, const MessageContext&)> fn;
    std::string why;
  };
  template <typename T>
  [[gnu::noinline]] TETHER_HOT_PATH void DeliverTyped(TypedWatch<T>& w,
                                                      const RawMessage& m,
                                                      WatcherStats& stats) {
    // Checked in the callback's scope: only the check's failure path may
    // allocate (framing.h, "Failure path"). `fn` runs in ReadChecked's
    // failure-path scope: a pointer of the wrong kind for its field
    // passes the bounds check and throws when `fn` reads it, and that
    // exception allocates.
    std::optional<transport::SlotMessageReader> reader;
    reader.emplace(m.bytes);
    const transport::RootResult<T> checked =
        transport::CheckedRoot<T>(*reader, &w.why);
    const auto malformed = [&] {
      ++stats.malformed;
      transport::DiscardAfterFailure(reader);
      MessageMalformed(*w.channel, m.context, w.why);
    };
    if (!checked.ok()) {
      malformed();
      return;
    }
    (void)transport::ReadChecked(
        checked.root,
        [&w, &m](typename T::Reader root) { w.fn(root, m.context); }, &w.why,
        malformed);
  }

  const std::string name_;
  const transport::ChannelSet* const channels_;
  Dispatcher* const dispatcher_;
  const Clock* const clock_;
  Driver* const driver_;
  bool started_ = false;
  bool detached_ = false;
  // The senders and subscribers (fetchers, and the watchers' own) made by
  // this loop that still exist, by channel (setup and teardown only: they
  // come and go on any thread, never on a hot path).
  using EndpointCounts = std::map<const transport::ChannelHandle*, int>;
  void CountEndpoint(EndpointCounts* counts,
                     const transport::ChannelHandle& channel, int delta);
  std::mutex live_endpoints_mutex_;
  EndpointCounts live_senders_;
  EndpointCounts live_fetchers_;
  bool check_allocations_ = false;
  EventContext context_;
  std::vector<std::unique_ptr<internal::Watcher>> watchers_;
  // Prints, once per channel, why this loop reads it as a guest.
  void NoteGuest(transport::ChannelHandle* channel);
  std::vector<const transport::ChannelHandle*> guest_noted_;
  // Channels whose first malformed message was logged.
  std::vector<const transport::ChannelHandle*> malformed_noted_;
  std::vector<std::unique_ptr<TimerHandle>> timers_;
  std::vector<std::unique_ptr<PhasedLoopHandle>> phased_loops_;
  std::vector<absl::AnyInvocable<void()>> on_run_;
};

}  // namespace tether::loop

#endif  // TETHER_LOOP_EVENT_LOOP_H_
