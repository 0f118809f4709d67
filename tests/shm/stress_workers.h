// Worker loops for the multi-process stress and crash tests. Each runs in a
// forked child on its own mapping of the channel and reports through a
// SharedBoard (an anonymous MAP_SHARED mapping made before fork).
#ifndef TETHER_TESTS_SHM_STRESS_WORKERS_H_
#define TETHER_TESTS_SHM_STRESS_WORKERS_H_

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <new>
#include <random>
#include <string>
#include <unordered_map>

#include "shm/channel.h"
#include "shm/futex.h"
#include "shm/publisher.h"
#include "shm/reader.h"
#include "tests/shm/shm_test_util.h"
#include "tests/shm/stress_util.h"

namespace tether::shm::testing {

inline constexpr int kMaxWorkers = 64;
inline constexpr int kMaxPublisherIds = 4096;

struct ReaderReport {
  std::atomic<int> done{0};
  std::atomic<uint64_t> received{0};
  std::atomic<uint64_t> missed{0};
  std::atomic<uint64_t> end{0};
  std::atomic<uint64_t> start{0};
  char error[256] = {};
};

// Everything children report, in shared memory.
struct SharedBoard {
  std::atomic<int> stop{0};          // publishers stop sending
  std::atomic<int> drain{0};         // readers drain, then finish
  std::atomic<int> ready{0};         // readers registered
  std::atomic<int> errors{0};
  char first_error[256] = {};
  // Messages each publisher id committed (ids are never reused).
  std::atomic<uint64_t> sent[kMaxPublisherIds];
  // Messages each reader got from each publisher id (checker readers only).
  std::atomic<uint64_t> received_from[4][kMaxPublisherIds];
  ReaderReport readers[kMaxWorkers];

  static SharedBoard* Create() {
    void* m = ::mmap(nullptr, sizeof(SharedBoard), PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return nullptr;
    return new (m) SharedBoard();
  }
  static void Destroy(SharedBoard* b) { ::munmap(b, sizeof(SharedBoard)); }

  void Fail(const std::string& what) {
    if (errors.fetch_add(1) == 0) {
      std::snprintf(first_error, sizeof(first_error), "%s", what.c_str());
    }
  }
};

// Forks a child that runs `body` and exits with its result.
inline pid_t Spawn(const std::function<int()>& body) {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(body());
  return pid;
}

inline void KillAndReap(pid_t pid) {
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
}

// Sends pattern messages with publisher id `id` until board->stop.
inline int PublisherMain(const ChannelOptions& options, const std::string& name,
                         uint32_t id, SharedBoard* board, uint32_t seed) {
  auto c = Channel::Open(options, name);
  if (!c.ok()) {
    board->Fail("publisher open: " + std::string(c.status().message()));
    return 1;
  }
  auto pub = Publisher::Create(c->get());
  if (!pub.ok()) {
    board->Fail("publisher create: " + std::string(pub.status().message()));
    return 1;
  }
  std::mt19937 rng(seed);
  const size_t max = (*c)->params().slot_size;
  for (uint64_t seq = 0; !board->stop.load(std::memory_order_relaxed); ++seq) {
    auto loan = (*pub)->Loan();
    if (loan.empty()) {
      board->Fail("publisher has no loan");
      return 1;
    }
    size_t n = WritePattern(loan, id, seq, sizeof(PatternHeader) + rng() % (max - sizeof(PatternHeader)));
    SendResult r = SendWithStressOrigin(**pub, n, id, seq);
    if (r.status != SendStatus::kOk) {
      board->Fail(std::string("send: ") + ToString(r.status));
      return 1;
    }
    board->sent[id].store(seq + 1, std::memory_order_relaxed);
    if (rng() % 256 == 0) {
      timespec ts{0, static_cast<long>(rng() % 200'000)};
      ::nanosleep(&ts, nullptr);
    }
  }
  return 0;
}

// Reads with full checking until board->drain and nothing is left. Slot
// `slot` of board->readers gets the report; `tally` (0..3 or -1) counts
// messages per publisher id. `sleepy` readers block in futex waits.
inline int ReaderMain(const ChannelOptions& options, const std::string& name,
                      int slot, int tally, bool sleepy, bool slow,
                      SharedBoard* board, uint32_t seed) {
  ReaderReport& rep = board->readers[slot];
  auto c = Channel::Open(options, name);
  if (!c.ok()) {
    board->Fail("reader open: " + std::string(c.status().message()));
    return 1;
  }
  auto reader = Reader::Create(c->get(), {.pin = true,
                                          .start = ReaderOptions::Start::kOldest});
  if (!reader.ok()) {
    board->Fail("reader create: " + std::string(reader.status().message()));
    return 1;
  }
  Channel* ch = c->get();
  StreamChecker checker((*reader)->next_index());
  rep.start = (*reader)->next_index();
  board->ready.fetch_add(1);
  std::mt19937 rng(seed);
  MessageView v;
  std::string error;
  Sleeper me = ch->RegisterSleeper();
  for (;;) {
    bool draining = board->drain.load();
    if (sleepy) me.BeginSleep();
    uint32_t word = ch->LoadWakeWord();
    ReadStatus s = (*reader)->Next(&v);
    if (s == ReadStatus::kCorrupt) {
      if (sleepy) me.EndSleep();
      board->Fail("reader saw corruption");
      return 1;
    }
    if (s == ReadStatus::kNothingNew) {
      if (sleepy) {
        if (!draining) {
          timespec ts{0, 2'000'000};  // bounded: never block forever
          FutexWait(ch->wake_word(), word, &ts);
        }
        me.EndSleep();
      }
      if (draining) break;
      continue;
    }
    if (sleepy) me.EndSleep();
    if (!checker.Observe(v, /*check_data=*/true, &error)) {
      board->Fail("reader: " + error);
      return 1;
    }
    if (tally >= 0) {
      PatternHeader h;
      std::memcpy(&h, v.data.data(), sizeof(h));
      if (h.publisher < kMaxPublisherIds) {
        board->received_from[tally][h.publisher].fetch_add(1);
      }
    }
    rep.received = checker.received();
    rep.missed = checker.missed();
    if (slow && rng() % 32 == 0) {
      timespec ts{0, static_cast<long>(rng() % 300'000)};
      ::nanosleep(&ts, nullptr);  // holding the pin meanwhile
      // The publishers went on; the pinned message must still be whole.
      PatternHeader h;
      if (!CheckPattern(v.data, &h)) {
        board->Fail(absl::StrCat("reader: pinned message ", v.queue_index,
                                 " changed while pinned"));
        return 1;
      }
    }
  }
  // Nobody cleared pins here: no read may count as overwritten.
  (*reader)->Release();
  if ((*reader)->overwritten_while_read() != 0) {
    board->Fail(absl::StrCat("reader: ", (*reader)->overwritten_while_read(),
                             " pinned reads counted as overwritten"));
    return 1;
  }
  rep.received = checker.received();
  rep.missed = checker.missed();
  rep.end = checker.next_expected();
  rep.done = 1;
  return 0;
}

}  // namespace tether::shm::testing

#endif  // TETHER_TESTS_SHM_STRESS_WORKERS_H_
