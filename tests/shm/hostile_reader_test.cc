// What a hostile reader can do with write access to a channel's reader-state
// file (and nothing more: it cannot write the data file), and that each of
// those is reported, never silent: pinning every slot makes sends fail with
// kNoLoan (counted); setting sleeper bits costs wake syscalls; clearing
// another reader's pin lets its slot be reused under it, which that reader
// detects when it lets go (overwritten_while_read). Garbage in the whole
// reader-state file never corrupts the data or stops the publisher, and
// CheckConsistency reports it without marking the channel corrupt. That
// includes the file's header: processes that open the channel afterwards
// (restarted nodes, tools) open it, and only a file of the wrong size,
// which cannot be mapped whole, is refused.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shm/channel.h"
#include "shm/channel_access.h"
#include "shm/futex.h"
#include "shm/layout.h"
#include "shm/publisher.h"
#include "shm/reader.h"
#include "tests/shm/shm_audit.h"
#include "tests/shm/shm_test_util.h"
#include "tests/util/child_process.h"

namespace tether::shm {
namespace {

namespace in = internal;
using ::testing::HasSubstr;

constexpr QueueParams kParams{.slot_size = 128, .queue_depth = 4,
                              .max_publishers = 1, .max_pinned = 3};

class HostileReader : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = Channel::OpenOrCreate(root_.options(), "c", kParams);
    ASSERT_TRUE(c.ok()) << c.status();
    channel_ = std::move(*c);
    auto p = Publisher::Create(channel_.get());
    ASSERT_TRUE(p.ok());
    publisher_ = std::move(*p);
  }
  SendStatus Send(uint64_t seq) {
    std::span<std::byte> loan = publisher_->Loan();
    if (loan.empty()) return publisher_->Send(8).status;
    return publisher_->Send(testing::WritePattern(loan, 1, seq, 64)).status;
  }

  testing::ScopedRoot root_;
  std::unique_ptr<Channel> channel_;
  std::unique_ptr<Publisher> publisher_;
};

// Every pin bit of every slot set (garbage, or a hostile reader): no slot
// is free, which never happens in a healthy channel, so the publisher
// clears the pins no reader can hold (bits of no reader, of unregistered
// entries, or set in two slots) and sends on. Nothing fails, nothing is
// corrupt.
TEST_F(HostileReader, PinningEverySlotIsUndoneByThePublisherThatNeedsOne) {
  for (uint64_t s = 0; s < kParams.pool_size(); ++s) {
    in::ChannelAccess::pin_word(*channel_, s)->store(~uint64_t{0});
  }
  for (int i = 0; i < 20; ++i) EXPECT_EQ(Send(i), SendStatus::kOk) << i;
  EXPECT_EQ(publisher_->send_failures(), 0u);
  EXPECT_FALSE(channel_->corrupt());
  for (uint64_t s = 0; s < kParams.pool_size(); ++s) {
    EXPECT_EQ(in::ChannelAccess::pin_word(*channel_, s)->load(), 0u) << s;
  }
  EXPECT_TRUE(channel_->CheckConsistency().ok());
}

// What a registered reader holds stays held: its one pin is a pin a reader
// can have, so the publisher leaves it (and the reader's message intact)
// while it clears a hostile bit of that same reader set in every slot.
TEST_F(HostileReader, APinAReaderCanHoldSurvivesTheClearing) {
  auto reader = Reader::Create(channel_.get(), {.pin = true});
  ASSERT_TRUE(reader.ok());
  ASSERT_EQ(Send(0), SendStatus::kOk);
  MessageView held;
  ASSERT_EQ((*reader)->Next(&held), ReadStatus::kOk);
  // Bits 1 and 2 (unregistered) everywhere but the held slot.
  for (uint64_t s = 0; s < kParams.pool_size(); ++s) {
    if (s != held.slot) in::ChannelAccess::pin_word(*channel_, s)->store(0b110);
  }
  for (int i = 1; i < 30; ++i) EXPECT_EQ(Send(i), SendStatus::kOk) << i;
  EXPECT_EQ(in::ChannelAccess::pin_word(*channel_, held.slot)->load(), 0b1u);
  testing::PatternHeader h;
  EXPECT_TRUE(testing::CheckPattern(held.data, &h));
  EXPECT_EQ(h.sequence, 0u);
  (*reader)->Release();
  EXPECT_EQ((*reader)->overwritten_while_read(), 0u);
  EXPECT_FALSE(channel_->corrupt());
}

