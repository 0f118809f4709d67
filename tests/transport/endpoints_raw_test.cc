// Raw endpoints and failed sends: every failed send counted once where
// tools read it (all slots pinned, refusals before the shared-memory send),
// a subscriber reading as a guest when every pin is taken, and Publish of
// framed bytes checking them whole: malformed bytes and corrupt roots
// refused, multi-segment messages rebuilt as one segment or refused.
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "capnp/message.h"
#include "capnp/serialize.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/transport/endpoints_test_util.h"
#include "tests/transport/framing_test.capnp.h"
#include "transport/channel_handle.h"
#include "transport/raw_endpoints.h"
#include "transport/typed_endpoints.h"

namespace tether::transport {
namespace {

using ::testing::HasSubstr;
using testing::EndpointsTest;
using testing::kSample;
using testing::kScalars;

// An attacker with write access to the reader-state file sets every pin
// word (docs/security.md): no slot can be loaned, so each typed send fails
// -- and each is counted once in the publisher's shared send_failures, read
// by another handle on the channel as `tether list` and the demo's monitor
// read it. Sending the invalid loan anyway (what the demo nodes do not do,
// but may) counts nothing more.
TEST_F(EndpointsTest, TypedSendsWithEverySlotPinnedAreEachCountedOnce) {
  auto ch = MakeChannel("/pinned", kScalars, 128, 4);
  auto pub = Publisher<Scalars>::Create(ch.get());
  ASSERT_TRUE(pub.ok()) << pub.status();
  auto tool = ChannelHandle::Open(root_.options(), "/pinned");
  ASSERT_TRUE(tool.ok()) << tool.status();
  HoldEverySlot("/pinned", true);
  // The loan the publisher already holds still goes out.
  Loan<Scalars> held = (*pub)->MakeLoan();
  ASSERT_TRUE(held.valid());
  ASSERT_EQ((*pub)->Send(std::move(held)).status, PublishStatus::kOk);

  constexpr uint64_t kAttempts = 9;
  for (uint64_t i = 0; i < kAttempts; ++i) {
    Loan<Scalars> loan = (*pub)->MakeLoan();
    EXPECT_FALSE(loan.valid()) << i;
    if (i % 2 == 1) {
      EXPECT_EQ((*pub)->Send(std::move(loan)).status, PublishStatus::kNoLoan);
    }
  }
  EXPECT_EQ((*tool)->stats().send_failures, kAttempts);
  EXPECT_EQ((*pub)->raw()->send_failures(), kAttempts);
  EXPECT_EQ((*tool)->stats().next_queue_index, 1u);  // nothing more sent

  // Once the slots are free, sends work again and count no failure.
  HoldEverySlot("/pinned", false);
  Loan<Scalars> loan = (*pub)->MakeLoan();
  ASSERT_TRUE(loan.valid());
  EXPECT_EQ((*pub)->Send(std::move(loan)).status, PublishStatus::kOk);
  auto list = ListChannels(root_.options());
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].stats.send_failures, kAttempts);
  EXPECT_EQ((*list)[0].stats.next_queue_index, 2u);
}

// Every pinning entry taken (too small a maxPinned, or a writer of the
// reader-state file that forged them): a subscriber reads as a guest,
// copies checked after copying, and says why; asked not to fall back, it
// is refused with the same words.
TEST_F(EndpointsTest, ASubscriberWhosePinsAreAllTakenReadsAsAGuest) {
  auto ch = MakeChannel("/full", kScalars, 128, 4);
  std::vector<std::unique_ptr<RawSubscriber>> holders;
  for (uint32_t i = 0; i < ch->params().max_pinned; ++i) {
    auto h = RawSubscriber::Create(ch.get(), {.pin = true});
    ASSERT_TRUE(h.ok()) << h.status();
    EXPECT_FALSE((*h)->guest());
    holders.push_back(std::move(*h));
  }
  auto refused = RawSubscriber::Create(
      ch.get(), {.pin = true, .guest_fallback = false});
  EXPECT_TRUE(absl::IsResourceExhausted(refused.status())) << refused.status();
  auto guest = Subscriber<Scalars>::Create(ch.get());
  ASSERT_TRUE(guest.ok()) << guest.status();
  EXPECT_TRUE((*guest)->raw()->guest());
  EXPECT_TRUE((*guest)->raw()->copying());
  EXPECT_THAT((*guest)->raw()->guest_reason(), HasSubstr("maxPinned="));
  EXPECT_THAT((*guest)->raw()->guest_reason(),
              HasSubstr(ch->reader_state_path()));
  auto pub = Publisher<Scalars>::Create(ch.get());
  ASSERT_TRUE(pub.ok()) << pub.status();
  auto loan = (*pub)->MakeLoan();
  loan.root().setI64(42);
  ASSERT_EQ((*pub)->Send(std::move(loan)).status, PublishStatus::kOk);
  Message<Scalars> m;
  ASSERT_EQ((*guest)->Next(&m), ReceiveStatus::kOk);
  EXPECT_EQ(m.root.getI64(), 42);
}

