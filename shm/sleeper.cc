// shm: a channel's sleeper registry (see "Wake" in layout.h): registering a
// waiter, and the announcement around its blocking waits. Part of Channel.
#include <utility>

#include "shm/channel.h"
#include "shm/layout.h"
#include "util/hot_path.h"

namespace tether::shm {

Sleeper Channel::RegisterSleeper() {
  // A guest cannot announce itself: it polls (see Sleeper::guest()).
  if (!reader_state_writable()) return Sleeper(this, Sleeper::kGuest);
  const OwnerToken token = self_token();
  for (int round = 0; round < 2; ++round) {
    for (uint32_t i = 0; i < internal::kMaxSleepers; ++i) {
      OwnerToken expected = kNoOwner;
      if (sleeper_entry(i)->owner.compare_exchange_strong(
              expected, token, std::memory_order_acq_rel)) {
        // A bit left set by whoever held the entry is theirs to clear (the
        // sweep does before freeing it), so it is clear now.
        return Sleeper(this, static_cast<int>(i));
      }
    }
    Sweep();  // dead waiters may hold entries
  }
  return Sleeper(this, Sleeper::kAnonymous);
}

Sleeper::Sleeper(Sleeper&& other) noexcept
    : channel_(other.channel_),
      index_(other.index_),
      asleep_(other.asleep_) {
  other.channel_ = nullptr;
}

Sleeper& Sleeper::operator=(Sleeper&& other) noexcept {
  if (this != &other) {
    Release();
    channel_ = std::exchange(other.channel_, nullptr);
    index_ = other.index_;
    asleep_ = other.asleep_;
  }
  return *this;
}

Sleeper::~Sleeper() { Release(); }

void Sleeper::Release() {
  if (channel_ == nullptr) return;
  if (asleep_) EndSleep();
  if (index_ >= 0) {
    channel_->sleeper_entry(static_cast<uint32_t>(index_))
        ->owner.store(kNoOwner, std::memory_order_release);
  }
  channel_ = nullptr;
}

TETHER_HOT_PATH void Sleeper::BeginSleep() {
  if (index_ == kGuest) return;
  internal::ReaderStateHeader* h = channel_->state_header_;
  asleep_ = true;
  if (index_ >= 0) {
    h->sleeper_mask.fetch_or(uint64_t{1} << index_, std::memory_order_seq_cst);
  } else {
    h->anonymous_sleepers.fetch_add(1, std::memory_order_seq_cst);
  }
}

TETHER_HOT_PATH bool Sleeper::EndSleep() {
  if (index_ == kGuest) return true;
  internal::ReaderStateHeader* h = channel_->state_header_;
  asleep_ = false;
  if (index_ >= 0) {
    const uint64_t bit = uint64_t{1} << index_;
    return (h->sleeper_mask.fetch_and(~bit, std::memory_order_seq_cst) &
            bit) != 0;
  }
  // A corrupt count must not wrap below zero.
  uint32_t v = h->anonymous_sleepers.load(std::memory_order_relaxed);
  while (v != 0 && !h->anonymous_sleepers.compare_exchange_weak(
                       v, v - 1, std::memory_order_seq_cst)) {
  }
  return v != 0;
}

}  // namespace tether::shm
