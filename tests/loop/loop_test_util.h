// Test helpers for loop: the shm tests' unique root per test, and the
// loop's half of the sleep protocol over shm channels (what an event loop's
// watchers do): SleepHooks that announce sleep on each channel and re-check
// each reader, keeping a message found by the re-check for the next drain.
#ifndef TETHER_TESTS_LOOP_LOOP_TEST_UTIL_H_
#define TETHER_TESTS_LOOP_LOOP_TEST_UTIL_H_

#include <ftw.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "loop/wake_port.h"
#include "shm/channel.h"
#include "shm/reader.h"
#include "tests/shm/shm_test_util.h"

namespace tether::loop::testing {

// A unique shared-memory root per test, removed afterwards.
using shm::testing::ScopedRoot;

// One watched channel: its reader, plus a message the sleep re-check found.
class Subscription {
 public:
  Subscription(shm::Channel* channel, shm::Reader* reader)
      : channel_(channel), reader_(reader),
        sleeper_(channel->RegisterSleeper()) {}

  shm::Channel* channel() const { return channel_; }
  shm::Sleeper& sleeper() { return sleeper_; }

  // The next message: the one the re-check kept, else the reader's next.
  shm::ReadStatus Next(shm::MessageView* view) {
    if (has_pending_) {
      has_pending_ = false;
      *view = pending_;
      return shm::ReadStatus::kOk;
    }
    return reader_->Next(view);
  }

  // The re-check of the sleep protocol: true if a message is waiting (kept
  // for Next()). A corrupt channel counts as work so the loop sees it.
  bool Recheck() {
    if (has_pending_) return true;
    const shm::ReadStatus status = reader_->Next(&pending_);
    if (status == shm::ReadStatus::kOk) has_pending_ = true;
    if (status == shm::ReadStatus::kCorrupt) corrupt_ = true;
    return has_pending_ || corrupt_;
  }
  bool corrupt() const { return corrupt_; }
  bool has_pending() const { return has_pending_; }

 private:
  shm::Channel* const channel_;
  shm::Reader* const reader_;
  shm::Sleeper sleeper_;
  shm::MessageView pending_;
  bool has_pending_ = false;
  bool corrupt_ = false;
};

// The loop's half of the protocol over a fixed set of subscriptions.
class ChannelSleepHooks final : public SleepHooks {
 public:
  void Add(Subscription* s) { subscriptions_.push_back(s); }

  void BeginSleep() override {
    for (Subscription* s : subscriptions_) s->sleeper().BeginSleep();
  }
  bool HasPendingWork() override {
    bool any = false;
    for (Subscription* s : subscriptions_) any |= s->Recheck();
    return any;
  }
  void EndSleep() override {
    for (Subscription* s : subscriptions_) s->sleeper().EndSleep();
  }

 private:
  std::vector<Subscription*> subscriptions_;
};

// A zeroed object of type T in an anonymous MAP_SHARED mapping, visible to
// forked children. Never freed (tests are short-lived).
template <typename T>
T* MakeShared() {
  void* m = ::mmap(nullptr, sizeof(T), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  return new (m) T();
}

}  // namespace tether::loop::testing

#endif  // TETHER_TESTS_LOOP_LOOP_TEST_UTIL_H_