// RawPublisher::Publish and Send refuse before the shared-memory send
// (larger than maxSize, not a message, no loan): each refusal is counted
// once in send_failures, and those the shm send refuses are not counted
// twice.
TEST_F(EndpointsTest, RawSendAndPublishFailuresAreEachCountedOnce) {
  // maxSize 250: the slot is 256 bytes, so 251..256 fit the slot but not
  // the channel.
  auto ch = MakeChannel("/raw_fail", kSample, 250, 4);
  auto raw = RawPublisher::Create(ch.get());
  auto sub = Subscriber<Sample>::Create(ch.get());
  ASSERT_TRUE(raw.ok() && sub.ok());
  auto tool = ChannelHandle::Open(root_.options(), "/raw_fail");
  ASSERT_TRUE(tool.ok()) << tool.status();
  auto failures = [&] { return (*tool)->stats().send_failures; };

  std::vector<std::byte> too_large(256, std::byte{0});
  EXPECT_EQ((*raw)->Publish(too_large).status, PublishStatus::kTooLarge);
  EXPECT_EQ(failures(), 1u);
  std::vector<std::byte> junk(24, std::byte{0xff});
  EXPECT_EQ((*raw)->Publish(junk).status, PublishStatus::kMalformed);
  EXPECT_EQ(failures(), 2u);
  EXPECT_EQ((*raw)->Send(256).status, PublishStatus::kTooLarge);
  EXPECT_EQ(failures(), 3u);

  // A valid message goes out and counts nothing.
  capnp::MallocMessageBuilder message;
  message.initRoot<Sample>().setStamp(5);
  kj::Array<capnp::word> words = capnp::messageToFlatArray(message);
  std::span<const std::byte> framed(
      reinterpret_cast<const std::byte*>(words.begin()), words.size() * 8);
  ASSERT_EQ((*raw)->Publish(framed).status, PublishStatus::kOk);
  EXPECT_EQ(failures(), 3u);
  Message<Sample> m;
  ASSERT_EQ((*sub)->Next(&m), ReceiveStatus::kOk);
  EXPECT_EQ(m.root.getStamp(), 5u);
  (*sub)->Release();

  // No slot: the held loan goes out, then every Publish fails, counted.
  HoldEverySlot("/raw_fail", true);
  ASSERT_EQ((*raw)->Publish(framed).status, PublishStatus::kOk);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ((*raw)->Publish(framed).status, PublishStatus::kNoLoan);
  }
  EXPECT_EQ(failures(), 7u);
  // Send() without a loan: counted by the shm send, once.
  EXPECT_EQ((*raw)->Send(framed.size()).status, PublishStatus::kNoLoan);
  EXPECT_EQ(failures(), 8u);
  EXPECT_EQ((*raw)->send_failures(), 8u);
  EXPECT_EQ((*tool)->stats().next_queue_index, 2u);
}

