#include "loop/channel_waiter.h"

#include <algorithm>

#include "loop/kernel_probe.h"
#include "loop/make_wake_port.h"

namespace tether::loop {
namespace {

uint64_t CookieOf(const transport::RawSubscriber* reader) {
  return reinterpret_cast<uint64_t>(reader);
}

}  // namespace

absl::StatusOr<std::unique_ptr<ChannelWaiter>> ChannelWaiter::Create(
    const WakePortOptions& options) {
  absl::StatusOr<std::unique_ptr<WakePort>> port =
      MakeWakePort(options, ProbeKernel());
  if (!port.ok()) return port.status();
  return std::unique_ptr<ChannelWaiter>(new ChannelWaiter(std::move(*port)));
}

ChannelWaiter::~ChannelWaiter() {
  for (const Entry& e : readers_) port_->Unwatch(CookieOf(e.reader));
}

absl::Status ChannelWaiter::Add(transport::RawSubscriber* reader) {
  transport::WakeHandle wake = reader->channel()->MakeWakeHandle();
  if (absl::Status s = port_->Watch(wake.word(), CookieOf(reader)); !s.ok()) {
    return s;
  }
  readers_.push_back({reader, std::move(wake)});
  return absl::OkStatus();
}

void ChannelWaiter::Remove(transport::RawSubscriber* reader) {
  auto it = std::find_if(readers_.begin(), readers_.end(),
                         [reader](const Entry& e) { return e.reader == reader; });
  if (it == readers_.end()) return;
  port_->Unwatch(CookieOf(reader));
  readers_.erase(it);
}

void ChannelWaiter::Wait(std::optional<MonotonicTime> deadline) {
  for (const Entry& e : readers_) {
    if (!e.wake.guest()) continue;
    // Nobody wakes a guest: look again at least every kGuestPoll.
    const MonotonicTime poll = MonotonicNow() + kGuestPoll;
    if (!deadline.has_value() || poll < *deadline) deadline = poll;
    break;
  }
  (void)port_->Wait(deadline, *this, [](uint64_t) {});
}

void ChannelWaiter::BeginSleep() {
  for (Entry& e : readers_) e.wake.BeginSleep();
}

bool ChannelWaiter::HasPendingWork() {
  for (const Entry& e : readers_) {
    if (e.reader->HasNext()) return true;
  }
  return false;
}

void ChannelWaiter::EndSleep() {
  for (Entry& e : readers_) (void)e.wake.EndSleep();
}

}  // namespace tether::loop
