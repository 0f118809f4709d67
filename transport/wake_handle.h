// transport: the narrow view of a channel that a waiter needs — its futex
// wake word and the "I am about to sleep" bracket that tells publishers to
// make the wake syscall. Event loops (loop/) and tools wait on channels
// through this, never through the shm layer's Channel.
//
// The protocol that uses it (announce -> load the word -> re-check the
// readers -> wait on the loaded value -> end) is written once, in
// loop/wake_port.h (PortBase::SleepProtocol); see shm/layout.h ("Wake") for
// why it loses no wakeup.
#ifndef TETHER_TRANSPORT_WAKE_HANDLE_H_
#define TETHER_TRANSPORT_WAKE_HANDLE_H_

#include <atomic>
#include <cstdint>
#include <utility>

#include "shm/channel.h"

namespace tether::transport {

// One waiter's handle on one channel: made by ChannelHandle::
// MakeWakeHandle(), which registers the waiter in the channel's sleeper
// registry (so a waiter that dies asleep is swept and costs publishers
// nothing afterwards). Move-only; valid while the ChannelHandle lives.
// One thread at a time; every call RT-safe, no allocation.
class WakeHandle {
 public:
  WakeHandle(WakeHandle&&) noexcept = default;
  WakeHandle& operator=(WakeHandle&&) noexcept = default;

  // The 32-bit shared futex word to wait on (never FUTEX_PRIVATE).
  const std::atomic<uint32_t>* word() const { return channel_->wake_word(); }
  // Its value now (acquire).
  uint32_t Load() const { return channel_->LoadWakeWord(); }
  // Announces this waiter as asleep (seq_cst): publishers make the
  // FUTEX_WAKE syscall until EndSleep(). Call before loading the word.
  void BeginSleep() { sleeper_.BeginSleep(); }
  // False when the announcement was cleared meanwhile by a process with
  // write access to the reader-state file (publishers may have skipped
  // this waiter's wake).
  bool EndSleep() { return sleeper_.EndSleep(); }
  // A guest's handle (ChannelHandle::guest()): Begin/EndSleep do nothing,
  // no publisher ever wakes this waiter, so it must bound every wait (poll)
  // and re-check. Waiting on the word still returns at once when it moved.
  bool guest() const { return sleeper_.guest(); }
  // Bumps the word and wakes every waiter (one syscall): e.g. to make a
  // tool's waiting reader look again.
  void WakeAll() const { channel_->WakeAll(); }

 private:
  friend class ChannelHandle;
  WakeHandle(shm::Channel* channel, shm::Sleeper sleeper)
      : channel_(channel), sleeper_(std::move(sleeper)) {}
  shm::Channel* channel_;
  shm::Sleeper sleeper_;
};

}  // namespace tether::transport

#endif  // TETHER_TRANSPORT_WAKE_HANDLE_H_
