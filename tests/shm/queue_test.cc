// Channel queue operations in one process: send, read, pin, peek, loss
// accounting, limits and wakeups.
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstring>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shm/channel.h"
#include "shm/futex.h"
#include "shm/publisher.h"
#include "shm/reader.h"
#include "tests/shm/shm_test_util.h"

namespace tether::shm {
namespace {

using ::testing::HasSubstr;
using testing::CheckPattern;
using testing::PatternHeader;
using testing::ScopedRoot;
using testing::WritePattern;

class QueueTest : public ::testing::Test {
 protected:
  void Open(QueueParams p) {
    auto c = Channel::OpenOrCreate(root_.options(), "q", p);
    ASSERT_TRUE(c.ok()) << c.status();
    channel_ = std::move(*c);
  }
  std::unique_ptr<Publisher> NewPublisher() {
    auto p = Publisher::Create(channel_.get());
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? std::move(*p) : nullptr;
  }
  std::unique_ptr<Reader> NewReader(ReaderOptions o = {}) {
    auto r = Reader::Create(channel_.get(), o);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? std::move(*r) : nullptr;
  }
  static void SendPattern(Publisher* p, uint32_t id, uint64_t seq,
                          size_t size = 64, const SendTimes* times = nullptr) {
    auto loan = p->Loan();
    ASSERT_FALSE(loan.empty());
    size_t n = WritePattern(loan, id, seq, size);
    ASSERT_EQ(p->Send(n, times).status, SendStatus::kOk);
  }