// Random bytes over the whole reader-state file (a buggy reader's stray
// writes; the file keeps its size): sends go on, readers read, the check
// reports the file and nobody stops.
TEST_F(HostileReader, RandomBytesOverTheReaderStateStopNothing) {
  auto reader = Reader::Create(channel_.get(), {.pin = true});
  ASSERT_TRUE(reader.ok());
  std::mt19937_64 rng(12);
  auto* words = reinterpret_cast<uint64_t*>(
      in::ChannelAccess::state_header(*channel_));
  const uint64_t size = in::StateLayout::For(kParams).total;
  for (uint64_t w = 0; w < size / 8; ++w) words[w] = rng();
  int got = 0;
  for (int i = 0; i < 50; ++i) {
    ASSERT_EQ(Send(i), SendStatus::kOk) << i;
    MessageView v;
    while ((*reader)->Next(&v) == ReadStatus::kOk) ++got;
  }
  EXPECT_EQ(got + (*reader)->total_missed(), 50u);
  EXPECT_FALSE(channel_->corrupt());
  const absl::Status check = channel_->CheckConsistency();
  EXPECT_TRUE(absl::IsDataLoss(check)) << check;
  EXPECT_THAT(std::string(check.message()),
              HasSubstr(channel_->reader_state_path()));
}

// With every slot pinned, a new publisher still gets a slot: the pins no
// reader can hold are cleared for it too.
TEST(HostileReaderPins, ANewPublisherWithEverySlotPinnedStillGetsOne) {
  testing::ScopedRoot root;
  QueueParams params = kParams;
  params.max_publishers = 2;
  auto c = Channel::OpenOrCreate(root.options(), "c", params);
  ASSERT_TRUE(c.ok()) << c.status();
  for (uint64_t s = 0; s < params.pool_size(); ++s) {
    in::ChannelAccess::pin_word(**c, s)->store(~uint64_t{0});
  }
  auto p = Publisher::Create(c->get());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_FALSE((*c)->corrupt());
}

TEST_F(HostileReader, SleeperBitsCostWakesButBreakNothing) {
  in::ChannelAccess::state_header(*channel_)->sleeper_mask.store(~uint64_t{0});
  auto r = Reader::Create(channel_.get(), {.pin = true});
  ASSERT_TRUE(r.ok());
  for (int i = 0; i < 10; ++i) ASSERT_EQ(Send(i), SendStatus::kOk);
  MessageView v;
  int got = 0;
  while ((*r)->Next(&v) == ReadStatus::kOk) ++got;
  EXPECT_EQ(got + (*r)->total_missed(), 10u);
  EXPECT_FALSE(channel_->corrupt());
  const absl::Status check = channel_->CheckConsistency();
  EXPECT_THAT(std::string(check.message()), HasSubstr("wake syscall"));
}

TEST_F(HostileReader, ClearedPinIsDetectedByTheReaderItWasTakenFrom) {
  auto victim = Reader::Create(channel_.get(), {.pin = true});
  ASSERT_TRUE(victim.ok());
  ASSERT_EQ(Send(0), SendStatus::kOk);
  MessageView v;
  ASSERT_EQ((*victim)->Next(&v), ReadStatus::kOk);
  // The hostile process clears every pin while the victim reads in place.
  for (uint64_t s = 0; s < kParams.pool_size(); ++s) {
    in::ChannelAccess::pin_word(*channel_, s)->store(0);
  }
  // Publishers now reuse the victim's slot.
  for (int i = 1; i <= 2 * static_cast<int>(kParams.pool_size()); ++i) {
    ASSERT_EQ(Send(i), SendStatus::kOk);
  }
  EXPECT_EQ((*victim)->overwritten_while_read(), 0u);
  (*victim)->Release();
  EXPECT_EQ((*victim)->overwritten_while_read(), 1u);
  // Untouched reads are not counted.
  ASSERT_EQ((*victim)->Next(&v), ReadStatus::kOk);
  (*victim)->Release();
  EXPECT_EQ((*victim)->overwritten_while_read(), 1u);
  EXPECT_FALSE(channel_->corrupt());
}