TEST_F(EndpointsTest, MalformedBytesAreReportedAndSkipped) {
  auto ch = MakeChannel("/bad", kSample, 256);
  auto raw = RawPublisher::Create(ch.get());
  auto pub = Publisher<Sample>::Create(ch.get());
  auto sub = Subscriber<Sample>::Create(ch.get());
  ASSERT_TRUE(raw.ok() && pub.ok() && sub.ok());
  // A valid one-segment table whose root points far outside the segment.
  std::span<std::byte> loan = (*raw)->Loan();
  uint64_t words[3] = {uint64_t{2} << 32, (uint64_t{0x7ffff} << 2) | 0, 0};
  words[1] |= uint64_t{1} << 32;  // struct with 1 data word
  std::memcpy(loan.data(), words, sizeof(words));
  ASSERT_EQ((*raw)->Send(sizeof(words)).status, PublishStatus::kOk);
  Loan<Sample> good = (*pub)->MakeLoan();
  good.root().setStamp(7);
  ASSERT_EQ((*pub)->Send(std::move(good)).status, PublishStatus::kOk);
  Message<Sample> m;
  EXPECT_EQ((*sub)->Next(&m), ReceiveStatus::kMalformed);
  EXPECT_EQ((*sub)->malformed(), 1u);
  ASSERT_EQ((*sub)->Next(&m), ReceiveStatus::kOk);
  EXPECT_EQ(m.root.getStamp(), 7u);
  EXPECT_EQ((*sub)->malformed(), 1u);
  // Raw Publish checks the framing of what it is given.
  std::vector<std::byte> junk(24, std::byte{0xff});
  EXPECT_EQ((*raw)->Publish(junk).status, PublishStatus::kMalformed);
}

// A log or a bridge may carry framed bytes whose table is fine but whose
// pointers are not (here the root pointer, bytes 8-15, overwritten with
// 0xFFFFFFFFFFFFFFFC: an out-of-bounds struct). Publish checks them as a
// typed reader would and sends nothing; the channel goes on.
TEST_F(EndpointsTest, PublishRefusesAMessageWithACorruptRootPointer) {
  auto ch = MakeChannel("/bad_root", kSample, 256);
  auto raw = RawPublisher::Create(ch.get());
  auto sub = Subscriber<Sample>::Create(ch.get());
  ASSERT_TRUE(raw.ok() && sub.ok());
  capnp::MallocMessageBuilder source;
  source.initRoot<Sample>().setStamp(9);
  kj::Array<capnp::word> words = capnp::messageToFlatArray(source);
  std::vector<capnp::word> bad(words.begin(), words.end());
  const uint64_t corrupt_root = 0xFFFFFFFFFFFFFFFCull;
  std::memcpy(&bad[1], &corrupt_root, sizeof(corrupt_root));
  EXPECT_EQ((*raw)->Publish({reinterpret_cast<const std::byte*>(bad.data()),
                             bad.size() * 8})
                .status,
            PublishStatus::kMalformed);
  EXPECT_EQ((*raw)->messages_sent(), 0u);
  ASSERT_EQ((*raw)->Publish({reinterpret_cast<const std::byte*>(words.begin()),
                             words.size() * 8})
                .status,
            PublishStatus::kOk);
  Message<Sample> m;
  ASSERT_EQ((*sub)->Next(&m), ReceiveStatus::kOk);
  EXPECT_EQ(m.root.getStamp(), 9u);
  EXPECT_EQ(m.context.queue_index, 0u);
  EXPECT_EQ((*sub)->malformed(), 0u);
}

// Framed bytes of several segments (another writer's, an older log's)
// arrive as one segment, so a reader of the channel never allocates for
// them; a multi-segment message that is not valid is refused whole.
TEST_F(EndpointsTest, PublishRebuildsAMultiSegmentMessageAsOneSegment) {
  auto ch = MakeChannel("/multi", kSample, 4096);
  auto raw = RawPublisher::Create(ch.get());
  auto sub = Subscriber<Sample>::Create(ch.get());
  ASSERT_TRUE(raw.ok() && sub.ok());
  // First segment of 8 words: the label and the list spill into others.
  capnp::MallocMessageBuilder source(8, capnp::AllocationStrategy::FIXED_SIZE);
  Sample::Builder s = source.initRoot<Sample>();
  s.setStamp(42);
  s.setLabel("a label long enough to need a segment of its own, and more");
  auto values = s.initValues(20);
  for (unsigned i = 0; i < 20; ++i) values.set(i, 0.5f * i);
  ASSERT_GT(source.getSegmentsForOutput().size(), 1u);
  kj::Array<capnp::word> words = capnp::messageToFlatArray(source);
  std::span<const std::byte> framed(
      reinterpret_cast<const std::byte*>(words.begin()), words.size() * 8);
  ASSERT_EQ((*raw)->Publish(framed).status, PublishStatus::kOk);
  Message<Sample> m;
  ASSERT_EQ((*sub)->Next(&m), ReceiveStatus::kOk);
  uint32_t segments_minus_one = ~0u;
  std::memcpy(&segments_minus_one, m.bytes.data(), 4);
  EXPECT_EQ(segments_minus_one, 0u);
  EXPECT_EQ(m.root.getStamp(), 42u);
  EXPECT_EQ(std::string(m.root.getLabel().cStr()),
            "a label long enough to need a segment of its own, and more");
  ASSERT_EQ(m.root.getValues().size(), 20u);
  EXPECT_FLOAT_EQ(m.root.getValues()[19], 9.5f);
  (*sub)->Release();

  // The same bytes with the second segment's far pointer target cut: the
  // table says two segments but the pointers lead out of them.
  std::vector<capnp::word> broken(words.begin(), words.end());
  uint32_t table[4];
  std::memcpy(table, broken.data(), sizeof(table));
  ASSERT_GE(table[0], 1u);
  // Garbage over every word after the table: no valid pointer is left.
  const size_t table_words = (1 + (table[0] + 1) + 1) / 2;
  for (size_t i = table_words; i < broken.size(); ++i) {
    std::memset(&broken[i], 0xff, sizeof(capnp::word));
  }
  std::span<const std::byte> bad(
      reinterpret_cast<const std::byte*>(broken.data()), broken.size() * 8);
  EXPECT_EQ((*raw)->Publish(bad).status, PublishStatus::kMalformed);
  EXPECT_EQ(ch->stats().send_failures, 1u);
}