  ScopedRoot root_;
  std::unique_ptr<Channel> channel_;
};

TEST_F(QueueTest, ReaderGetsEachMessageInOrderWithItsContext) {
  Open({.slot_size = 256, .queue_depth = 8, .max_publishers = 1,
        .max_pinned = 1});
  auto pub = NewPublisher();
  auto reader = NewReader();
  MessageView v;
  EXPECT_FALSE(reader->HasNext());
  EXPECT_EQ(reader->Next(&v), ReadStatus::kNothingNew);
  timespec before;
  ::clock_gettime(CLOCK_MONOTONIC, &before);
  for (uint64_t i = 0; i < 5; ++i) SendPattern(pub.get(), 7, i, 100 + i);
  for (uint64_t i = 0; i < 5; ++i) {
    EXPECT_TRUE(reader->HasNext());
    ASSERT_EQ(reader->Next(&v), ReadStatus::kOk);
    PatternHeader h;
    ASSERT_TRUE(CheckPattern(v.data, &h));
    EXPECT_EQ(h.sequence, i);
    EXPECT_EQ(v.data.size(), 100 + i);
    EXPECT_EQ(v.queue_index, i);
    EXPECT_EQ(v.publisher_sequence, i);
    EXPECT_EQ(v.publisher_pid, static_cast<uint32_t>(::getpid()));
    EXPECT_EQ(v.missed, 0u);
    EXPECT_GE(v.monotonic_send_ns,
              uint64_t(before.tv_sec) * 1000000000u + before.tv_nsec);
    EXPECT_GT(v.realtime_send_ns, 1'600'000'000'000'000'000u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data.data()) % 64, 0u);
  }
  EXPECT_FALSE(reader->HasNext());
  EXPECT_EQ(reader->Next(&v), ReadStatus::kNothingNew);
}

// A message's origin (SendTimes::origin) reaches every reader as sent, the
// times beside it are still stamped at commit, and a slot reused by a send
// without one reads 0: no earlier message's origin shows through.
TEST_F(QueueTest, OriginIsCarriedAndNeverOutlivesItsMessage) {
  Open({.slot_size = 64, .queue_depth = 2, .max_publishers = 1,
        .max_pinned = 1});
  auto pub = NewPublisher();
  auto reader = NewReader();
  MessageView v;
  SendTimes tagged;
  tagged.origin = 0x1234'5678'9abc'def0ull;
  for (uint64_t i = 0; i < 8; ++i) {
    SendPattern(pub.get(), 3, i, 32, &tagged);
    ASSERT_EQ(reader->Next(&v), ReadStatus::kOk);
    EXPECT_EQ(v.origin, tagged.origin);
    EXPECT_GT(v.monotonic_send_ns, 0u);
    EXPECT_GT(v.realtime_send_ns, 1'600'000'000'000'000'000u);
  }
  // The slots that held tagged messages are reused by untagged ones.
  for (uint64_t i = 8; i < 16; ++i) {
    SendPattern(pub.get(), 3, i, 32);
    ASSERT_EQ(reader->Next(&v), ReadStatus::kOk);
    EXPECT_EQ(v.origin, 0u) << "message " << i;
  }
}

TEST_F(QueueTest, EveryReaderReadsEveryMessage) {
  Open({.slot_size = 64, .queue_depth = 16, .max_publishers = 1,
        .max_pinned = 4});
  auto pub = NewPublisher();
  std::vector<std::unique_ptr<Reader>> readers;
  for (int i = 0; i < 4; ++i) readers.push_back(NewReader());
  readers.push_back(NewReader({.pin = false}));  // unpinned reader too
  for (uint64_t i = 0; i < 10; ++i) SendPattern(pub.get(), 1, i);
  for (auto& r : readers) {
    MessageView v;
    for (uint64_t i = 0; i < 10; ++i) {
      ASSERT_EQ(r->Next(&v), ReadStatus::kOk);
      EXPECT_EQ(v.queue_index, i);
    }
    EXPECT_EQ(r->Next(&v), ReadStatus::kNothingNew);
  }
}

TEST_F(QueueTest, ReaderLearnsHowManyMessagesItMissed) {
  Open({.slot_size = 64, .queue_depth = 8, .max_publishers = 1,
        .max_pinned = 1});
  auto pub = NewPublisher();
  auto reader = NewReader();
  for (uint64_t i = 0; i < 3; ++i) SendPattern(pub.get(), 1, i);
  MessageView v;
  ASSERT_EQ(reader->Next(&v), ReadStatus::kOk);
  EXPECT_EQ(v.queue_index, 0u);
  reader->Release();
  // 30 more: the ring keeps the newest 8 (25..32); 1..24 are lost.
  for (uint64_t i = 3; i < 33; ++i) SendPattern(pub.get(), 1, i);
  EXPECT_TRUE(reader->HasNext());  // a loss is something to read too
  ASSERT_EQ(reader->Next(&v), ReadStatus::kOk);
  EXPECT_EQ(v.queue_index, 25u);
  EXPECT_EQ(v.missed, 24u);
  for (uint64_t i = 26; i < 33; ++i) {
    ASSERT_EQ(reader->Next(&v), ReadStatus::kOk);
    EXPECT_EQ(v.queue_index, i);
    EXPECT_EQ(v.missed, 0u);
  }
  EXPECT_EQ(reader->Next(&v), ReadStatus::kNothingNew);
  EXPECT_EQ(reader->total_missed(), 24u);
}

TEST_F(QueueTest, ReaderStartingAtOldestGetsTheWholeRing) {
  Open({.slot_size = 64, .queue_depth = 4, .max_publishers = 1,
        .max_pinned = 1});
  auto pub = NewPublisher();
  for (uint64_t i = 0; i < 10; ++i) SendPattern(pub.get(), 1, i);
  auto reader = NewReader({.pin = true, .start = ReaderOptions::Start::kOldest});
  MessageView v;
  for (uint64_t i = 6; i < 10; ++i) {
    ASSERT_EQ(reader->Next(&v), ReadStatus::kOk);
    EXPECT_EQ(v.queue_index, i);
    EXPECT_EQ(v.missed, 0u);
  }
}

TEST_F(QueueTest, LatestSkipsToTheNewestWithoutCountingLoss) {
  Open({.slot_size = 64, .queue_depth = 8, .max_publishers = 1,
        .max_pinned = 1});
  auto pub = NewPublisher();
  auto reader = NewReader();
  MessageView v;
  EXPECT_EQ(reader->Latest(&v), ReadStatus::kNothingNew);
  for (uint64_t i = 0; i < 20; ++i) SendPattern(pub.get(), 1, i);
  ASSERT_EQ(reader->Latest(&v), ReadStatus::kOk);
  EXPECT_EQ(v.queue_index, 19u);
  EXPECT_EQ(v.missed, 0u);
  EXPECT_EQ(reader->Latest(&v), ReadStatus::kNothingNew);
  EXPECT_EQ(reader->Next(&v), ReadStatus::kNothingNew);
  SendPattern(pub.get(), 1, 20);
  ASSERT_EQ(reader->Next(&v), ReadStatus::kOk);
  EXPECT_EQ(v.queue_index, 20u);
}

TEST_F(QueueTest, PinnedMessageIsNeverOverwritten) {
  Open({.slot_size = 128, .queue_depth = 4, .max_publishers = 1,
        .max_pinned = 1});
  auto pub = NewPublisher();
  auto reader = NewReader();
  SendPattern(pub.get(), 1, 0, 128);
  MessageView v;
  ASSERT_EQ(reader->Next(&v), ReadStatus::kOk);
  // Cycle the ring many times while the reader holds message 0.
  for (uint64_t i = 1; i < 100; ++i) SendPattern(pub.get(), 1, i, 128);
  PatternHeader h;
  ASSERT_TRUE(CheckPattern(v.data, &h));
  EXPECT_EQ(h.sequence, 0u);
  reader->Release();
  // Evicted from the ring while pinned (the slot was marked free, to be
  // claimed once unpinned), but never overwritten: not counted as
  // overwritten while read (which the loop reports as a hostile pin clear).
  EXPECT_EQ(reader->overwritten_while_read(), 0u);
  ASSERT_EQ(reader->Next(&v), ReadStatus::kOk);
  EXPECT_EQ(v.queue_index, 96u);
  EXPECT_EQ(v.missed, 95u);
  reader->Release();
  EXPECT_EQ(reader->overwritten_while_read(), 0u);
}

TEST_F(QueueTest, UnpinnedViewDetectsOverwrite) {
  Open({.slot_size = 128, .queue_depth = 2, .max_publishers = 1,
        .max_pinned = 0});
  auto pub = NewPublisher();
  auto reader = NewReader({.pin = false});
  SendPattern(pub.get(), 1, 0);
  MessageView v;
  ASSERT_EQ(reader->Next(&v), ReadStatus::kOk);
  EXPECT_TRUE(reader->StillValid(v));
  for (uint64_t i = 1; i < 6; ++i) SendPattern(pub.get(), 1, i);
  EXPECT_FALSE(reader->StillValid(v));
}

TEST_F(QueueTest, MessageLargerThanASlotIsRefusedAndTheLoanKept) {
  Open({.slot_size = 100, .queue_depth = 4, .max_publishers = 1,
        .max_pinned = 1});
  auto pub = NewPublisher();
  auto loan = pub->Loan();
  EXPECT_EQ(loan.size(), 100u);
  EXPECT_EQ(pub->Send(101).status, SendStatus::kTooLarge);
  EXPECT_EQ(pub->Loan().data(), loan.data());
  EXPECT_EQ(pub->Send(100).status, SendStatus::kOk);
  EXPECT_STREQ(ToString(SendStatus::kTooLarge),
               "message larger than the channel's slot size");
}

TEST_F(QueueTest, TooManyPublishersNamesTheLimit) {
  Open({.slot_size = 64, .queue_depth = 4, .max_publishers = 2,
        .max_pinned = 1});
  auto a = NewPublisher();
  auto b = NewPublisher();
  auto c = Publisher::Create(channel_.get());
  ASSERT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(c.status().message(), HasSubstr("max_publishers=2"));
  b.reset();  // a freed entry can be taken again
  EXPECT_TRUE(Publisher::Create(channel_.get()).ok());
}

TEST_F(QueueTest, TooManyPinningReadersNamesTheLimit) {
  Open({.slot_size = 64, .queue_depth = 4, .max_publishers = 1,
        .max_pinned = 2});
  auto a = NewReader();
  auto b = NewReader();
  auto c = Reader::Create(channel_.get());
  ASSERT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(c.status().message(), HasSubstr("maxPinned=2"));
  // Unpinned readers are not limited.
  EXPECT_TRUE(Reader::Create(channel_.get(), {.pin = false}).ok());
}

TEST_F(QueueTest, PublishersInterleaveWithoutLosingOrDuplicating) {
  Open({.slot_size = 64, .queue_depth = 64, .max_publishers = 3,
        .max_pinned = 1});
  std::vector<std::unique_ptr<Publisher>> pubs;
  for (int i = 0; i < 3; ++i) pubs.push_back(NewPublisher());
  auto reader = NewReader();
  for (uint64_t i = 0; i < 20; ++i) {
    for (uint32_t p = 0; p < 3; ++p) SendPattern(pubs[p].get(), p, i);
  }
  std::vector<uint64_t> next(3, 0);
  MessageView v;
  for (int n = 0; n < 60; ++n) {
    ASSERT_EQ(reader->Next(&v), ReadStatus::kOk);
    PatternHeader h;
    ASSERT_TRUE(CheckPattern(v.data, &h));
    ASSERT_LT(h.publisher, 3u);
    EXPECT_EQ(h.sequence, next[h.publisher]++);
    EXPECT_EQ(v.publisher_index, pubs[h.publisher]->index());
  }
  EXPECT_EQ(reader->Next(&v), ReadStatus::kNothingNew);
}

TEST_F(QueueTest, EveryPinningReaderCanHoldASlotWhilePublishersKeepSending) {
  // pool = depth + publishers + pinned: with every reader pinning an old
  // message, publishers still always find a loan.
  Open({.slot_size = 64, .queue_depth = 2, .max_publishers = 2,
        .max_pinned = 3});
  auto p0 = NewPublisher();
  auto p1 = NewPublisher();
  std::vector<std::unique_ptr<Reader>> readers;
  for (int i = 0; i < 3; ++i) readers.push_back(NewReader());
  for (uint64_t i = 0; i < 2; ++i) SendPattern(p0.get(), 0, i);
  MessageView views[3];
  ASSERT_EQ(readers[0]->Next(&views[0]), ReadStatus::kOk);
  ASSERT_EQ(readers[1]->Next(&views[1]), ReadStatus::kOk);
  ASSERT_EQ(readers[1]->Next(&views[1]), ReadStatus::kOk);
  for (uint64_t i = 2; i < 4; ++i) SendPattern(p1.get(), 1, i);
  ASSERT_EQ(readers[2]->Latest(&views[2]), ReadStatus::kOk);
  for (uint64_t i = 4; i < 200; ++i) {
    SendPattern(i % 2 ? p0.get() : p1.get(), i % 2 ? 0 : 1, i);
  }
  PatternHeader h;
  ASSERT_TRUE(CheckPattern(views[0].data, &h));
  EXPECT_EQ(h.sequence, 0u);
  ASSERT_TRUE(CheckPattern(views[1].data, &h));
  EXPECT_EQ(h.sequence, 1u);
  ASSERT_TRUE(CheckPattern(views[2].data, &h));
  EXPECT_EQ(h.sequence, 3u);
  for (auto& r : readers) {
    r->Release();
    EXPECT_EQ(r->overwritten_while_read(), 0u);
  }
}

TEST_F(QueueTest, SendBumpsTheWakeWordAndWakesASleeper) {
  Open({.slot_size = 64, .queue_depth = 8, .max_publishers = 1,
        .max_pinned = 1});
  auto pub = NewPublisher();
  auto reader = NewReader();
  std::atomic<bool> got{false};
  std::thread sleeper([&] {
    MessageView v;
    Sleeper me = channel_->RegisterSleeper();
    for (;;) {
      me.BeginSleep();
      uint32_t word = channel_->LoadWakeWord();
      if (reader->Next(&v) == ReadStatus::kOk) {
        me.EndSleep();
        break;
      }
      FutexWait(channel_->wake_word(), word, nullptr);
      me.EndSleep();
    }
    got = true;
  });
  // Give the sleeper time to block (not needed for correctness).
  while (channel_->Stats().sleepers == 0) std::this_thread::yield();
  uint32_t before = channel_->LoadWakeWord();
  SendPattern(pub.get(), 1, 0);
  EXPECT_EQ(channel_->LoadWakeWord(), before + 1);
  sleeper.join();
  EXPECT_TRUE(got);
  EXPECT_EQ(channel_->Stats().sleepers, 0u);
}

TEST_F(QueueTest, NoWakeupIsLostAcrossThousandsOfSleeps) {
  Open({.slot_size = 64, .queue_depth = 4, .max_publishers = 1,
        .max_pinned = 1});
  auto pub = NewPublisher();
  auto reader = NewReader();
  constexpr uint64_t kMessages = 5000;
  std::thread sleeper([&] {
    MessageView v;
    uint64_t seen = 0;
    Sleeper me = channel_->RegisterSleeper();
    while (seen < kMessages) {
      me.BeginSleep();
      uint32_t word = channel_->LoadWakeWord();
      ReadStatus s = reader->Next(&v);
      if (s == ReadStatus::kOk) {
        me.EndSleep();
        seen = v.queue_index + 1;
        continue;
      }
      // A lost wakeup would hang here; the test's timeout would catch it.
      FutexWait(channel_->wake_word(), word, nullptr);
      me.EndSleep();
    }
  });
  for (uint64_t i = 0; i < kMessages; ++i) {
    SendPattern(pub.get(), 1, i);
    if (i % 64 == 0) std::this_thread::yield();
  }
  sleeper.join();
}

TEST_F(QueueTest, DeadPublisherAndReaderAreReclaimedBySweep) {
  Open({.slot_size = 64, .queue_depth = 4, .max_publishers = 1,
        .max_pinned = 1});
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto pub = Publisher::Create(channel_.get());
    auto reader = Reader::Create(channel_.get(),
                                 {.start = ReaderOptions::Start::kOldest});
    if (!pub.ok() || !reader.ok()) ::_exit(1);
    SendPattern(pub->get(), 1, 0);
    MessageView v;
    if ((*reader)->Next(&v) != ReadStatus::kOk) ::_exit(2);
    ::raise(SIGKILL);  // die holding the registry entries, a loan and a pin
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(channel_->Stats().publishers, 1);
  EXPECT_EQ(channel_->Stats().pinning_readers, 1);
  SweepReport report = channel_->Sweep();
  EXPECT_EQ(report.dead_publishers, 1);
  EXPECT_EQ(report.dead_readers, 1);
  EXPECT_EQ(report.slots_freed, 1);  // the dead publisher's loan
  EXPECT_EQ(channel_->Stats().publishers, 0);
  // The entries are usable again, and every slot is back in circulation.
  auto pub = NewPublisher();
  auto reader = NewReader({.start = ReaderOptions::Start::kOldest});
  for (uint64_t i = 1; i < 50; ++i) SendPattern(pub.get(), 1, i);
  MessageView v;
  ASSERT_EQ(reader->Next(&v), ReadStatus::kOk);
  EXPECT_EQ(v.queue_index, 46u);
}

TEST_F(QueueTest, ALiveProcessIsNeverSwept) {
  Open({.slot_size = 64, .queue_depth = 4, .max_publishers = 1,
        .max_pinned = 1});
  auto pub = NewPublisher();
  auto reader = NewReader();
  SendPattern(pub.get(), 1, 0);
  SweepReport report = channel_->Sweep();
  EXPECT_EQ(report.dead_publishers, 0);
  EXPECT_EQ(report.dead_readers, 0);
  EXPECT_EQ(report.slots_freed, 0);
  EXPECT_EQ(channel_->Stats().publishers, 1);
}

}  // namespace
}  // namespace tether::shm