TEST_F(HostileReader, AClearedPinIsCountedEvenWhenTheReusedSlotEndsUpFree) {
  // A freed slot under a pin still set is not an overwrite (the publisher
  // found it pinned); under a pin that was cleared it may be one. Here the
  // victim's slot is reused, pinned by another reader, evicted and freed:
  // the victim still counts it, the other reader does not.
  auto victim = Reader::Create(channel_.get(), {.pin = true});
  auto other = Reader::Create(channel_.get(), {.pin = true});
  ASSERT_TRUE(victim.ok() && other.ok());
  ASSERT_EQ(Send(0), SendStatus::kOk);
  MessageView v;
  ASSERT_EQ((*victim)->Next(&v), ReadStatus::kOk);
  const uint32_t s = v.slot;
  in::ChannelAccess::pin_word(*channel_, s)->store(0);  // the hostile clear
  auto state = [&] {
    return in::ChannelAccess::slot_header(*channel_, s)->state.load();
  };
  uint64_t seq = 1;
  for (; !(in::IsMessage(state()) && state() > 0); ++seq) {
    ASSERT_LT(seq, 100u) << "the victim's slot was never reused";
    ASSERT_EQ(Send(seq), SendStatus::kOk);
  }
  MessageView w;
  ASSERT_EQ((*other)->Latest(&w), ReadStatus::kOk);
  ASSERT_EQ(w.slot, s);
  for (int i = 0; i < 2 * static_cast<int>(kParams.queue_depth); ++i) {
    ASSERT_EQ(Send(seq++), SendStatus::kOk);
  }
  EXPECT_EQ(state(), in::kFree);  // evicted while `other` pins it
  (*victim)->Release();
  EXPECT_EQ((*victim)->overwritten_while_read(), 1u);
  (*other)->Release();
  EXPECT_EQ((*other)->overwritten_while_read(), 0u);
  EXPECT_FALSE(channel_->corrupt());
}

TEST_F(HostileReader, GarbageInTheWholeReaderStateNeverCorruptsTheData) {
  std::mt19937_64 rng(5);
  auto* state =
      reinterpret_cast<uint8_t*>(in::ChannelAccess::state_header(*channel_));
  const uint64_t size = in::StateLayout::For(kParams).total;
  auto reader = Reader::Create(channel_.get(), {.pin = true});
  ASSERT_TRUE(reader.ok());
  uint64_t sent = 0;
  for (int round = 0; round < 200; ++round) {
    for (int i = 0; i < 16; ++i) state[rng() % size] = static_cast<uint8_t>(rng());
    for (int i = 0; i < 3; ++i) {
      const SendStatus st = Send(sent);
      ASSERT_NE(st, SendStatus::kCorrupt) << "reader state stopped a publisher";
      sent += st == SendStatus::kOk;
    }
    MessageView v;
    while ((*reader)->Next(&v) == ReadStatus::kOk) {
      testing::PatternHeader h;
      // What the reader sees is a message the publisher sent, or (pins
      // cleared under it) counted when it lets go.
      if (!testing::CheckPattern(v.data, &h)) {
        (*reader)->Release();
        EXPECT_GT((*reader)->overwritten_while_read(), 0u);
      }
    }
    (void)channel_->Sweep();
  }
  EXPECT_GT(sent, 0u);
  EXPECT_FALSE(channel_->corrupt());
  // The data file is whole: the ring and slots audit clean (pins aside).
  std::memset(state + in::StateLayout::For(kParams).pins, 0,
              size - in::StateLayout::For(kParams).pins);
  reader->reset();
  testing::AuditResult audit = testing::Audit(channel_.get(), false);
  EXPECT_TRUE(audit.ok()) << audit.ToString();
}

// Writes `n` random bytes at `offset` of `path` through the file, as
// `dd if=/dev/urandom of=<path> bs=n count=1 seek=.. conv=notrunc` does.
void WriteRandomBytes(const std::string& path, uint64_t offset, size_t n,
                      uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string bytes(n, '\0');
  for (char& b : bytes) b = static_cast<char>(rng());
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0) << path;
  ASSERT_EQ(::pwrite(fd, bytes.data(), n, static_cast<off_t>(offset)),
            static_cast<ssize_t>(n));
  ::close(fd);
}

// What the reader-state check says of `c`: DataLoss about the header,
// naming the file, and never sticky.
void ExpectHeaderReported(const Channel& c) {
  const absl::Status check = c.CheckConsistency();
  EXPECT_TRUE(absl::IsDataLoss(check)) << check;
  EXPECT_THAT(std::string(check.message()),
              HasSubstr("header was overwritten"));
  EXPECT_THAT(std::string(check.message()), HasSubstr(c.reader_state_path()));
  EXPECT_FALSE(c.corrupt()) << c.corruption();
}

