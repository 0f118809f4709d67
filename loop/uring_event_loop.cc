#include "loop/uring_event_loop.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "loop/kernel_probe.h"
#include "loop/make_wake_port.h"

namespace tether::loop {
namespace {

constexpr uint64_t kStopCookie = ~uint64_t{0};

}  // namespace

UringEventLoop::UringEventLoop(const std::string& name,
                               const transport::ChannelSet* channels)
    : EventLoop(name, channels, &dispatcher_, &clock_), dispatcher_(&clock_) {}

absl::StatusOr<std::unique_ptr<UringEventLoop>> UringEventLoop::Create(
    const std::string& name, const transport::ChannelSet* channels,
    const UringEventLoopOptions& options) {
  std::unique_ptr<UringEventLoop> loop(new UringEventLoop(name, channels));
  absl::StatusOr<std::unique_ptr<WakePort>> port =
      MakeWakePort(options.port, ProbeKernel());
  if (!port.ok()) return port.status();
  loop->port_ = std::move(*port);
  if (options.stop_fd >= 0) {
    if (absl::Status s = loop->port_->WatchFd(options.stop_fd, kStopCookie);
        !s.ok()) {
      return s;
    }
    loop->stop_fd_ = options.stop_fd;
  }
  return loop;
}

UringEventLoop::~UringEventLoop() {
  if (port_ != nullptr && stop_fd_ >= 0) port_->Unwatch(kStopCookie);
}

int64_t UringEventLoop::realtime_now_ns() const {
  timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

absl::Status UringEventLoop::WatcherAdded(Watcher& w) {
  // The cookie is the watcher's address; on_ready needs no lookup: every
  // wake re-checks all watchers anyway (one atomic load each).
  return port_->Watch(w.channel->shm()->wake_word(),
                      reinterpret_cast<uint64_t>(&w));
}

void UringEventLoop::BeginSleep() {
  for (const auto& w : watchers()) w->channel->shm()->BeginSleep();
}

bool UringEventLoop::HasPendingWork() {
  if (exit_.load(std::memory_order_relaxed)) return true;
  for (const auto& w : watchers()) {
    if (w->has_pending || w->subscriber->HasNext()) return true;
  }
  return false;
}

void UringEventLoop::EndSleep() {
  for (const auto& w : watchers()) w->channel->shm()->EndSleep();
}

void UringEventLoop::Exit() {
  exit_.store(true, std::memory_order_release);
  port_->Wake();
}

bool UringEventLoop::Run() {
  RunOnRunCallbacks();
  while (!exit_.load(std::memory_order_acquire)) {
    // Timers due now, then every message that has arrived, in send order.
    for (std::optional<MonotonicTime> next = dispatcher_.NextDeadline();
         next.has_value() && *next <= clock_.Now() &&
         !exit_.load(std::memory_order_relaxed);
         next = dispatcher_.NextDeadline()) {
      dispatcher_.RunDue(clock_.Now());
    }
    DeliverAllInOrder();
    if (exit_.load(std::memory_order_acquire)) break;
    bool stopped = false;
    port_->Wait(dispatcher_.NextDeadline(), *this, [&](uint64_t cookie) {
      if (cookie == kStopCookie) stopped = true;
    });
    if (stopped) {
      exit_.store(true, std::memory_order_release);
      return true;
    }
  }
  return false;
}

}  // namespace tether::loop
