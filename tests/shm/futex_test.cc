// shm/futex.h: the futex primitives' contract, which every wake in tether
// rests on: the return values (count woken, 0, -errno), errno left alone
// (FutexWake runs in signal handlers, loop/signals.cc), a real cross-thread
// and cross-process wake on a shared word.
#include "shm/futex.h"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <new>
#include <thread>

#include "gtest/gtest.h"

namespace tether::shm {
namespace {

using std::chrono::steady_clock;

TEST(FutexTest, WaitOnAChangedWordReturnsEagainAndLeavesErrnoAlone) {
  std::atomic<uint32_t> word{7};
  errno = 1234;
  EXPECT_EQ(FutexWait(&word, 8, nullptr), -EAGAIN);
  EXPECT_EQ(errno, 1234);
}

TEST(FutexTest, WaitTimesOutWithEtimedout) {
  std::atomic<uint32_t> word{0};
  const struct timespec ten_ms = {0, 10'000'000};
  errno = 0;
  const auto start = steady_clock::now();
  EXPECT_EQ(FutexWait(&word, 0, &ten_ms), -ETIMEDOUT);
  EXPECT_GE(steady_clock::now() - start, std::chrono::milliseconds(9));
  EXPECT_EQ(errno, 0);
}

TEST(FutexTest, WakeWithNobodyWaitingWakesNone) {
  std::atomic<uint32_t> word{0};
  EXPECT_EQ(FutexWake(&word), 0);
  EXPECT_EQ(FutexWake(&word, 1), 0);
}

TEST(FutexTest, AnInvalidAddressIsEfaultNotACrash) {
  // The kernel checks the address: the bare syscall returns -EFAULT as
  // libc's wrapper would have (in errno).
  auto* bad = reinterpret_cast<std::atomic<uint32_t>*>(uintptr_t{8});
  errno = 0;
  EXPECT_EQ(FutexWait(bad, 0, nullptr), -EFAULT);
  EXPECT_EQ(FutexWake(bad), -EFAULT);
  EXPECT_EQ(errno, 0);
}

TEST(FutexTest, WakeCountsAndReleasesEveryWaiter) {
  std::atomic<uint32_t> word{0};
  std::atomic<int> returned{0};
  std::thread waiters[3];
  for (auto& t : waiters) {
    t = std::thread([&] {
      while (word.load() == 0) (void)FutexWait(&word, 0, nullptr);
      returned.fetch_add(1);
    });
  }
  // A wake of at most one reports exactly 1 once any waiter sleeps (0
  // before that: retry); the woken thread sees 0 and sleeps again. Then
  // the word moves and wakes release all three.
  int woken = 0;
  const auto deadline = steady_clock::now() + std::chrono::seconds(10);
  while (woken < 1 && steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    woken = FutexWake(&word, 1);  // word still 0: the woken one sleeps again
  }
  EXPECT_EQ(woken, 1);
  word.store(1);
  int total = 0;
  while (returned.load() < 3 && steady_clock::now() < deadline) {
    const int n = FutexWake(&word);
    ASSERT_GE(n, 0);
    total += n;
  }
  for (auto& t : waiters) t.join();
  EXPECT_EQ(returned.load(), 3);
  EXPECT_LE(total, 3);
}

TEST(FutexTest, WakesAWaiterInAnotherProcessOnASharedWord) {
  void* m = mmap(nullptr, 4096, PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(m, MAP_FAILED);
  auto* word = new (m) std::atomic<uint32_t>(0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    while (word->load() == 0) (void)FutexWait(word, 0, nullptr);
    _exit(word->load() == 5 ? 0 : 1);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  word->store(5);
  int status = 0;
  for (;;) {
    (void)FutexWake(word);
    const pid_t r = waitpid(child, &status, WNOHANG);
    ASSERT_GE(r, 0);
    if (r == child) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  munmap(m, 4096);
}

}  // namespace
}  // namespace tether::shm