TEST_F(HostileReader, AGarbledHeaderStopsNobodyWhoOpensTheChannelLater) {
  const std::string state_path = channel_->reader_state_path();
  // The tester's 8 bytes over the magic, then the whole header (identity
  // line and the sleeper line).
  WriteRandomBytes(state_path, 0, 8, 1);
  ASSERT_NE(in::ChannelAccess::state_header(*channel_)->magic, in::kStateMagic);
  {
    auto reopened = Channel::Open(root_.options(), "c");
    ASSERT_TRUE(reopened.ok()) << reopened.status();
    ExpectHeaderReported(**reopened);
  }
  WriteRandomBytes(state_path, 0, sizeof(in::ReaderStateHeader), 2);
  // The handle that was open goes on, and is told.
  EXPECT_EQ(Send(0), SendStatus::kOk);
  ExpectHeaderReported(*channel_);

  // Processes that (re)open it: a node's OpenOrCreate, a tool's Open.
  auto created = Channel::OpenOrCreate(root_.options(), "c", kParams);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_FALSE((*created)->corrupt()) << (*created)->corruption();
  EXPECT_EQ((*created)->reader_state_path(), state_path);
  ExpectHeaderReported(**created);
  auto opened = Channel::Open(root_.options(), "c");
  ASSERT_TRUE(opened.ok()) << opened.status();
  ExpectHeaderReported(**opened);
  // A publisher on the reopened handle (the node restarted) and a pinned
  // reader send and receive.
  publisher_.reset();
  auto pub = Publisher::Create(opened->get());
  ASSERT_TRUE(pub.ok()) << pub.status();
  auto reader = Reader::Create(created->get(), {.pin = true});
  ASSERT_TRUE(reader.ok()) << reader.status();
  for (uint64_t seq = 1; seq <= 3; ++seq) {
    const size_t n = testing::WritePattern((*pub)->Loan(), 1, seq, 64);
    ASSERT_EQ((*pub)->Send(n).status, SendStatus::kOk);
  }
  MessageView v;
  for (uint64_t seq = 1; seq <= 3; ++seq) {
    ASSERT_EQ((*reader)->Next(&v), ReadStatus::kOk);
    testing::PatternHeader h;
    ASSERT_TRUE(testing::CheckPattern(v.data, &h));
    EXPECT_EQ(h.sequence, seq);
  }
  EXPECT_EQ((*reader)->Next(&v), ReadStatus::kNothingNew);
  EXPECT_EQ((*reader)->total_missed(), 0u);
  // A sleeper registers and brackets a wait on it as usual.
  {
    Sleeper sleeper = (*opened)->RegisterSleeper();
    EXPECT_FALSE(sleeper.guest());
    sleeper.BeginSleep();
    sleeper.EndSleep();
  }
  EXPECT_FALSE((*opened)->corrupt());
  EXPECT_FALSE((*created)->corrupt());
}

