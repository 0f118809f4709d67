// The futex_waitv port's lost-wake check thread (loop/lost_wake_ticker.h):
// it pokes every registered target, never one that unregistered, starts
// anew in a forked child, and takes no signal meant for the application.
#include "loop/lost_wake_ticker.h"

#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "loop/wake_port.h"
#include "tests/util/child_process.h"

namespace tether::loop::internal {
namespace {

using std::chrono::seconds;

// More static thread-local storage than a 64 KiB stack leaves room for
// (glibc carves it out of each thread's stack): the ticker must still start.
thread_local char big_tls[96 * 1024];

class Counter final : public LostWakeTicker::Target {
 public:
  void Poke() override { pokes.fetch_add(1); }
  std::atomic<int> pokes{0};
};

// True once `c` was poked `n` times, false after 10 s without (a ticker
// that never runs; a bound, not a measure).
bool AwaitPokes(const Counter& c, int n) {
  const auto give_up = std::chrono::steady_clock::now() + seconds(10);
  while (c.pokes.load() < n) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::sleep_for(kLostWakeCheck / 10);
  }
  return true;
}

TEST(LostWakeTicker, PokesTargetsUntilTheyUnregister) {
  // Used, so that it stays in the binary.
  big_tls[sizeof(big_tls) - 1] = 1;
  asm volatile("" : : "r"(big_tls) : "memory");
  Counter a, b;
  LostWakeTicker::Register(&a);
  LostWakeTicker::Register(&b);
  EXPECT_TRUE(AwaitPokes(a, 2));
  EXPECT_TRUE(AwaitPokes(b, 2));
  LostWakeTicker::Unregister(&a);
  const int after = a.pokes.load();  // no poke is in flight once it returns
  std::this_thread::sleep_for(3 * kLostWakeCheck);
  EXPECT_EQ(a.pokes.load(), after);
  EXPECT_TRUE(AwaitPokes(b, b.pokes.load() + 1)) << "the other stopped too";
  LostWakeTicker::Unregister(&b);
}

// The parent's ticker runs; the child has no thread of it. Without the
// atfork handler the child's Register would find the ticker "running" and
// the child would never be poked.
TEST(LostWakeTicker, AForkedChildGetsATickerOfItsOwn) {
  Counter parent;
  LostWakeTicker::Register(&parent);
  ASSERT_TRUE(AwaitPokes(parent, 1));
  testing::ChildProcess child([](const testing::ChildProcess::Voice&) {
    Counter c;
    LostWakeTicker::Register(&c);
    const bool poked = AwaitPokes(c, 2);
    LostWakeTicker::Unregister(&c);
    return poked ? 0 : 3;
  });
  ASSERT_TRUE(child.started());
  EXPECT_EQ(child.ExitCode(), 0) << "the child was never poked";
  EXPECT_TRUE(AwaitPokes(parent, parent.pokes.load() + 1));
  LostWakeTicker::Unregister(&parent);
}

// The ticker thread's id (0: none), found by its name.
pid_t TickerTid() {
  pid_t tid = 0;
  DIR* tasks = ::opendir("/proc/self/task");
  if (tasks == nullptr) return 0;
  while (dirent* e = ::readdir(tasks)) {
    std::string comm;
    std::getline(
        std::ifstream(std::string("/proc/self/task/") + e->d_name + "/comm"),
        comm);
    if (comm == "tether-tick") tid = std::atoi(e->d_name);
  }
  ::closedir(tasks);
  return tid;
}

// The thread is named and blocks every signal, so SIGTERM sent to the
// process goes to a thread of the application's.
TEST(LostWakeTicker, TheTickerThreadBlocksSignals) {
  Counter c;
  LostWakeTicker::Register(&c);
  ASSERT_TRUE(AwaitPokes(c, 1));
  const pid_t tid = TickerTid();
  LostWakeTicker::Unregister(&c);
  ASSERT_NE(tid, 0) << "no thread named tether-tick";
  std::string blocked;
  std::ifstream status("/proc/self/task/" + std::to_string(tid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("SigBlk:", 0) == 0) blocked = line.substr(7);
  }
  ASSERT_FALSE(blocked.empty());
  const unsigned long long mask = std::stoull(blocked, nullptr, 16);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGCHLD}) {
    EXPECT_NE(mask & (1ull << (sig - 1)), 0u) << "signal " << sig;
  }
}

