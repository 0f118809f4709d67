// loop: a watcher — a pinned subscriber on one channel (a copying one when
// this process reads the channel as a guest) and the callback that runs for
// each of its messages. An EventLoop owns its watchers; the Driver
// (driver.h) delivers them. Internal to loop/: applications see watchers only
// through EventLoop::MakeWatcher() and WatcherStats.
#ifndef TETHER_LOOP_WATCHER_H_
#define TETHER_LOOP_WATCHER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "absl/functional/any_invocable.h"
#include "transport/channel_handle.h"
#include "transport/raw_endpoints.h"
#include "transport/wake_handle.h"

namespace tether::loop {

class EventLoop;

// Per-watcher counters (for stat tools and tests). Loop thread.
struct WatcherStats {
  uint64_t received = 0;
  uint64_t missed = 0;     // lost before this watcher got to them
  uint64_t malformed = 0;  // typed watchers: invalid bytes, skipped
  // Pinned messages whose slot was reused while the callback read them: a
  // process with write access to the channel's reader-state file cleared
  // this watcher's pin (see docs/security.md). The loop logs one line.
  uint64_t overwritten_while_read = 0;
  // The channel's shared memory was found corrupt: the watcher stopped (it
  // gets no more messages; the loop logged one line and runs on).
  bool corrupt = false;
};

// What MakeWatcher()/MakeRawWatcher() return: the watcher's counters and
// channel. Owned by the loop; valid while the loop lives. Loop thread.
class WatcherHandle {
 public:
  WatcherHandle(const WatcherHandle&) = delete;
  WatcherHandle& operator=(const WatcherHandle&) = delete;

  // Messages received, missed, malformed; whether the channel turned out
  // corrupt (the watcher then stopped). RT-safe.
  const WatcherStats& stats() const { return stats_; }
  const std::string& channel_name() const { return channel_->name(); }
  // The queue index of the first message the watcher can deliver (where its
  // subscriber started when it was made): every message from there on
  // reaches its callback or is counted in stats().missed. A consumer that
  // keeps its own position across restarts (the net bridge's forwarding
  // cursor) starts from here. RT-safe.
  uint64_t start_index() const { return start_index_; }

 protected:
  WatcherHandle() = default;
  ~WatcherHandle() = default;
  WatcherStats stats_;
  transport::ChannelHandle* channel_ = nullptr;
  uint64_t start_index_ = 0;
};

namespace internal {

struct Watcher : public WatcherHandle {
  // The loop's side sees everything (the handle shows stats and channel).
  using WatcherHandle::channel_;
  using WatcherHandle::start_index_;
  using WatcherHandle::stats_;
  EventLoop* loop = nullptr;  // the loop whose callback context it runs in
  std::unique_ptr<transport::RawSubscriber> subscriber;
  // Its registration as a sleeper on the channel (set when it is added).
  std::optional<transport::WakeHandle> wake;
  absl::AnyInvocable<void(const transport::RawMessage&, WatcherStats&)> fn;
  // The next message, taken (and pinned) but not yet delivered: the driver
  // merges watchers by send time, so it holds one message per watcher.
  transport::RawMessage pending;
  bool has_pending = false;
  // Position in the driver's list: ties in send time go to the earlier one.
  size_t index = 0;
  // Its wake announcement was found cleared (said once).
  bool announcement_cleared = false;
};

}  // namespace internal
}  // namespace tether::loop

#endif  // TETHER_LOOP_WATCHER_H_
