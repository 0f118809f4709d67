// Deterministic crash test: a child process is stopped at every instruction
// of a send (and of a pinned read) with ptrace single-stepping and
// SIGKILLed there. After each kill another process checks the channel: it
// can send at once (nobody waits for the dead), the message in flight is
// either wholly delivered or not at all, a sweep reclaims everything, and
// every slot is accounted for.
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <string>

#include "gtest/gtest.h"
#include "shm/channel.h"
#include "shm/publisher.h"
#include "shm/reader.h"
#include "tests/shm/shm_audit.h"
#include "tests/shm/shm_test_util.h"

namespace tether::shm {
namespace {

using testing::CheckPattern;
using testing::PatternHeader;
using testing::WritePattern;

constexpr QueueParams kParams{.slot_size = 128, .queue_depth = 4,
                              .max_publishers = 2, .max_pinned = 2};

// Forks a traced child that runs `setup`, stops, runs `step_body`, stops
// again and exits. Returns its pid, stopped at the first stop, or -1.
pid_t ForkStopped(const std::function<void()>& setup,
                  const std::function<void()>& step_body) {
  pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (::ptrace(PTRACE_TRACEME, 0, nullptr, nullptr) != 0) ::_exit(90);
    setup();
    ::raise(SIGSTOP);
    step_body();
    ::raise(SIGSTOP);
    ::_exit(0);
  }
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid || !WIFSTOPPED(status)) return -1;
  return pid;
}

// Single-steps `pid` up to `steps` instructions. Returns the number taken
// before the child reached its second stop (== steps if it did not).
int Step(pid_t pid, int steps) {
  for (int i = 0; i < steps; ++i) {
    if (::ptrace(PTRACE_SINGLESTEP, pid, nullptr, nullptr) != 0) return i;
    int status = 0;
    if (::waitpid(pid, &status, 0) != pid) return i;
    if (!WIFSTOPPED(status) || WSTOPSIG(status) != SIGTRAP) return i;
  }
  return steps;
}

void Kill(pid_t pid) {
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
}

// Instructions in `step_body` (between the two stops).
int CountSteps(const std::function<void()>& setup,
               const std::function<void()>& step_body) {
  pid_t pid = ForkStopped(setup, step_body);
  if (pid < 0) return -1;
  int n = Step(pid, 1 << 22);
  Kill(pid);
  return n;
}

class StepKillTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = Channel::OpenOrCreate(root_.options(), "step", kParams);
    ASSERT_TRUE(c.ok()) << c.status();
    channel_ = std::move(*c);
  }
  testing::ScopedRoot root_;
  std::unique_ptr<Channel> channel_;
};