// A multi-segment message whose two pointers share one target (legal on
// the wire; a copy writes the target twice) fits the slot as given but not
// once rebuilt as one segment: refused as too large, nothing is sent, and
// the channel goes on.
TEST_F(EndpointsTest, PublishRefusesAMultiSegmentMessageThatOutgrowsTheSlot) {
  auto ch = MakeChannel("/shared_target", kSample, 4096);
  auto raw = RawPublisher::Create(ch.get());
  auto sub = Subscriber<Sample>::Create(ch.get());
  ASSERT_TRUE(raw.ok() && sub.ok());
  constexpr uint64_t kBytes = 2500;
  constexpr uint64_t kDataWords = (kBytes + 7) / 8;
  // Segment 0: the root pointer and a struct of two far pointers, both to
  // the same landing pad; segment 1: the pad (a byte list) and its bytes.
  const uint64_t root = uint64_t{2} << 48;              // struct, 0 data, 2 ptrs
  const uint64_t far = 2 | (uint64_t{1} << 32);         // segment 1, word 0
  const uint64_t pad = 1 | (uint64_t{2} << 32) | (kBytes << 35);  // bytes
  std::vector<uint64_t> words;
  words.push_back(1 | (uint64_t{3} << 32));             // 2 segments; seg 0: 3
  words.push_back(1 + kDataWords);                      // seg 1; padding
  words.insert(words.end(), {root, far, far, pad});
  words.resize(words.size() + kDataWords, 0x4242424242424242);
  std::span<const std::byte> framed(
      reinterpret_cast<const std::byte*>(words.data()), words.size() * 8);
  ASSERT_LE(framed.size(), 4096u);
  EXPECT_EQ((*raw)->Publish(framed).status, PublishStatus::kTooLarge);
  EXPECT_EQ(ch->stats().send_failures, 1u);
  Message<Sample> m;
  EXPECT_EQ((*sub)->Next(&m), ReceiveStatus::kNothingNew);

  // The same shape with half the bytes fits rebuilt, and reads back whole.
  constexpr uint64_t kSmall = 1000;
  std::vector<uint64_t> small = {1 | (uint64_t{3} << 32), 1 + (kSmall + 7) / 8,
                                 root, far, far,
                                 1 | (uint64_t{2} << 32) | (kSmall << 35)};
  small.resize(small.size() + (kSmall + 7) / 8, 0);  // a Text of NULs
  ASSERT_EQ((*raw)
                ->Publish(std::span<const std::byte>(
                    reinterpret_cast<const std::byte*>(small.data()),
                    small.size() * 8))
                .status,
            PublishStatus::kOk);
  ASSERT_EQ((*sub)->Next(&m), ReceiveStatus::kOk);
  uint32_t segments_minus_one = ~0u;
  std::memcpy(&segments_minus_one, m.bytes.data(), 4);
  EXPECT_EQ(segments_minus_one, 0u);
  // Pointer 0 (label) reads the shared byte list, now a copy of its own.
  EXPECT_EQ(m.root.getLabel().size() + 1, kSmall);
}

}  // namespace
}  // namespace tether::transport
