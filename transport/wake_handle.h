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

#include "shm/channel.h"

namespace tether::transport {

// A small value (one pointer), copyable. Valid while the ChannelHandle it
// came from lives. Every call: any thread, RT-safe, no allocation.
class WakeHandle {
 public:
  // The 32-bit shared futex word to wait on (never FUTEX_PRIVATE).
  const std::atomic<uint32_t>* word() const { return channel_->wake_word(); }
  // Its value now (acquire).
  uint32_t Load() const { return channel_->LoadWakeWord(); }
  // Counts the caller as a sleeper (seq_cst): publishers make the
  // FUTEX_WAKE syscall until EndSleep(). Call before loading the word.
  void BeginSleep() const { channel_->BeginSleep(); }
  void EndSleep() const { channel_->EndSleep(); }
  // Bumps the word and wakes every waiter (one syscall): e.g. to make a
  // tool's waiting reader look again.
  void WakeAll() const { channel_->WakeAll(); }

  friend bool operator==(const WakeHandle&, const WakeHandle&) = default;

 private:
  friend class ChannelHandle;
  explicit WakeHandle(shm::Channel* channel) : channel_(channel) {}
  shm::Channel* channel_;
};

}  // namespace tether::transport

#endif  // TETHER_TRANSPORT_WAKE_HANDLE_H_