TEST_F(StepKillTest, PublisherKilledAtEveryInstructionOfASend) {
  const ChannelOptions opts = root_.options();
  std::unique_ptr<Channel> child_channel;
  std::unique_ptr<Publisher> child_pub;
  uint64_t child_seq = 0;
  size_t child_size = 0;
  auto setup = [&] {
    auto c = Channel::Open(opts, "step");
    if (!c.ok()) ::_exit(91);
    child_channel = std::move(*c);
    auto p = Publisher::Create(child_channel.get());
    if (!p.ok()) ::_exit(92);
    child_pub = std::move(*p);
    child_size = WritePattern(child_pub->Loan(), 1, child_seq, 100);
  };
  auto send = [&] {
    if (child_pub->Send(child_size).status != SendStatus::kOk) ::_exit(93);
  };
  const int total = CountSteps(setup, send);
  ASSERT_GT(total, 20) << "could not trace the child (ptrace not allowed?)";
  std::printf("a send is %d instructions; killing at each\n", total);

  auto parent_pub = Publisher::Create(channel_.get());
  ASSERT_TRUE(parent_pub.ok());
  auto reader = Reader::Create(channel_.get());
  ASSERT_TRUE(reader.ok());
  int committed_kills = 0;
  uint64_t parent_seq = 0;
  for (int kill_at = 0; kill_at <= total; ++kill_at) {
    SCOPED_TRACE(kill_at);
    pid_t pid = ForkStopped(setup, send);
    ASSERT_GT(pid, 0);
    // Paths differ by a few instructions from run to run (vDSO clock
    // retries, free-slot scans); a child that finished early is fine.
    Step(pid, kill_at);
    Kill(pid);

    // Nobody waits for the dead: the parent sends before any sweep.
    size_t n = WritePattern((*parent_pub)->Loan(), 2, parent_seq, 64);
    ASSERT_EQ((*parent_pub)->Send(n).status, SendStatus::kOk);
    ++parent_seq;
    // The dead child's message is delivered whole, before ours, or not at
    // all; nothing is missed.
    MessageView v;
    ASSERT_EQ((*reader)->Next(&v), ReadStatus::kOk);
    PatternHeader h;
    ASSERT_TRUE(CheckPattern(v.data, &h));
    EXPECT_EQ(v.missed, 0u);
    if (h.publisher == 1) {
      ++committed_kills;
      EXPECT_EQ(h.sequence, child_seq);
      ASSERT_EQ((*reader)->Next(&v), ReadStatus::kOk);
      ASSERT_TRUE(CheckPattern(v.data, &h));
    }
    EXPECT_EQ(h.publisher, 2u);
    EXPECT_EQ((*reader)->Next(&v), ReadStatus::kNothingNew);
    (*reader)->Release();

    SweepReport sweep = channel_->Sweep();
    EXPECT_EQ(sweep.dead_publishers, 1);
    testing::AuditResult audit = testing::Audit(channel_.get(), false);
    ASSERT_TRUE(audit.ok()) << audit.ToString();
    // Exactly our own loan is out; the dead child's is back in the pool.
    EXPECT_EQ(audit.loaned, 1);
    EXPECT_EQ(channel_->Stats().publishers, 1);
  }
  // Killed before its ring CAS: lost; after: delivered. Both must occur.
  EXPECT_GT(committed_kills, 0);
  EXPECT_LT(committed_kills, total + 1);
  std::printf("%d of %d kills came after the commit point\n", committed_kills,
              total + 1);
}

TEST_F(StepKillTest, PinningReaderKilledAtEveryInstructionOfARead) {
  auto pub = Publisher::Create(channel_.get());
  ASSERT_TRUE(pub.ok());
  for (uint64_t i = 0; i < 2; ++i) {
    size_t n = WritePattern((*pub)->Loan(), 1, i, 64);
    ASSERT_EQ((*pub)->Send(n).status, SendStatus::kOk);
  }
  const ChannelOptions opts = root_.options();
  std::unique_ptr<Channel> child_channel;
  std::unique_ptr<Reader> child_reader;
  auto setup = [&] {
    auto c = Channel::Open(opts, "step");
    if (!c.ok()) ::_exit(91);
    child_channel = std::move(*c);
    auto r = Reader::Create(child_channel.get(),
                            {.pin = true, .start = ReaderOptions::Start::kOldest});
    if (!r.ok()) ::_exit(92);
    child_reader = std::move(*r);
  };
  auto read = [&] {
    MessageView v;
    if (child_reader->Next(&v) != ReadStatus::kOk) ::_exit(93);
    if (child_reader->Next(&v) != ReadStatus::kOk) ::_exit(94);  // re-pins
    child_reader->Release();
  };
  const int total = CountSteps(setup, read);
  ASSERT_GT(total, 20);
  std::printf("two pinned reads are %d instructions; killing at each\n", total);
  uint64_t seq = 2;
  for (int kill_at = 0; kill_at <= total; ++kill_at) {
    SCOPED_TRACE(kill_at);
    pid_t pid = ForkStopped(setup, read);
    ASSERT_GT(pid, 0);
    Step(pid, kill_at);
    Kill(pid);
    SweepReport sweep = channel_->Sweep();
    EXPECT_EQ(sweep.dead_readers, 1);
    testing::AuditResult audit = testing::Audit(channel_.get(), false);
    ASSERT_TRUE(audit.ok()) << audit.ToString();
    EXPECT_EQ(audit.pinned, 0);  // the dead reader's pin is gone
    // Every slot circulates again: cycle the whole pool, then put the two
    // messages the next child reads back at the front.
    for (uint64_t i = 0; i < kParams.pool_size(); ++i) {
      size_t n = WritePattern((*pub)->Loan(), 1, seq++, 64);
      ASSERT_EQ((*pub)->Send(n).status, SendStatus::kOk);
    }
  }
}

}  // namespace
}  // namespace tether::shm
