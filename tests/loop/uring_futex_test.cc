// Real io_uring futex requests built with loop/uring_futex.h, on a shared
// (MAP_SHARED memfd) word woken by plain futex syscalls from another thread
// and from another process.
#include "loop/uring_futex.h"

#include <liburing.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <optional>
#include <thread>

#include "gtest/gtest.h"

namespace tether::loop {
namespace {

using std::chrono::steady_clock;
constexpr auto kDeadline = std::chrono::seconds(5);

// Plain futex syscalls, shared (no FUTEX_PRIVATE_FLAG), as a publisher makes.
long FutexWakeSyscall(std::atomic<uint32_t>* word, int count) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE,
                 count, nullptr, nullptr, 0);
}
long FutexWaitSyscall(std::atomic<uint32_t>* word, uint32_t expected) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT,
                 expected, nullptr, nullptr, 0);
}

bool KernelHasUringFutex() {
  utsname names;
  if (uname(&names) != 0) return false;
  int major = 0, minor = 0;
  if (std::sscanf(names.release, "%d.%d", &major, &minor) != 2) return false;
  return major > 6 || (major == 6 && minor >= 7);
}

// Two pages of a memfd mapped MAP_SHARED: futex words at offsets 0 and 64,
// scratch space at 128.
class SharedWordTest : public ::testing::Test {
 protected:
  static constexpr size_t kSize = 8192;

