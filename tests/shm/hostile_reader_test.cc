// What a hostile reader can do with write access to a channel's reader-state
// file (and nothing more: it cannot write the data file), and that each of
// those is reported, never silent: pinning every slot makes sends fail with
// kNoLoan (counted); setting sleeper bits costs wake syscalls; clearing
// another reader's pin lets its slot be reused under it, which that reader
// detects when it lets go (overwritten_while_read). Garbage in the whole
// reader-state file never corrupts the data or stops the publisher, and
// CheckConsistency reports it without marking the channel corrupt.
#include <cstring>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shm/channel.h"
#include "shm/channel_access.h"
#include "shm/layout.h"
#include "shm/publisher.h"
#include "shm/reader.h"
#include "tests/shm/shm_audit.h"
#include "tests/shm/shm_test_util.h"

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

TEST_F(HostileReader, PinningEverySlotMakesSendsFailCountedNeverCorrupt) {
  for (uint64_t s = 0; s < kParams.pool_size(); ++s) {
    in::ChannelAccess::pin_word(*channel_, s)->store(~uint64_t{0});
  }
  int no_loan = 0;
  for (int i = 0; i < 20; ++i) {
    const SendStatus st = Send(i);
    EXPECT_NE(st, SendStatus::kCorrupt);
    no_loan += st == SendStatus::kNoLoan;
  }
  EXPECT_GT(no_loan, 0);
  EXPECT_EQ(publisher_->send_failures(), static_cast<uint64_t>(no_loan));
  EXPECT_EQ(channel_->Stats().send_failures, static_cast<uint64_t>(no_loan));
  EXPECT_FALSE(channel_->corrupt());
  // Reported by the check, which names the file and does not stop anyone.
  const absl::Status check = channel_->CheckConsistency();
  EXPECT_TRUE(absl::IsDataLoss(check));
  EXPECT_THAT(std::string(check.message()),
              HasSubstr(channel_->reader_state_path()));
  EXPECT_FALSE(channel_->corrupt());
  // Pins of readers that cannot exist are swept; unregistered ones below
  // max_pinned stay (clearing them could race a registering reader).
  EXPECT_GT(channel_->Sweep().corrupt_entries, 0);
  for (uint64_t s = 0; s < kParams.pool_size(); ++s) {
    EXPECT_EQ(in::ChannelAccess::pin_word(*channel_, s)->load(), 0b111u);
  }
  // Once the words are cleared, sends work again.
  for (uint64_t s = 0; s < kParams.pool_size(); ++s) {
    in::ChannelAccess::pin_word(*channel_, s)->store(0);
  }
  EXPECT_EQ(Send(100), SendStatus::kOk);
  EXPECT_TRUE(channel_->CheckConsistency().ok());
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

}  // namespace
}  // namespace tether::shm
