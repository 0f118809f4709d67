// Shared memory written by someone else (a bug, a hostile process, `dd`,
// `truncate`) and a filesystem that is too small: overwritten slot headers,
// ring entries and tails, and truncated files each end in a reported, sticky
// corruption or a clear error -- never a crash, a SIGBUS, a silent loss or a
// leftover file. And a waiter that dies asleep is swept, after which
// publishers make no wake syscall again (counted with ptrace). A zeroed
// header: hostile_header_test.cc.
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shm/channel.h"
#include "shm/channel_access.h"
#include "shm/futex.h"
#include "shm/layout.h"
#include "shm/publisher.h"
#include "shm/reader.h"
#include "tests/shm/hostile_memory_fixture.h"
#include "tests/util/child_process.h"

namespace tether::shm {
namespace {

using ::tether::testing::ChildProcess;

using ::testing::HasSubstr;
using testing::HostileMemoryTest;
using testing::kParams;
namespace in = internal;

TEST_F(HostileMemoryTest, ZeroedSlotHeadersAreCorruptionNotLoss) {
  auto c = Open();
  auto pub = Publisher::Create(c.get());
  ASSERT_TRUE(pub.ok());
  SendSome(pub->get(), 10);
  // What `dd if=/dev/zero` over the slot headers does.
  for (uint64_t s = 0; s < kParams.pool_size(); ++s) {
    in::SlotHeader* sh = in::ChannelAccess::slot_header(*c, s);
    std::memset(static_cast<void*>(sh), 0, sizeof(*sh));
  }
  // A fresh handle (another process's view) reads from the oldest.
  auto other = Channel::Open(root_.options(), "/robot/imu");
  ASSERT_TRUE(other.ok());
  auto reader = Reader::Create(other->get(), {.pin = true,
                                             .start = ReaderOptions::Start::kOldest});
  ASSERT_TRUE(reader.ok());
  MessageView v;
  EXPECT_EQ((*reader)->Next(&v), ReadStatus::kCorrupt);
  // Not counted as lost: it is not loss, it is corruption, and it says so.
  EXPECT_EQ((*reader)->total_missed(), 0u);
  EXPECT_THAT(std::string((*other)->corruption()),
              HasSubstr("no send can leave it in"));
}

// A publisher that stops on corruption that its readers' own reads never
// meet (garbage slot states everywhere but its loan) tells them: the wake
// word moves (a waiter's FUTEX_WAIT returns), and a reader on another
// handle, with nothing new to read, reports it instead of waiting forever
// for sends that stopped. Said once per publisher.
TEST_F(HostileMemoryTest, APublisherThatStopsOnCorruptionTellsItsReaders) {
  auto c = Open();
  auto pub = Publisher::Create(c.get());
  ASSERT_TRUE(pub.ok());
  SendSome(pub->get(), 10);
  auto other = Channel::Open(root_.options(), "/robot/imu");
  ASSERT_TRUE(other.ok());
  auto reader = Reader::Create(other->get(), {.pin = true});
  ASSERT_TRUE(reader.ok());
  MessageView v;
  ASSERT_EQ((*reader)->Next(&v), ReadStatus::kNothingNew);
  ASSERT_FALSE((*reader)->HasNext());
  const uint32_t wake_before = (*other)->LoadWakeWord();
  // Every slot in a state no send leaves it in, the publisher's next loan
  // (taken at its last commit) included.
  const uint64_t garbage = in::Owned(0xff);
  for (uint64_t s = 0; s < kParams.pool_size(); ++s) {
    in::ChannelAccess::slot_header(*c, s)->state.store(garbage);
  }
  // Before the publisher stops, the reader sees nothing wrong.
  ASSERT_FALSE((*reader)->HasNext());
  EXPECT_EQ((*pub)->Send(64).status, SendStatus::kCorrupt);
  ASSERT_TRUE(c->corrupt());
  const uint32_t wake_after = (*other)->LoadWakeWord();
  EXPECT_NE(wake_after, wake_before);
  EXPECT_TRUE((*reader)->HasNext());
  EXPECT_EQ((*reader)->Next(&v), ReadStatus::kCorrupt);
  EXPECT_EQ((*reader)->total_missed(), 0u);
  EXPECT_THAT(std::string((*other)->corruption()),
              HasSubstr("another process found this channel's shared memory "
                        "corrupt"));
  // Later failed sends do not wake anyone again.
  EXPECT_EQ((*pub)->Send(64).status, SendStatus::kCorrupt);
  EXPECT_EQ((*other)->LoadWakeWord(), wake_after);
  // And every later opener (a tool, a restarted node) finds it corrupt.
  auto later = Channel::Open(root_.options(), "/robot/imu");
  ASSERT_TRUE(later.ok()) << later.status();
  EXPECT_TRUE((*later)->corrupt());
  const absl::Status check = (*later)->CheckConsistency();
  EXPECT_TRUE(absl::IsDataLoss(check)) << check;
  EXPECT_THAT(std::string(check.message()),
              HasSubstr("a publisher of this channel found its shared memory "
                        "corrupt"));
}

// Slot headers overwritten with states no step leaves a slot in (an owner
// beyond the registry) everywhere but the publisher's loan: sends fail as
// corruption, said once, not as a pool that is merely full (kNoLoan).
TEST_F(HostileMemoryTest, SlotsInStatesNoSendLeavesAreCorruptionNotAFullPool) {
  auto c = Open();
  auto pub = Publisher::Create(c.get());
  ASSERT_TRUE(pub.ok());
  SendSome(pub->get(), 10);
  ASSERT_FALSE((*pub)->Loan().empty());
  const uint64_t garbage = in::Owned(0xff);
  for (uint64_t s = 0; s < kParams.pool_size(); ++s) {
    auto& state = in::ChannelAccess::slot_header(*c, s)->state;
    if (state.load() != in::Owned(0)) state.store(garbage);
  }
  SendStatus last = SendStatus::kOk;
  for (int i = 0; i < 3 && last == SendStatus::kOk; ++i) {
    (void)(*pub)->Loan();
    last = (*pub)->Send(64).status;
  }
  EXPECT_EQ(last, SendStatus::kCorrupt);
  EXPECT_TRUE(c->corrupt());
  EXPECT_THAT(std::string(c->corruption()),
              HasSubstr("a state no send can leave it in: the slot headers "
                        "are overwritten"));
}

// A tail bumped past the next message, whose ring entry no publisher
// placed: a reader that finds nothing new says the header was overwritten
// (no message would ever come), instead of waiting for ever.
TEST_F(HostileMemoryTest, ATailPastAnUnplacedMessageIsReportedByReaders) {
  auto c = Open();
  auto pub = Publisher::Create(c.get());
  auto reader = Reader::Create(c.get(), {.pin = true});
  ASSERT_TRUE(pub.ok() && reader.ok());
  SendSome(pub->get(), 3);
  MessageView v;
  for (int i = 0; i < 3; ++i) ASSERT_EQ((*reader)->Next(&v), ReadStatus::kOk);
  ASSERT_EQ((*reader)->Next(&v), ReadStatus::kNothingNew);
  in::ChannelAccess::header(*c)->tail.fetch_add(1000000);
  EXPECT_EQ((*reader)->Next(&v), ReadStatus::kCorrupt);
  EXPECT_THAT(std::string(c->corruption()),
              HasSubstr("its tail is past a message no publisher placed"));
}

TEST_F(HostileMemoryTest, CorruptionIsStickyAndSaysWhatAndWhere) {
  auto c = Open();
  auto pub = Publisher::Create(c.get());
  auto reader = Reader::Create(c.get());
  ASSERT_TRUE(pub.ok() && reader.ok());
  SendSome(pub->get(), 3);
  // The entry the reader looks at next gets a tag no index can have there.
  const uint64_t next = (*reader)->next_index();
  in::ChannelAccess::ring_entry(*c, next)->store(in::MakeEntry(next + 1, 0));
  MessageView v;
  EXPECT_TRUE((*reader)->HasNext());  // so a sleeping loop looks
  EXPECT_EQ((*reader)->Next(&v), ReadStatus::kCorrupt);
  EXPECT_TRUE(c->corrupt());
  EXPECT_THAT(std::string(c->corruption()),
              HasSubstr("tag that fits no queue index"));
  // Every later operation says so; nothing is sent into a corrupt channel.
  EXPECT_EQ((*reader)->Next(&v), ReadStatus::kCorrupt);
  EXPECT_EQ((*reader)->Latest(&v), ReadStatus::kCorrupt);
  EXPECT_TRUE((*reader)->HasNext());
  EXPECT_EQ((*pub)->Send(8).status, SendStatus::kCorrupt);
  EXPECT_EQ((*pub)->send_failures(), 1u);
  EXPECT_EQ(c->Stats().send_failures, 1u);  // visible to tools
}

TEST_F(HostileMemoryTest, ConsistencyCheckFindsAGarbageTailAndRing) {
  {
    auto c = Open();
    auto pub = Publisher::Create(c.get());
    SendSome(pub->get(), 5);
    ASSERT_TRUE(c->CheckConsistency().ok()) << c->CheckConsistency();
    in::ChannelAccess::header(*c)->tail.store(6926907815881082933ull);
  }
  auto c = Channel::Open(root_.options(), "/robot/imu");
  ASSERT_TRUE(c.ok());  // it opens, so that tools can report it...
  EXPECT_TRUE((*c)->corrupt());  // ...but the handle knows
  absl::Status s = (*c)->CheckConsistency();
  EXPECT_TRUE(absl::IsDataLoss(s));
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("beyond the largest queue index"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("remove"));
}

TEST_F(HostileMemoryTest, ConsistencyCheckPassesUnderLiveTraffic) {
  auto c = Open();
  auto pub = Publisher::Create(c.get());
  ASSERT_TRUE(pub.ok());
  std::atomic<bool> stop{false};
  std::thread sender([&] {
    uint64_t i = 0;
    while (!stop.load()) {
      std::span<std::byte> loan = (*pub)->Loan();
      std::memset(loan.data(), static_cast<int>(i++), 16);
      (void)(*pub)->Send(16);
    }
  });
  for (int i = 0; i < 2000; ++i) {
    absl::Status s = c->CheckConsistency();
    ASSERT_TRUE(s.ok()) << s;
  }
  stop = true;
  sender.join();
}

TEST_F(HostileMemoryTest, ATruncatedFileCannotSigbusALiveProcess) {
  auto c = Open();
  auto pub = Publisher::Create(c.get());
  auto reader = Reader::Create(c.get());
  ASSERT_TRUE(pub.ok() && reader.ok());
  SendSome(pub->get(), 3);
  ASSERT_EQ(::truncate(c->path().c_str(), 0), 0);
  // Every access below touches pages past the end of the file now.
  MessageView v;
  EXPECT_EQ((*reader)->Next(&v), ReadStatus::kCorrupt);
  EXPECT_TRUE(c->corrupt());
  EXPECT_THAT(std::string(c->corruption()), HasSubstr("truncated"));
  EXPECT_EQ((*pub)->Send(8).status, SendStatus::kCorrupt);
  (void)c->Stats();
  (void)c->Sweep();
  // A fresh open of the shrunken file is refused with the fix.
  auto again = Channel::Open(root_.options(), "/robot/imu");
  EXPECT_TRUE(absl::IsDataLoss(again.status())) << again.status();
  EXPECT_THAT(std::string(again.status().message()), HasSubstr("rm "));
}

// The same on a large channel, whose file is mapped with huge pages where
// the kernel gives them (channel_files.h): the truncation splits them, and
// the SIGBUS repair must cover the whole mapping as it does 4 KiB pages.
TEST_F(HostileMemoryTest, ATruncatedLargeChannelCannotSigbusALiveProcess) {
  LargeChannel large = OpenLarge();
  ASSERT_TRUE(large.channel && large.pub && large.reader);
  std::unique_ptr<Channel>& c = large.channel;
  std::unique_ptr<Publisher>& pub = large.pub;
  std::unique_ptr<Reader>& reader = large.reader;
  for (int i = 0; i < 3; ++i) {
    std::span<std::byte> loan = pub->Loan();
    ASSERT_EQ(loan.size(), 1u << 20);
    std::memset(loan.data(), i, loan.size());
    ASSERT_EQ(pub->Send(loan.size()).status, SendStatus::kOk);
  }
  // To a size inside the second huge page: the first one stays whole, the
  // second is split, the rest are gone.
  ASSERT_EQ(::truncate(c->path().c_str(), (2u << 20) + 4096), 0);
  // Reading the messages in place touches pages past the new end.
  MessageView v;
  uint64_t sum = 0;
  while (reader->Next(&v) == ReadStatus::kOk) {
    for (size_t i = 0; i < v.data.size(); i += 4096) {
      sum += static_cast<uint64_t>(v.data[i]);
    }
  }
  (void)sum;
  // Past the new end, inside the huge page it cut, the file may read as
  // zeros without a SIGBUS: the check every tool and opener runs sees its
  // size, and the handle is corrupt from then on.
  absl::Status check = c->CheckConsistency();
  EXPECT_TRUE(absl::IsDataLoss(check)) << check;
  MessageView after;
  EXPECT_EQ(reader->Next(&after), ReadStatus::kCorrupt);
  EXPECT_TRUE(c->corrupt());
  EXPECT_THAT(std::string(c->corruption()), HasSubstr("truncated"));
  std::span<std::byte> loan = pub->Loan();
  if (!loan.empty()) std::memset(loan.data(), 7, loan.size());
  EXPECT_EQ(pub->Send(64).status, SendStatus::kCorrupt);
  (void)c->Stats();
  (void)c->Sweep();
}

TEST_F(HostileMemoryTest, ALargeChannelTruncatedToNothingFaultsAndIsCorrupt) {
  LargeChannel large = OpenLarge();
  ASSERT_TRUE(large.channel && large.pub && large.reader);
  std::unique_ptr<Channel>& c = large.channel;
  std::unique_ptr<Publisher>& pub = large.pub;
  std::unique_ptr<Reader>& reader = large.reader;
  std::span<std::byte> loan = pub->Loan();
  std::memset(loan.data(), 1, loan.size());
  ASSERT_EQ(pub->Send(loan.size()).status, SendStatus::kOk);
  ASSERT_EQ(::truncate(c->path().c_str(), 0), 0);
  // No check run: the first access raises SIGBUS, which the guard repairs.
  MessageView v;
  EXPECT_EQ(reader->Next(&v), ReadStatus::kCorrupt);
  EXPECT_TRUE(c->corrupt());
  EXPECT_THAT(std::string(c->corruption()), HasSubstr("SIGBUS"));
  EXPECT_EQ(pub->Send(64).status, SendStatus::kCorrupt);
}

TEST_F(HostileMemoryTest, AChannelThatCannotFitFailsAtCreationAndLeavesNothing) {
  struct statvfs fs;
  ASSERT_EQ(::statvfs("/dev/shm", &fs), 0);
  const uint64_t free_bytes = uint64_t{fs.f_bavail} * fs.f_frsize;
  // 256 MiB slots x enough of them to exceed what is free.
  QueueParams huge{.slot_size = kMaxSlotSize, .queue_depth = 2,
                   .max_publishers = 1, .max_pinned = 0};
  while (Channel::FileSizeFor(huge, 0) <= free_bytes) huge.queue_depth *= 2;
  auto c = Channel::OpenOrCreate(root_.options(), "/camera/raw", huge);
  ASSERT_TRUE(absl::IsResourceExhausted(c.status())) << c.status();
  const std::string message(c.status().message());
  EXPECT_THAT(message, HasSubstr("/camera/raw needs"));
  EXPECT_THAT(message, HasSubstr("is free there"));
  EXPECT_THAT(message, HasSubstr("--shm-size"));
  EXPECT_THAT(Files(), ::testing::IsEmpty());  // no half-made file
}

// The futex syscalls (any op) a forked publisher makes while sending `n`
// messages, counted with ptrace at syscall stops.
int FutexSyscallsOfSends(Channel* c, int n) {
  const pid_t child = ::fork();
  if (child == 0) {
    ::ptrace(PTRACE_TRACEME, 0, nullptr, nullptr);
    ::raise(SIGSTOP);
    auto pub = Publisher::Create(c);
    if (!pub.ok()) ::_exit(2);
    ::raise(SIGSTOP);  // counting starts here
    for (int i = 0; i < n; ++i) {
      std::span<std::byte> loan = (*pub)->Loan();
      std::memset(loan.data(), i, 8);
      if ((*pub)->Send(8).status != SendStatus::kOk) ::_exit(3);
    }
    ::raise(SIGSTOP);  // and ends here
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(child, &status, 0);  // first SIGSTOP
  ::ptrace(PTRACE_SETOPTIONS, child, nullptr, PTRACE_O_TRACESYSGOOD);
  ::ptrace(PTRACE_CONT, child, nullptr, nullptr);
  ::waitpid(child, &status, 0);  // second SIGSTOP: registered
  int futexes = 0;
  bool entering = true;
  ::ptrace(PTRACE_SYSCALL, child, nullptr, nullptr);
  for (;;) {
    if (::waitpid(child, &status, 0) != child || WIFEXITED(status)) break;
    if (WIFSTOPPED(status) && WSTOPSIG(status) == (SIGTRAP | 0x80)) {
      user_regs_struct regs;
      ::ptrace(PTRACE_GETREGS, child, nullptr, &regs);
      if (entering && regs.orig_rax == SYS_futex) ++futexes;
      entering = !entering;
      ::ptrace(PTRACE_SYSCALL, child, nullptr, nullptr);
      continue;
    }
    if (WIFSTOPPED(status) && WSTOPSIG(status) == SIGSTOP) break;  // done
    ::ptrace(PTRACE_SYSCALL, child, nullptr, WSTOPSIG(status));
  }
  ::kill(child, SIGKILL);
  ::waitpid(child, &status, 0);
  return futexes;
}

TEST_F(HostileMemoryTest, AWaiterKilledAsleepIsSweptAndSendsMakeNoWakeSyscall) {
  auto c = Open();
  EXPECT_EQ(FutexSyscallsOfSends(c.get(), 50), 0);  // nobody sleeps
  // A child registers as a sleeper, announces its sleep and is killed there.
  ChildProcess sleeper([&](const ChildProcess::Voice& voice) {
    auto mine = Channel::Open(root_.options(), "/robot/imu");
    if (!mine.ok()) return 2;
    Sleeper me = (*mine)->RegisterSleeper();
    me.BeginSleep();
    voice.Say();
    FutexWait((*mine)->wake_word(), (*mine)->LoadWakeWord() + 1000, nullptr);
    for (;;) ::pause();
  });
  ASSERT_TRUE(sleeper.Heard().has_value())
      << "the sleeper failed at step " << sleeper.ExitCode();
  EXPECT_EQ(c->Stats().sleepers, 1u);
  EXPECT_EQ(FutexSyscallsOfSends(c.get(), 50), 50);  // a wake per send
  ASSERT_TRUE(sleeper.Kill(SIGKILL));
  (void)sleeper.Wait();
  const SweepReport swept = c->Sweep();
  EXPECT_EQ(swept.dead_sleepers, 1);
  EXPECT_EQ(c->Stats().sleepers, 0u);
  EXPECT_EQ(c->Stats().registered_sleepers, 0);
  EXPECT_EQ(FutexSyscallsOfSends(c.get(), 50), 0);  // back to none
}

}  // namespace
}  // namespace tether::shm