  void SetUp() override {
    fd_ = memfd_create("tether-uring-futex-test", MFD_CLOEXEC);
    ASSERT_GE(fd_, 0) << std::strerror(errno);
    ASSERT_EQ(ftruncate(fd_, kSize), 0) << std::strerror(errno);
    base_ = mmap(nullptr, kSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    ASSERT_NE(base_, MAP_FAILED) << std::strerror(errno);
    word_ = new (base_) std::atomic<uint32_t>(0);
    word2_ = new (static_cast<char*>(base_) + 64) std::atomic<uint32_t>(0);

    // The ring a loop builds; fall back to plain flags on older kernels.
    io_uring_params params;
    std::memset(&params, 0, sizeof(params));
    params.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
    int rc = io_uring_queue_init_params(8, &ring_, &params);
    if (rc == -EINVAL) {
      std::memset(&params, 0, sizeof(params));
      rc = io_uring_queue_init_params(8, &ring_, &params);
    }
    ASSERT_EQ(rc, 0) << "io_uring_queue_init_params: " << std::strerror(-rc);
    ring_open_ = true;
  }

  void TearDown() override {
    if (ring_open_) io_uring_queue_exit(&ring_);
    if (base_ != nullptr && base_ != MAP_FAILED) munmap(base_, kSize);
    if (fd_ >= 0) close(fd_);
  }

  io_uring_sqe* Sqe() {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    EXPECT_NE(sqe, nullptr);
    return sqe;
  }

  // Waits up to `seconds` for one CQE; its res, or nullopt on timeout.
  std::optional<int> WaitCqe(long seconds) {
    __kernel_timespec timeout = {.tv_sec = seconds, .tv_nsec = 0};
    io_uring_cqe* cqe = nullptr;
    if (io_uring_wait_cqe_timeout(&ring_, &cqe, &timeout) != 0) {
      return std::nullopt;
    }
    const int res = cqe->res;
    io_uring_cqe_seen(&ring_, cqe);
    return res;
  }

  // True if a CQE is ready now (runs deferred task work without waiting).
  bool CqeReadyNow() {
    __kernel_timespec zero = {.tv_sec = 0, .tv_nsec = 0};
    io_uring_cqe* cqe = nullptr;
    return io_uring_wait_cqe_timeout(&ring_, &cqe, &zero) == 0;
  }

  int fd_ = -1;
  void* base_ = nullptr;
  std::atomic<uint32_t>* word_ = nullptr;
  std::atomic<uint32_t>* word2_ = nullptr;
  io_uring ring_;
  bool ring_open_ = false;
};

TEST(RingFlags, PreferenceEndsWithNoFlagsAndNamesWhatIsSet) {
  EXPECT_EQ(kRingFlagPreference[0],
            IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN);
  EXPECT_EQ(kRingFlagPreference[std::size(kRingFlagPreference) - 1], 0u);
  EXPECT_EQ(RingFlagNames(0), "none");
  EXPECT_EQ(RingFlagNames(kRingFlagPreference[0]),
            "SINGLE_ISSUER|DEFER_TASKRUN");
  EXPECT_EQ(RingFlagNames(IORING_SETUP_COOP_TASKRUN | IORING_SETUP_SQPOLL),
            "COOP_TASKRUN");  // flags tether never asks for are not named
}

TEST(UringFutexSqe, WaitFillsTheKernelFieldLayout) {
  io_uring_sqe sqe;
  std::memset(&sqe, 0xff, sizeof(sqe));
  std::atomic<uint32_t> word{0};
  PrepFutexWait(&sqe, &word, /*expected=*/0x12345678u);
  EXPECT_EQ(sqe.opcode, 51);
  EXPECT_EQ(sqe.flags, 0);
  EXPECT_EQ(sqe.fd, 0x02);  // FUTEX2_SIZE_U32, shared.
  EXPECT_EQ(sqe.fd & static_cast<int>(kTetherFutex2Private), 0);
  EXPECT_EQ(sqe.addr, reinterpret_cast<uint64_t>(&word));
  EXPECT_EQ(sqe.off, 0x12345678u);
  EXPECT_EQ(sqe.len, 0u);
  EXPECT_EQ(sqe.addr3, 0xffffffffu);
  EXPECT_EQ(sqe.rw_flags, 0);
  EXPECT_EQ(sqe.buf_index, 0);
  EXPECT_EQ(sqe.file_index, 0u);
  EXPECT_EQ(sqe.personality, 0);
}

TEST(UringFutexSqe, WakeAndWaitvFillTheKernelFieldLayout) {
  io_uring_sqe sqe;
  std::memset(&sqe, 0xff, sizeof(sqe));
  uint32_t word = 0;
  PrepFutexWake(&sqe, &word, /*max_to_wake=*/3, /*mask=*/0x5);
  EXPECT_EQ(sqe.opcode, 52);
  EXPECT_EQ(sqe.fd, 0x02);
  EXPECT_EQ(sqe.addr, reinterpret_cast<uint64_t>(&word));
  EXPECT_EQ(sqe.off, 3u);
  EXPECT_EQ(sqe.len, 0u);
  EXPECT_EQ(sqe.addr3, 0x5u);
  EXPECT_EQ(sqe.rw_flags, 0);

  futex_waitv waiters[2] = {};
  std::memset(&sqe, 0xff, sizeof(sqe));
  PrepFutexWaitv(&sqe, waiters, 2);
  EXPECT_EQ(sqe.opcode, 53);
  EXPECT_EQ(sqe.fd, 0);
  EXPECT_EQ(sqe.addr, reinterpret_cast<uint64_t>(waiters));
  EXPECT_EQ(sqe.off, 0u);
  EXPECT_EQ(sqe.len, 2u);
  EXPECT_EQ(sqe.addr3, 0u);
  EXPECT_EQ(sqe.rw_flags, 0);
}

TEST_F(SharedWordTest, WaitOnAWordThatDiffersCompletesWithEagain) {
  if (!KernelHasUringFutex()) GTEST_SKIP() << "kernel < 6.7";
  word_->store(7);
  PrepFutexWait(Sqe(), word_, /*expected=*/6);
  ASSERT_EQ(io_uring_submit(&ring_), 1);
  EXPECT_EQ(WaitCqe(5), std::optional<int>(-EAGAIN));
}

TEST_F(SharedWordTest, WaitCompletesWhenAnotherThreadWakesWithThePlainSyscall) {
  if (!KernelHasUringFutex()) GTEST_SKIP() << "kernel < 6.7";
  PrepFutexWait(Sqe(), word_, /*expected=*/0);
  ASSERT_EQ(io_uring_submit(&ring_), 1);
  EXPECT_FALSE(CqeReadyNow()) << "the wait completed before any wake";

  long woken = 0;
  std::thread waker([&] {
    word_->store(1, std::memory_order_release);
    const auto deadline = steady_clock::now() + kDeadline;
    while (woken == 0 && steady_clock::now() < deadline) {
      woken = FutexWakeSyscall(word_, 1);
      if (woken == 0) std::this_thread::yield();
    }
  });
  const std::optional<int> res = WaitCqe(5);
  waker.join();
  EXPECT_EQ(woken, 1) << "the plain FUTEX_WAKE never found the ring's waiter";
  EXPECT_EQ(res, std::optional<int>(0));
}

TEST_F(SharedWordTest,
       WaitCompletesWhenAForkedProcessWakesThroughItsOwnMapping) {
  if (!KernelHasUringFutex()) GTEST_SKIP() << "kernel < 6.7";
  PrepFutexWait(Sqe(), word_, /*expected=*/0);
  ASSERT_EQ(io_uring_submit(&ring_), 1);
  auto* child_address =
      new (static_cast<char*>(base_) + 128) std::atomic<uint64_t>(0);

  const pid_t pid = fork();
  ASSERT_GE(pid, 0) << std::strerror(errno);
  if (pid == 0) {
    // Child: map the same file again, at another address, and wake through
    // that mapping only. Async-signal-safe calls only.
    void* mine =
        mmap(nullptr, kSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (mine == MAP_FAILED || mine == base_) _exit(3);
    auto* word = static_cast<std::atomic<uint32_t>*>(mine);
    static_cast<std::atomic<uint64_t>*>(
        static_cast<void*>(static_cast<char*>(mine) + 128))
        ->store(reinterpret_cast<uint64_t>(mine));
    word->store(1, std::memory_order_release);
    for (int i = 0; i < 5'000'000; ++i) {
      if (FutexWakeSyscall(word, 1) == 1) _exit(0);
    }
    _exit(1);
  }
  const std::optional<int> res = WaitCqe(5);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "child: 1 = its FUTEX_WAKE never found the waiter, 3 = mmap failed";
  EXPECT_NE(child_address->load(), reinterpret_cast<uint64_t>(base_));
  EXPECT_EQ(word_->load(), 1u);
  EXPECT_EQ(res, std::optional<int>(0));
}

TEST_F(SharedWordTest, RingWakeWakesAThreadInThePlainFutexWait) {
  if (!KernelHasUringFutex()) GTEST_SKIP() << "kernel < 6.7";
  std::thread waiter([&] {
    while (word_->load(std::memory_order_acquire) == 0) {
      FutexWaitSyscall(word_, 0);
    }
  });
  // Wake through the ring until the kernel reports one waiter woken.
  int woken = 0;
  const auto deadline = steady_clock::now() + kDeadline;
  while (woken == 0 && steady_clock::now() < deadline) {
    PrepFutexWake(Sqe(), word_, 1);
    ASSERT_EQ(io_uring_submit(&ring_), 1);
    const std::optional<int> res = WaitCqe(5);
    ASSERT_TRUE(res.has_value());
    ASSERT_GE(*res, 0);
    woken = *res;
  }
  // Release the waiter (it went back to sleep while the word stayed 0).
  word_->store(1, std::memory_order_release);
  FutexWakeSyscall(word_, 1);
  waiter.join();
  EXPECT_EQ(woken, 1);
}

TEST_F(SharedWordTest, WaitvCompletesWithTheIndexOfTheWokenWord) {
  if (!KernelHasUringFutex()) GTEST_SKIP() << "kernel < 6.7";
  futex_waitv waiters[2] = {};
  waiters[0].uaddr = reinterpret_cast<uint64_t>(word_);
  waiters[0].val = 0;
  waiters[0].flags = kTetherFutex2SharedU32;
  waiters[1].uaddr = reinterpret_cast<uint64_t>(word2_);
  waiters[1].val = 0;
  waiters[1].flags = kTetherFutex2SharedU32;
  PrepFutexWaitv(Sqe(), waiters, 2);
  ASSERT_EQ(io_uring_submit(&ring_), 1);
  EXPECT_FALSE(CqeReadyNow());

  long woken = 0;
  std::thread waker([&] {
    word2_->store(1, std::memory_order_release);
    const auto deadline = steady_clock::now() + kDeadline;
    while (woken == 0 && steady_clock::now() < deadline) {
      woken = FutexWakeSyscall(word2_, 1);
      if (woken == 0) std::this_thread::yield();
    }
  });
  const std::optional<int> res = WaitCqe(5);
  waker.join();
  EXPECT_EQ(woken, 1);
  EXPECT_EQ(res, std::optional<int>(1));
}

}  // namespace
}  // namespace tether::loop
