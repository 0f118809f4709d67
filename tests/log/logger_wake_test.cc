// The logger adds no wake syscalls to publishers: a publisher process is
// traced (ptrace, every syscall) while it sends 300 messages, and its
// FUTEX_WAKE calls are counted, with the logger recording the channel and,
// as the control that shows the count can see wakes, with a reader that
// sleeps on the channel's wake word (an io_uring event loop's watcher).
#include <linux/futex.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <thread>

#include "gtest/gtest.h"
#include "log/log_format.h"
#include "log/logger.h"
#include "log/replay_plan.h"
#include "loop/uring_event_loop.h"
#include "tests/log/log_test_util.h"
#include "tests/shm/shm_test_util.h"
#include "transport/channel_set.h"

namespace tether::log {
namespace {

using namespace ::tether::log::testing;

constexpr int kMessages = 300;

// The traced child: waits to be resumed, then sends kMessages at ~2 kHz.
[[noreturn]] void Publisher(const shm::ChannelOptions& options) {
  if (::ptrace(PTRACE_TRACEME, 0, nullptr, nullptr) != 0) ::_exit(90);
  ::raise(SIGSTOP);
  auto handle = transport::ChannelHandle::Open(options, "/wake/test");
  if (!handle.ok()) ::_exit(91);
  auto pub = transport::RawPublisher::Create(handle->get());
  if (!pub.ok()) ::_exit(92);
  const std::vector<std::byte> message = ScalarsMessage(1);
  for (int i = 0; i < kMessages; ++i) {
    std::span<std::byte> loan = (*pub)->Loan();
    std::memcpy(loan.data(), message.data(), message.size());
    if ((*pub)->Send(message.size()).status != transport::PublishStatus::kOk) {
      ::_exit(93);
    }
    const timespec pause{0, 500'000};
    ::nanosleep(&pause, nullptr);
  }
  ::_exit(0);
}

struct Traced {
  int futex_wakes = 0;
  int syscalls = 0;
  int exit_code = -1;
};

// Resumes the stopped child and counts its syscalls until it exits.
Traced TraceToExit(pid_t child) {
  Traced t;
  ::ptrace(PTRACE_SETOPTIONS, child, nullptr,
           reinterpret_cast<void*>(PTRACE_O_TRACESYSGOOD | PTRACE_O_EXITKILL));
  bool entering = true;
  ::ptrace(PTRACE_SYSCALL, child, nullptr, nullptr);
  for (;;) {
    int status = 0;
    if (::waitpid(child, &status, 0) != child) break;
    if (WIFEXITED(status)) {
      t.exit_code = WEXITSTATUS(status);
      break;
    }
    if (WIFSIGNALED(status)) break;
    int deliver = 0;
    if (WIFSTOPPED(status) && WSTOPSIG(status) == (SIGTRAP | 0x80)) {
      if (entering) {
        user_regs_struct regs;
        ::ptrace(PTRACE_GETREGS, child, nullptr, &regs);
        ++t.syscalls;
        if (regs.orig_rax == SYS_futex &&
            (regs.rsi & FUTEX_CMD_MASK) == FUTEX_WAKE) {
          ++t.futex_wakes;
        }
      }
      entering = !entering;
    } else if (WIFSTOPPED(status) && WSTOPSIG(status) != SIGSTOP) {
      deliver = WSTOPSIG(status);
    }
    ::ptrace(PTRACE_SYSCALL, child, nullptr,
             reinterpret_cast<void*>(static_cast<long>(deliver)));
  }
  return t;
}

class LoggerWakeTest : public ::testing::Test {
 protected:
  LoggerWakeTest() {
    RegisterTestTypes(schemas_);
    channel_ = MakeChannel(root_.options(), schemas_, "/wake/test",
                           kScalarsType, {.max_size = 128, .depth = 1024});
  }

  // Forks the publisher, stopped before its first syscall of interest.
  pid_t ForkPublisher() {
    const pid_t pid = ::fork();
    if (pid == 0) Publisher(root_.options());
    int status = 0;
    EXPECT_EQ(::waitpid(pid, &status, WUNTRACED), pid);
    EXPECT_TRUE(WIFSTOPPED(status));
    return pid;
  }

  shm::testing::ScopedRoot root_;
  transport::SchemaRegistry schemas_;
  std::unique_ptr<transport::ChannelHandle> channel_;
};

TEST_F(LoggerWakeTest, PublishersMakeNoWakeSyscallsForTheLogger) {
  const pid_t child = ForkPublisher();
  LoggerOptions options = LogTo(root_.options(), TempFile("wake.mcap"));
  options.period = std::chrono::milliseconds(5);
  auto logger = Logger::Start(options);
  ASSERT_TRUE(logger.ok()) << logger.status();
  const Traced t = TraceToExit(child);
  ASSERT_EQ(t.exit_code, 0);
  ASSERT_TRUE(WaitFor([&] { return (*logger)->stats().messages == kMessages; }))
      << "the logger did not record the publisher's messages";
  ASSERT_TRUE((*logger)->Stop().ok());
  std::printf("with the logger: %d syscalls traced, %d FUTEX_WAKE\n",
              t.syscalls, t.futex_wakes);
  EXPECT_GT(t.syscalls, kMessages) << "the trace saw too few syscalls";
  EXPECT_EQ(t.futex_wakes, 0) << "sends woke someone for the logger";
}

TEST_F(LoggerWakeTest, ControlASleepingReaderDoesCostWakeSyscalls) {
  // An io_uring loop with a watcher: it sleeps on the wake word between
  // messages, so the publisher must wake it.
  ChannelDescription d = DescribeChannel(*channel_);
  auto stack = StackConfigFor({{"/wake/test", d}}, schemas_.known_types());
  ASSERT_TRUE(stack.ok()) << stack.status();
  auto channels = transport::ChannelSet::Create(root_.options(), *stack, schemas_);
  ASSERT_TRUE(channels.ok()) << channels.status();
  auto loop = loop::UringEventLoop::Create("sleeper", channels->get());
  ASSERT_TRUE(loop.ok()) << loop.status();
  std::atomic<int> received{0};
  ASSERT_TRUE((*loop)->MakeRawWatcher("/wake/test", [&](const transport::RawMessage&) {
                       ++received;
                     })
                  .ok());
  std::thread runner([&] { (*loop)->Run(); });
  // Let it reach its first sleep.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const pid_t child = ForkPublisher();
  const Traced t = TraceToExit(child);
  ASSERT_EQ(t.exit_code, 0);
  ASSERT_TRUE(WaitFor([&] { return received.load() == kMessages; }));
  (*loop)->Exit();
  runner.join();
  std::printf("with a sleeping reader: %d syscalls traced, %d FUTEX_WAKE\n",
              t.syscalls, t.futex_wakes);
  EXPECT_GT(t.futex_wakes, kMessages / 2)
      << "the trace cannot see wake syscalls";
}

}  // namespace
}  // namespace tether::log