// Made from a SCHED_FIFO thread (a node's loop thread usually is), the
// ticker still runs SCHED_OTHER: it must never preempt that loop. In a
// child, whose ticker its own FIFO thread starts.
TEST(LostWakeTicker, TheTickerIsNeverRealTime) {
  testing::ChildProcess child([](const testing::ChildProcess::Voice&) {
    const sched_param fifo{.sched_priority = 1};
    if (::sched_setscheduler(0, SCHED_FIFO, &fifo) != 0) return 2;
    Counter c;
    LostWakeTicker::Register(&c);
    if (!AwaitPokes(c, 1)) return 3;
    const pid_t tid = TickerTid();
    LostWakeTicker::Unregister(&c);
    if (tid == 0) return 4;
    return ::sched_getscheduler(tid) == SCHED_OTHER ? 0 : 5;
  });
  ASSERT_TRUE(child.started());
  const int code = child.ExitCode();
  if (code == 2) GTEST_SKIP() << "SCHED_FIFO not permitted here";
  EXPECT_EQ(code, 0) << "4: no ticker thread; 5: it runs real-time";
}

// The size in KiB of the mapping that holds thread `tid`'s stack pointer
// (it is blocked in a syscall: /proc/.../syscall ends "sp pc"); -1 if
// unknown.
long StackMappingKib(pid_t tid) {
  std::string call;
  std::getline(
      std::ifstream("/proc/self/task/" + std::to_string(tid) + "/syscall"),
      call);
  const size_t pc = call.rfind(' ');
  const size_t sp = pc == std::string::npos ? pc : call.rfind(' ', pc - 1);
  if (sp == std::string::npos) return -1;
  const unsigned long long at = std::stoull(call.substr(sp + 1), nullptr, 16);
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    const unsigned long long lo = std::stoull(line, nullptr, 16);
    const unsigned long long hi =
        std::stoull(line.substr(line.find('-') + 1), nullptr, 16);
    if (lo <= at && at < hi) return static_cast<long>((hi - lo) / 1024);
  }
  return -1;
}

// A real-time node has locked its memory (mlockall(MCL_FUTURE)) before it
// makes its loop, so the ticker's stack is locked whole: it must be small
// (the default 8 MiB would also be refused under RLIMIT_MEMLOCK).
TEST(LostWakeTicker, TheTickerStackIsSmall) {
  Counter c;
  LostWakeTicker::Register(&c);
  ASSERT_TRUE(AwaitPokes(c, 1));
  const pid_t tid = TickerTid();
  ASSERT_NE(tid, 0);
  long kib = -1;
  for (int i = 0; i < 100 && kib < 0; ++i) kib = StackMappingKib(tid);
  LostWakeTicker::Unregister(&c);
  ASSERT_GT(kib, 0) << "its stack pointer was not found in /proc/self/maps";
  EXPECT_LT(kib, 1024);
}

// A ticker that cannot be made (here: no address space left for its
// stack) is said in one line, and the process runs on, unchecked, instead
// of terminating.
TEST(LostWakeTicker, ATickerThatCannotStartIsSaidNotFatal) {
  testing::ChildProcess child([](const testing::ChildProcess::Voice&) {
    char path[] = "/tmp/tether_ticker_stderr_XXXXXX";
    const int fd = ::mkstemp(path);
    if (fd < 0 || ::dup2(fd, STDERR_FILENO) < 0) return 2;
    ::unlink(path);
    // The parent's ticker stack, cached by glibc since the fork, would be
    // reused without a new mapping: a thread of ours takes it first (its
    // size: 128 KiB, with this binary's 96 KiB of TLS).
    pthread_attr_t attr;
    ::pthread_attr_init(&attr);
    ::pthread_attr_setstacksize(&attr, 128 * 1024);
    pthread_t holder;
    if (::pthread_create(&holder, &attr, [](void*) -> void* {
          for (;;) ::pause();
        }, nullptr) != 0) {
      return 2;
    }
    long vm_kib = -1;
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("VmSize:", 0) == 0) vm_kib = std::atol(line.c_str() + 7);
    }
    Counter c;
    const rlimit as{.rlim_cur = static_cast<rlim_t>(vm_kib + 32) * 1024,
                    .rlim_max = RLIM_INFINITY};
    if (vm_kib < 0 || ::setrlimit(RLIMIT_AS, &as) != 0) return 2;
    LostWakeTicker::Register(&c);
    LostWakeTicker::Unregister(&c);
    std::string said(512, '\0');
    const ssize_t n = ::pread(fd, said.data(), said.size(), 0);
    said.resize(n > 0 ? static_cast<size_t>(n) : 0);
    return said.find("could not start the lost-wake check thread") !=
                   std::string::npos
               ? 0
               : 3;
  });
  ASSERT_TRUE(child.started());
  EXPECT_EQ(child.ExitCode(), 0) << "3: the failure was not said";
}

}  // namespace
}  // namespace tether::loop::internal
