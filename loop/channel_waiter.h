// loop: waiting for messages outside an event loop, for tools (echo, stat,
// the logger) that read channels with their own cursors. One wake port for
// every channel and the same sleep protocol as the loops (wake_port.h): the
// waiter announces itself on each channel, re-checks each reader, and only
// then sleeps on the wake words it loaded.
#ifndef TETHER_LOOP_CHANNEL_WAITER_H_
#define TETHER_LOOP_CHANNEL_WAITER_H_

#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "loop/clock.h"
#include "loop/wake_port.h"
#include "transport/raw_endpoints.h"
#include "transport/wake_handle.h"

namespace tether::loop {

// Not thread-safe except Wake(): one thread adds readers and waits.
class ChannelWaiter final : private SleepHooks {
 public:
  // Builds the best wake port the kernel offers (the same choice as a
  // loop's). FailedPrecondition naming the missing feature when none works.
  // Setup; allocates.
  static absl::StatusOr<std::unique_ptr<ChannelWaiter>> Create(
      const WakePortOptions& options = {});
  ~ChannelWaiter() override;
  ChannelWaiter(const ChannelWaiter&) = delete;
  ChannelWaiter& operator=(const ChannelWaiter&) = delete;

  // Waits on `reader`'s channel from now on. `reader` (and its channel) must
  // outlive the waiter or be removed first. Setup; allocates.
  absl::Status Add(transport::RawSubscriber* reader);
  // Stops waiting on `reader` (e.g. its channel turned out corrupt).
  void Remove(transport::RawSubscriber* reader);

  // Returns when any reader has something (a message, a loss or
  // corruption: HasNext()), at `deadline` (nullopt: no deadline), on Wake(),
  // or spuriously. Never busy-waits. A reader of a channel this process
  // reads as a guest (nobody wakes it) bounds the wait by kGuestPoll. The
  // waiting thread; no allocation.
  void Wait(std::optional<MonotonicTime> deadline);
  // Makes the current or next Wait() return. Any thread, async-signal-safe.
  void Wake() { port_->Wake(); }

  // The longest a wait lasts while a guest reader is added.
  static constexpr Duration kGuestPoll = std::chrono::milliseconds(2);

  // "uring_futex: ..." — which backend waits and why.
  const std::string& description() const { return port_->description(); }

 private:
  explicit ChannelWaiter(std::unique_ptr<WakePort> port)
      : port_(std::move(port)) {}
  void BeginSleep() override;
  bool HasPendingWork() override;
  void EndSleep() override;

  struct Entry {
    transport::RawSubscriber* reader;
    transport::WakeHandle wake;
  };
  std::unique_ptr<WakePort> port_;
  std::vector<Entry> readers_;
};

}  // namespace tether::loop

#endif  // TETHER_LOOP_CHANNEL_WAITER_H_