TEST_F(HostileReader, AGarbledHeaderStopsNoPublisherOrReaderInAnotherProcess) {
  WriteRandomBytes(channel_->reader_state_path(), 0,
                   sizeof(in::ReaderStateHeader), 3);
  publisher_.reset();  // the only publisher entry: the child's now
  // The child, a restarted node: opens, reads what is there (pinned), then
  // publishes. Exit codes say which step failed.
  for (uint64_t seq = 0; seq < 2; ++seq) {
    auto p = Publisher::Create(channel_.get());
    ASSERT_TRUE(p.ok());
    const size_t n = testing::WritePattern((*p)->Loan(), 1, seq, 64);
    ASSERT_EQ((*p)->Send(n).status, SendStatus::kOk);
  }
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto c = Channel::OpenOrCreate(root_.options(), "c", kParams);
    if (!c.ok()) ::_exit(10);
    if ((*c)->corrupt()) ::_exit(11);
    auto r = Reader::Create(c->get(), {.pin = true,
                                       .start = ReaderOptions::Start::kOldest});
    if (!r.ok()) ::_exit(12);
    MessageView v;
    for (uint64_t seq = 0; seq < 2; ++seq) {
      testing::PatternHeader h;
      if ((*r)->Next(&v) != ReadStatus::kOk) ::_exit(13);
      if (!testing::CheckPattern(v.data, &h) || h.sequence != seq) ::_exit(14);
    }
    auto p = Publisher::Create(c->get());
    if (!p.ok()) ::_exit(15);
    const size_t n = testing::WritePattern((*p)->Loan(), 2, 7, 64);
    if ((*p)->Send(n).status != SendStatus::kOk) ::_exit(16);
    const absl::Status check = (*c)->CheckConsistency();
    if (!absl::IsDataLoss(check) ||
        std::string(check.message()).find("header was overwritten") ==
            std::string::npos) {
      ::_exit(17);
    }
    ::_exit((*c)->corrupt() ? 18 : 0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  ASSERT_EQ(WEXITSTATUS(status), 0) << "the child failed at step "
                                    << WEXITSTATUS(status);
  // What the child published arrives here.
  auto reader = Reader::Create(channel_.get(),
                               {.pin = true,
                                .start = ReaderOptions::Start::kOldest});
  ASSERT_TRUE(reader.ok());
  MessageView v;
  testing::PatternHeader h;
  for (int i = 0; i < 3; ++i) ASSERT_EQ((*reader)->Next(&v), ReadStatus::kOk);
  ASSERT_TRUE(testing::CheckPattern(v.data, &h));
  EXPECT_EQ(h.publisher, 2u);
  EXPECT_EQ(h.sequence, 7u);
  ExpectHeaderReported(*channel_);
}

// A reader-state file of the wrong size (a process with write access
// truncated or grew it) stops nobody: a process that opens the channel
// then works on a private reader state (its publishers wake on every send,
// its readers read as guests), tools say what happened and what to run,
// and once nobody uses the channel the next creator makes it anew.
TEST_F(HostileReader, AReaderStateFileOfTheWrongSizeOpensWithAPrivateState) {
  const std::string state_path = channel_->reader_state_path();
  const uint64_t size = in::StateLayout::For(kParams).total;
  publisher_.reset();
  for (const uint64_t wrong : {uint64_t{0}, uint64_t{8}, size - 64,
                               size + 4096}) {
    SCOPED_TRACE(wrong);
    ASSERT_EQ(::truncate(state_path.c_str(), static_cast<off_t>(wrong)), 0);
    auto opened = Channel::Open(root_.options(), "c");
    ASSERT_TRUE(opened.ok()) << opened.status();
    Channel& c = **opened;
    EXPECT_TRUE(c.reader_state_lost());
    EXPECT_FALSE(c.corrupt()) << c.corruption();
    EXPECT_FALSE(c.reader_state_writable());
    EXPECT_TRUE(c.RegisterSleeper().guest());
    EXPECT_EQ(c.Stats().sleepers, 0u);
    const absl::Status check = c.CheckConsistency();
    EXPECT_TRUE(absl::IsDataLoss(check)) << check;
    EXPECT_THAT(std::string(check.message()), HasSubstr(state_path));
    EXPECT_THAT(std::string(check.message()),
                HasSubstr("the file is " + std::to_string(wrong) + " bytes"));
    EXPECT_THAT(std::string(check.message()), HasSubstr(c.CleanCommand(
                                                  root_.options())));
    EXPECT_THAT(c.GuestReason(), HasSubstr("this process reads as a guest"));
    // It publishes, and its own readers read (as guests: copies).
    auto pub = Publisher::Create(&c);
    ASSERT_TRUE(pub.ok()) << pub.status();
    auto guest = Reader::Create(&c, {.pin = false});
    ASSERT_TRUE(guest.ok()) << guest.status();
    EXPECT_FALSE(Reader::Create(&c, {.pin = true}).ok());
    for (uint64_t i = 0; i < 10; ++i) {
      std::span<std::byte> loan = (*pub)->Loan();
      ASSERT_FALSE(loan.empty());
      ASSERT_EQ(
          (*pub)->Send(testing::WritePattern(loan, 1, i, 64)).status,
          SendStatus::kOk);
    }
    MessageView v;
    EXPECT_EQ((*guest)->Next(&v), ReadStatus::kOk);
    // In use (this test's own handles): OpenOrCreate opens it as it is.
    auto again = Channel::OpenOrCreate(root_.options(), "c", kParams);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_TRUE((*again)->reader_state_lost());
    EXPECT_EQ((*again)->nonce(), channel_->nonce());
  }
  // Nobody uses it any more: the next creator makes it anew.
  channel_.reset();
  auto fresh = Channel::OpenOrCreate(root_.options(), "c", kParams);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_FALSE((*fresh)->reader_state_lost());
  EXPECT_TRUE((*fresh)->created());
  EXPECT_TRUE((*fresh)->CheckConsistency().ok());
  EXPECT_NE((*fresh)->reader_state_path(), state_path);
}

// The attacker's truncate under a live stack: a publisher here, a pinned
// reader asleep in another process. The publisher keeps sending (never
// kCorrupt), every process that touches the state afterwards goes on with
// a private one, and the sleeper is woken for every message: nothing is
// lost and no wake is missed (the sleeper's waits are bounded; one that
// times out with a message pending is a missed wake). The publisher never
// runs more than three messages ahead of what the reader took (a shared
// count; the queue is four deep and lossy for a slow reader): a reader
// descheduled for a few milliseconds on a loaded machine is then not
// lapped, and a missed message means a fault, not the scheduler.
TEST_F(HostileReader, TruncatingTheReaderStateUnderALiveStackStopsNobody) {
  constexpr int kBefore = 20, kAfter = 300;
  const shm::ChannelOptions opts = root_.options();
  void* shared = ::mmap(nullptr, sizeof(std::atomic<uint64_t>),
                        PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                        -1, 0);
  ASSERT_NE(shared, MAP_FAILED);
  auto* taken = new (shared) std::atomic<uint64_t>(0);
  ::tether::testing::ChildProcess child(
      [&](const ::tether::testing::ChildProcess::Voice& voice) {
        auto mine = Channel::Open(opts, "c");
        if (!mine.ok()) return 10;
        auto r = Reader::Create(mine->get(), {.pin = true});
        if (!r.ok()) return 11;
        Sleeper sleeper = (*mine)->RegisterSleeper();
        if (sleeper.guest()) return 12;
        if (!voice.Say()) return 13;
        uint64_t got = 0, missed = 0;
        MessageView v;
        while (got + missed < kBefore + kAfter) {
          const ReadStatus st = (*r)->Next(&v);
          if (st == ReadStatus::kOk) {
            ++got;
            missed += v.missed;
            taken->store(got + missed);
            continue;
          }
          if (st != ReadStatus::kNothingNew) return 14;  // corrupt
          sleeper.BeginSleep();
          const uint32_t word = (*mine)->LoadWakeWord();
          if (!(*r)->HasNext()) {
            const struct timespec two_s = {2, 0};
            const int woke = FutexWait((*mine)->wake_word(), word, &two_s);
            if (woke == -ETIMEDOUT && (*r)->HasNext()) return 15;  // missed
            if (woke == -ETIMEDOUT) return 16;  // the parent stopped
          }
          sleeper.EndSleep();
        }
        if (missed != 0) return 17;
        return (*mine)->reader_state_lost() && !(*mine)->corrupt() ? 0 : 18;
      });
  ASSERT_EQ(child.Heard(), 'r') << "the child failed at step "
                                << child.ExitCode();
  // At most three ahead; a reader that never catches up fails by its own
  // step instead.
  const auto when_caught_up = [&](int i) {
    const auto give_up =
        std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (taken->load() + 3 < static_cast<uint64_t>(i) &&
           std::chrono::steady_clock::now() < give_up) {
      std::this_thread::yield();
    }
  };
  for (int i = 0; i < kBefore; ++i) {
    when_caught_up(i);
    ASSERT_EQ(Send(i), SendStatus::kOk);
    ::usleep(1000);
  }
  ASSERT_EQ(::truncate(channel_->reader_state_path().c_str(), 0), 0);
  for (int i = kBefore; i < kBefore + kAfter; ++i) {
    when_caught_up(i);
    ASSERT_EQ(Send(i), SendStatus::kOk) << i;
    if (i % 3 == 0) ::usleep(1000);  // let the reader fall asleep
  }
  EXPECT_EQ(child.ExitCode(), 0) << "the reader failed at step "
                                 << child.ExitCode();
  EXPECT_TRUE(channel_->reader_state_lost());
  EXPECT_FALSE(channel_->corrupt()) << channel_->corruption();
  EXPECT_THAT(std::string(channel_->CheckConsistency().message()),
              HasSubstr("shrank under this process"));
  ::munmap(shared, sizeof(std::atomic<uint64_t>));
}

}  // namespace
}  // namespace tether::shm
