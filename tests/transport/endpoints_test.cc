// Typed and raw endpoints over shared-memory channels: round trips of several
// message shapes, overflow, type mismatch, malformed bytes, failed sends
// counted where tools read them, the schema that travels with a channel,
// JSON through the dynamic layer, channel listing, and no allocation on the
// send and receive paths.
#include <grp.h>
#include <sys/stat.h>

#include <cstring>
#include <string>
#include <vector>

#include "capnp/message.h"
#include "capnp/serialize.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shm/channel.h"
#include "shm/channel_access.h"
#include "tests/shm/shm_test_util.h"
#include "tests/transport/framing_test.capnp.h"
#include "tests/util/alloc_counter.h"
#include "transport/channel_handle.h"
#include "transport/config.capnp.h"
#include "transport/dynamic.h"
#include "transport/raw_endpoints.h"
#include "transport/schema_registry.h"
#include "transport/typed_endpoints.h"

namespace tether::transport {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class EndpointsTest : public ::testing::Test {
 protected:
  EndpointsTest() {
    schemas_.Register<Scalars>();
    schemas_.Register<Sample>();
  }

  // A channel entry as a validated stack config would have it.
  // ChannelHandle::Create of a config entry (2 publishers, 4 pins).
  absl::StatusOr<std::unique_ptr<ChannelHandle>> CreateChannel(
      const std::string& name, const std::string& type, uint32_t max_size,
      uint32_t depth = 8, double frequency_hz = 0) {
    capnp::MallocMessageBuilder m;
    auto c = m.initRoot<config::Channel>();
    c.setName(name);
    c.setType(type);
    c.setMaxSize(max_size);
    c.setQueueDepth(depth);
    c.setFrequencyHz(frequency_hz);
    c.setMaxPublishers(2);
    c.setMaxPinned(4);
    return ChannelHandle::Create(root_.options(), c.asReader(), schemas_);
  }
  std::unique_ptr<ChannelHandle> MakeChannel(const std::string& name,
                                             const std::string& type,
                                             uint32_t max_size,
                                             uint32_t depth = 8) {
    auto h = CreateChannel(name, type, max_size, depth);
    EXPECT_TRUE(h.ok()) << h.status();
    return h.ok() ? std::move(*h) : nullptr;
  }

  // Takes every slot of channel `name` that its publisher 0 does not hold
  // (as publisher 0: a live owner, so no sweep frees them), so that no
  // slot can be loaned; `hold` false frees them again. What makes sends
  // fail with kNoLoan: pins cannot (a publisher that finds no free slot
  // clears the pins no reader can hold).
  void HoldEverySlot(const std::string& name, bool hold) {
    auto c = shm::Channel::Open(root_.options(), name);
    ASSERT_TRUE(c.ok()) << c.status();
    const uint64_t owned = shm::internal::Owned(0);
    for (uint64_t s = 0; s < (*c)->params().pool_size(); ++s) {
      auto& state = shm::internal::ChannelAccess::slot_header(**c, s)->state;
      if (hold && state.load() != owned) held_.push_back(s);
    }
    for (uint64_t s : held_) {
      shm::internal::ChannelAccess::slot_header(**c, s)->state.store(
          hold ? owned : shm::internal::kFree);
    }
    if (!hold) held_.clear();
  }

  std::vector<uint64_t> held_;
  shm::testing::ScopedRoot root_;
  SchemaRegistry schemas_;
};

constexpr char kScalars[] = "tests/transport/framing_test.capnp:Scalars";
constexpr char kSample[] = "tests/transport/framing_test.capnp:Sample";

TEST_F(EndpointsTest, TypedScalarsRoundTripWithContext) {
  auto ch = MakeChannel("/s", kScalars, 128);
  auto pub = Publisher<Scalars>::Create(ch.get());
  auto sub = Subscriber<Scalars>::Create(ch.get());
  ASSERT_TRUE(pub.ok() && sub.ok());
  for (int i = 0; i < 3; ++i) {
    Loan<Scalars> loan = (*pub)->MakeLoan();
    ASSERT_TRUE(loan.valid());
    loan.root().setI64(-1000 * i);
    loan.root().setF64(0.5 * i);
    loan.root().setFlag(i % 2);
    PublishResult r = (*pub)->Send(std::move(loan));
    ASSERT_EQ(r.status, PublishStatus::kOk);
    EXPECT_EQ(r.queue_index, uint64_t(i));
  }
  Message<Scalars> m;
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ((*sub)->Next(&m), ReceiveStatus::kOk);
    EXPECT_EQ(m.root.getI64(), -1000 * i);
    EXPECT_DOUBLE_EQ(m.root.getF64(), 0.5 * i);
    EXPECT_EQ(m.root.getFlag(), i % 2 == 1);
    EXPECT_EQ(m.root.getI32(), -7);  // schema default
    EXPECT_EQ(m.context.queue_index, uint64_t(i));
    EXPECT_EQ(m.context.missed, 0u);
    EXPECT_GE(m.context.monotonic_receive_ns, m.context.monotonic_send_ns);
    EXPECT_EQ(m.context.publisher_sequence, uint64_t(i));
  }
  EXPECT_EQ((*sub)->Next(&m), ReceiveStatus::kNothingNew);
}

TEST_F(EndpointsTest, NestedListsTextAndAOneMebibyteBlobRoundTrip) {
  constexpr size_t kBlob = 1 << 20;
  auto ch = MakeChannel("/big", kSample, kBlob + 4096, 2);
  auto pub = Publisher<Sample>::Create(ch.get());
  auto sub = Subscriber<Sample>::Create(ch.get());
  ASSERT_TRUE(pub.ok() && sub.ok());
  Loan<Sample> loan = (*pub)->MakeLoan();
  auto s = loan.root();
  s.setStamp(42);
  s.setLabel("wheel base");
  auto values = s.initValues(3);
  values.set(0, 1.5f);
  values.set(2, -2.5f);
  auto joints = s.initJoints(2);
  joints[1].setName("right");
  joints[1].setVelocity(3.25);
  s.initInner().setPosition(7.0);
  auto blob = s.initBlob(kBlob);
  for (size_t i = 0; i < kBlob; ++i) blob[i] = static_cast<uint8_t>(i * 31);
  s.initChild().setLabel("child");
  ASSERT_EQ((*pub)->Send(std::move(loan)).status, PublishStatus::kOk);

  Message<Sample> m;
  ASSERT_EQ((*sub)->Next(&m), ReceiveStatus::kOk);
  EXPECT_EQ(m.root.getStamp(), 42u);
  EXPECT_STREQ(m.root.getLabel().cStr(), "wheel base");
  EXPECT_FLOAT_EQ(m.root.getValues()[2], -2.5f);
  EXPECT_STREQ(m.root.getJoints()[1].getName().cStr(), "right");
  EXPECT_DOUBLE_EQ(m.root.getJoints()[1].getVelocity(), 3.25);
  EXPECT_DOUBLE_EQ(m.root.getInner().getPosition(), 7.0);
  // Each get of a big blob counts against Cap'n Proto's traversal limit
  // (its amplification guard): take it once.
  capnp::Data::Reader got = m.root.getBlob();
  ASSERT_EQ(got.size(), kBlob);
  for (size_t i = 0; i < kBlob; i += 4099) {
    ASSERT_EQ(got[i], static_cast<uint8_t>(i * 31));
  }
  EXPECT_STREQ(m.root.getChild().getLabel().cStr(), "child");
  // In place: the root points into the shared-memory slot.
  EXPECT_GT(reinterpret_cast<const std::byte*>(got.begin()), m.bytes.data());
  EXPECT_LE(reinterpret_cast<const std::byte*>(got.end()),
            m.bytes.data() + m.bytes.size());
}

// Loan::InitBlob by name: the field is resolved once per publisher and
// reused; a name that is not a Data field fails the send as kMalformed
// (kBadBlob in last_finish()), every time, not only the first.
TEST_F(EndpointsTest, InitBlobByNameResolvesOnceAndRefusesWhatIsNotADataField) {
  auto ch = MakeChannel("/named", kSample, 8192, 4);
  auto pub = Publisher<Sample>::Create(ch.get());
  auto sub = Subscriber<Sample>::Create(ch.get());
  ASSERT_TRUE(pub.ok() && sub.ok());
  for (uint8_t round = 1; round <= 3; ++round) {  // the cached path too
    Loan<Sample> loan = (*pub)->MakeLoan();
    std::span<std::byte> b = loan.InitBlob("blob", 100);
    ASSERT_EQ(b.size(), 100u);
    std::memset(b.data(), round, b.size());
    ASSERT_EQ((*pub)->Send(std::move(loan)).status, PublishStatus::kOk);
    Message<Sample> m;
    ASSERT_EQ((*sub)->Next(&m), ReceiveStatus::kOk);
    ASSERT_EQ(m.root.getBlob().size(), 100u);
    EXPECT_EQ(m.root.getBlob()[99], round);
    (*sub)->Release();
  }
  for (const char* bad : {"label", "no_such_field", "label"}) {
    Loan<Sample> loan = (*pub)->MakeLoan();
    EXPECT_TRUE(loan.InitBlob(bad, 10).empty()) << bad;
    EXPECT_EQ((*pub)->Send(std::move(loan)).status, PublishStatus::kMalformed)
        << bad;
    EXPECT_EQ((*pub)->last_finish().status, FramingStatus::kBadBlob) << bad;
  }
  EXPECT_EQ(ch->stats().send_failures, 3u);  // each refusal, once
}

TEST_F(EndpointsTest, AMessageThatOutgrowsTheSlotIsAnErrorNamingTheChannel) {
  auto ch = MakeChannel("/small", kSample, 128);
  auto pub = Publisher<Sample>::Create(ch.get());
  auto sub = Subscriber<Sample>::Create(ch.get());
  ASSERT_TRUE(pub.ok() && sub.ok());
  Loan<Sample> loan = (*pub)->MakeLoan();
  loan.root().initBlob(1000);
  EXPECT_EQ((*pub)->Send(std::move(loan)).status, PublishStatus::kTooLarge);
  std::string error = (*pub)->last_finish().ErrorMessage();
  EXPECT_THAT(error, HasSubstr("/small"));
  EXPECT_THAT(error, HasSubstr("128"));
  Message<Sample> m;
  EXPECT_EQ((*sub)->Next(&m), ReceiveStatus::kNothingNew);
  // Counted once, where tools read it.
  EXPECT_EQ(ch->stats().send_failures, 1u);
  // The publisher carries on.
  Loan<Sample> ok = (*pub)->MakeLoan();
  ok.root().setStamp(1);
  EXPECT_EQ((*pub)->Send(std::move(ok)).status, PublishStatus::kOk);
  ASSERT_EQ((*sub)->Next(&m), ReceiveStatus::kOk);
  EXPECT_EQ(m.root.getStamp(), 1u);
  EXPECT_EQ(ch->stats().send_failures, 1u);
}

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

TEST_F(EndpointsTest, ADroppedLoanIsAbandonedAndTheNextOneWorks) {
  auto ch = MakeChannel("/drop", kScalars, 128);
  auto pub = Publisher<Scalars>::Create(ch.get());
  auto sub = Subscriber<Scalars>::Create(ch.get());
  {
    Loan<Scalars> loan = (*pub)->MakeLoan();
    loan.root().setI64(99);
  }
  Loan<Scalars> loan = (*pub)->MakeLoan();
  loan.root().setU8(5);
  ASSERT_EQ((*pub)->Send(std::move(loan)).status, PublishStatus::kOk);
  Message<Scalars> m;
  ASSERT_EQ((*sub)->Next(&m), ReceiveStatus::kOk);
  EXPECT_EQ(m.root.getU8(), 5);
  EXPECT_EQ(m.root.getI64(), 0);  // the dropped build left nothing behind
}

// A publisher builds message after message in one arena: whatever the
// previous message set (scalars, text, lists, nested structs, a blob) or
// a dropped loan wrote, the next reads only what it set itself.
TEST_F(EndpointsTest, EachTypedMessageReadsOnlyWhatItSetWhateverCameBefore) {
  auto ch = MakeChannel("/shapes", kSample, 2048, 4);
  auto pub = Publisher<Sample>::Create(ch.get());
  auto sub = Subscriber<Sample>::Create(ch.get());
  ASSERT_TRUE(pub.ok() && sub.ok());
  // 0: scalars; 1: a blob; 2: text and lists; 3: nothing; 4: dropped.
  const int shapes[] = {0, 0, 1, 3, 0, 2, 0, 4, 3, 1, 1, 2, 2, 3, 4, 0, 3};
  uint64_t stamp = 0;
  for (int shape : shapes) {
    Loan<Sample> loan = (*pub)->MakeLoan();
    ASSERT_TRUE(loan.valid());
    Sample::Builder s = loan.root();
    if (shape == 0 || shape == 4) s.setStamp(++stamp);
    if (shape == 1) {
      std::span<std::byte> blob = loan.InitBlob("blob", 64);
      std::memset(blob.data(), 0x77, blob.size());
    }
    if (shape == 2) {
      s.setLabel("label");
      s.initValues(3).set(1, 1.5f);
      s.initInner().setPosition(2.0);
    }
    if (shape == 4) continue;  // the loan is dropped
    ASSERT_EQ((*pub)->Send(std::move(loan)).status, PublishStatus::kOk);
    Message<Sample> m;
    ASSERT_EQ((*sub)->Next(&m), ReceiveStatus::kOk);
    EXPECT_EQ(m.root.getStamp(), shape == 0 ? stamp : 0u) << shape;
    EXPECT_EQ(m.root.hasBlob(), shape == 1) << shape;
    if (shape == 1) {
      for (uint8_t x : m.root.getBlob()) ASSERT_EQ(x, 0x77);
    }
    EXPECT_EQ(m.root.hasLabel(), shape == 2) << shape;
    EXPECT_EQ(m.root.hasValues(), shape == 2) << shape;
    EXPECT_EQ(m.root.hasInner(), shape == 2) << shape;
    EXPECT_FALSE(m.root.hasJoints());
    EXPECT_FALSE(m.root.hasChild());
  }
}

// A typed message that refers to data outside its slot (adopted external
// data) is refused at Send(), counted once, with the fix in its error; the
// publisher's next message goes out clean.
TEST_F(EndpointsTest, AMessageWithExternalDataIsRefusedAndCounted) {
  auto ch = MakeChannel("/external", kSample, 512, 4);
  auto pub = Publisher<Sample>::Create(ch.get());
  auto sub = Subscriber<Sample>::Create(ch.get());
  ASSERT_TRUE(pub.ok() && sub.ok());
  alignas(8) static const uint8_t kExternal[16] = {9, 9, 9};
  Loan<Sample> loan = (*pub)->MakeLoan();
  loan.root().setStamp(1);
  loan.root().adoptBlob(
      capnp::Orphanage::getForMessageContaining(loan.root())
          .referenceExternalData(kj::arrayPtr(kExternal, 16)));
  EXPECT_EQ((*pub)->Send(std::move(loan)).status, PublishStatus::kMalformed);
  EXPECT_EQ((*pub)->raw()->send_failures(), 1u);
  EXPECT_THAT((*pub)->last_finish().ErrorMessage(),
              HasSubstr("/external refers to bytes outside its slot"));
  Message<Sample> m;
  EXPECT_EQ((*sub)->Next(&m), ReceiveStatus::kNothingNew);
  Loan<Sample> next = (*pub)->MakeLoan();
  next.root().setStamp(2);
  ASSERT_EQ((*pub)->Send(std::move(next)).status, PublishStatus::kOk);
  ASSERT_EQ((*sub)->Next(&m), ReceiveStatus::kOk);
  EXPECT_EQ(m.root.getStamp(), 2u);
  EXPECT_FALSE(m.root.hasBlob());
}

TEST_F(EndpointsTest, WrongTypeFailsAtCreationWithBothTypeNames) {
  auto ch = MakeChannel("/typed", kSample, 256);
  auto pub = Publisher<Scalars>::Create(ch.get());
  ASSERT_EQ(pub.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(pub.status().message(), HasSubstr("framing_test.capnp:Sample"));
  EXPECT_THAT(pub.status().message(), HasSubstr("framing_test.capnp:Scalars"));
  auto sub = Subscriber<Scalars>::Create(ch.get());
  EXPECT_EQ(sub.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(EndpointsTest, ReopeningAChannelWithAnotherTypeIsRefused) {
  auto ch = MakeChannel("/clash", kSample, 256);
  auto again = CreateChannel("/clash", kScalars, 256);
  ASSERT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  // Both types by name, and how to change the channel: `ch` (this
  // process) still has it open, so removing it is not the advice.
  EXPECT_THAT(again.status().message(),
              HasSubstr(absl::StrCat("it carries ", kSample,
                                     ", this config says ", kScalars)));
  EXPECT_THAT(again.status().message(),
              HasSubstr("stop every process that uses it"));
  EXPECT_THAT(again.status().message(), HasSubstr("tether clean --root"));
  // Once nobody uses it (the stack stopped), the next start makes it anew
  // with the type its config now says.
  ch.reset();
  auto anew = CreateChannel("/clash", kScalars, 256);
  ASSERT_TRUE(anew.ok()) << anew.status();
  EXPECT_TRUE((*anew)->created());
  EXPECT_EQ((*anew)->type_name(), kScalars);
}

TEST_F(EndpointsTest, ReopeningAChannelWithAnotherMaxSizeOrRateNamesThem) {
  auto ch = MakeChannel("/rate", kSample, 256);
  // The same slots (250 rounds up to 256), another maxSize and rate.
  auto again = CreateChannel("/rate", kSample, 250, 8, 50);
  ASSERT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(again.status().message(),
              HasSubstr("its maxSize is 256, this config's 250"));
  EXPECT_THAT(again.status().message(),
              HasSubstr("its frequencyHz is 0, this config's 50"));
  EXPECT_THAT(again.status().message(), Not(HasSubstr("it carries")));
}

TEST_F(EndpointsTest, AnotherTypeAndShapeNamesBoth) {
  auto ch = MakeChannel("/both", kSample, 256);
  auto again = CreateChannel("/both", kScalars, 256, 16);
  ASSERT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(again.status().message(),
              HasSubstr(absl::StrCat("it carries ", kSample)));
  EXPECT_THAT(again.status().message(), HasSubstr("queue_depth=16"));
}

TEST_F(EndpointsTest, TheConfigsModeAndGroupAreApplied) {
  capnp::MallocMessageBuilder m;
  auto c = m.initRoot<config::Channel>();
  c.setName("/perm");
  c.setType(kScalars);
  c.setMaxSize(64);
  c.setQueueDepth(8);
  c.setMode("0640");
  struct group* own = ::getgrgid(::getegid());
  ASSERT_NE(own, nullptr);
  c.setGroup(own->gr_name);
  auto h = ChannelHandle::Create(root_.options(), c.asReader(), schemas_);
  ASSERT_TRUE(h.ok()) << h.status();
  struct stat st;
  ASSERT_EQ(::stat((*h)->path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  EXPECT_EQ(st.st_gid, ::getegid());

  c.setName("/nogroup");
  c.setGroup("no-such-group-here");
  auto bad = ChannelHandle::Create(root_.options(), c.asReader(), schemas_);
  ASSERT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("no-such-group-here"));
  EXPECT_THAT(bad.status().message(), HasSubstr("groupadd"));
}

TEST_F(EndpointsTest, UnknownTypeInConfigSaysToRegisterIt) {
  capnp::MallocMessageBuilder m;
  auto c = m.initRoot<config::Channel>();
  c.setName("/x");
  c.setType("nowhere.capnp:Nothing");
  c.setMaxSize(64);
  c.setQueueDepth(8);
  auto h = ChannelHandle::Create(root_.options(), c.asReader(), schemas_);
  ASSERT_EQ(h.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(h.status().message(), HasSubstr("Register<T>"));
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

TEST_F(EndpointsTest, ToolsDecodeAChannelWithTheSchemaItCarries) {
  auto ch = MakeChannel("/robot/sample", kSample, 512);
  auto pub = Publisher<Sample>::Create(ch.get());
  Loan<Sample> loan = (*pub)->MakeLoan();
  loan.root().setStamp(1234);
  loan.root().setLabel("hello");
  loan.root().initJoints(1)[0].setName("left");
  ASSERT_EQ((*pub)->Send(std::move(loan)).status, PublishStatus::kOk);

  // A tool that has no compiled schemas: everything from the channel file.
  auto opened = ChannelHandle::Open(root_.options(), "/robot/sample");
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ((*opened)->type_name(), kSample);
  EXPECT_EQ((*opened)->max_size(), 512u);
  SchemaRegistry tool_schemas;
  ASSERT_TRUE(tool_schemas
                  .AddCodeGeneratorRequest((*opened)->schema(),
                                           (*opened)->type_id())
                  .ok());
  auto type = tool_schemas.Find((*opened)->type_id());
  ASSERT_TRUE(type.has_value());
  auto sub = RawSubscriber::Create(opened->get(), {.pin = true, .from_oldest = true});
  ASSERT_TRUE(sub.ok());
  RawMessage raw;
  ASSERT_EQ((*sub)->Next(&raw), ReceiveStatus::kOk);
  auto json = MessageToJson(*type, raw.bytes);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_THAT(*json, HasSubstr("\"stamp\":\"1234\""));
  EXPECT_THAT(*json, HasSubstr("\"label\":\"hello\""));
  EXPECT_THAT(*json, HasSubstr("\"name\":\"left\""));

  // JSON -> message -> channel -> typed subscriber.
  auto sub2 = Subscriber<Sample>::Create(ch.get());
  auto words = JsonToMessage(*type, R"({"stamp": "77", "label": "from json",
                                        "values": [1.5, 2.5]})");
  ASSERT_TRUE(words.ok()) << words.status();
  auto raw_pub = RawPublisher::Create(opened->get());
  ASSERT_TRUE(raw_pub.ok());
  std::span<const std::byte> framed(
      reinterpret_cast<const std::byte*>(words->data()), words->size() * 8);
  ASSERT_EQ((*raw_pub)->Publish(framed).status, PublishStatus::kOk);
  Message<Sample> m;
  ASSERT_EQ((*sub2)->Next(&m), ReceiveStatus::kOk);
  EXPECT_EQ(m.root.getStamp(), 77u);
  EXPECT_STREQ(m.root.getLabel().cStr(), "from json");
  EXPECT_FLOAT_EQ(m.root.getValues()[1], 2.5f);

  auto bad = JsonToMessage(*type, R"({"stamp": "not a number"})");
  EXPECT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("Sample"));
}

// What `tether log check` uses: the same verdict as MessageToJson, without
// the JSON, for a valid message, one with an out-of-bounds root and one
// whose pointers are in bounds but of the wrong kind for Sample's fields
// (a struct where Sample has Text), deep in a list as well as at the root.
TEST_F(EndpointsTest, CheckMessageDecodesAgreesWithMessageToJson) {
  const capnp::StructSchema type = capnp::Schema::from<Sample>();
  auto framed = [](capnp::MessageBuilder& b) {
    kj::Array<capnp::word> flat = capnp::messageToFlatArray(b);
    std::vector<std::byte> bytes(flat.size() * 8 + 1);
    // One byte off the word grid: log records need not be aligned.
    std::memcpy(bytes.data() + 1, flat.begin(), flat.size() * 8);
    return bytes;
  };
  auto verdicts = [&](const std::vector<std::byte>& bytes) {
    const std::span<const std::byte> b(bytes.data() + 1, bytes.size() - 1);
    const absl::Status checked = CheckMessageDecodes(type, b);
    const absl::StatusOr<std::string> json = MessageToJson(type, b);
    EXPECT_EQ(checked.ok(), json.ok()) << checked << " / " << json.status();
    if (!json.ok()) EXPECT_EQ(checked.message(), json.status().message());
    return checked;
  };

  capnp::MallocMessageBuilder good;
  Sample::Builder g = good.initRoot<Sample>();
  g.setLabel("fine");
  g.initJoints(2)[1].setName("right");
  g.initChild().initNames(1).set(0, "nested");
  EXPECT_TRUE(verdicts(framed(good)).ok());

  std::vector<std::byte> bad_root = framed(good);
  std::memset(bad_root.data() + 1 + 8, 0xff, 8);  // 0xFFFFFFFFFFFFFFFC
  bad_root[1 + 8] = std::byte{0xfc};
  EXPECT_THAT(verdicts(bad_root).message(), HasSubstr("out-of-bounds"));

  capnp::MallocMessageBuilder wrong_kind;
  wrong_kind.initRoot<StructFirst>().initInner().setName("not text");
  EXPECT_THAT(verdicts(framed(wrong_kind)).message(), HasSubstr("text"));

  // Deep inside: Sample.child (pointer 6) built as a StructFirst, so the
  // child's label (its pointer 0) is a struct.
  capnp::MallocMessageBuilder deep_kind;
  capnp::toAny(deep_kind.initRoot<Sample>())
      .getPointerSection()[6]
      .initAs<StructFirst>()
      .initInner()
      .setName("deep");
  EXPECT_THAT(verdicts(framed(deep_kind)).message(), HasSubstr("text"));
}

TEST_F(EndpointsTest, ListShowsEveryChannelWithTypeShapeAndCounts) {
  auto a = MakeChannel("/a", kScalars, 64, 16);
  auto b = MakeChannel("/b/c", kSample, 1024, 4);
  auto pub = Publisher<Scalars>::Create(a.get());
  for (int i = 0; i < 5; ++i) {
    Loan<Scalars> l = (*pub)->MakeLoan();
    ASSERT_EQ((*pub)->Send(std::move(l)).status, PublishStatus::kOk);
  }
  auto sub = Subscriber<Sample>::Create(b.get());
  // A stray file that is not a tether channel is listed with its error.
  shm::ChannelOptions plain = root_.options();
  ASSERT_TRUE(shm::Channel::OpenOrCreate(plain, "/stray",
                                         {.slot_size = 8, .queue_depth = 2})
                  .ok());
  auto list = ListChannels(root_.options());
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->size(), 3u);
  EXPECT_EQ((*list)[0].name, "/a");
  EXPECT_EQ((*list)[0].type_name, kScalars);
  EXPECT_EQ((*list)[0].params.queue_depth, 16u);
  EXPECT_EQ((*list)[0].stats.next_queue_index, 5u);
  EXPECT_EQ((*list)[0].stats.publishers, 1);
  EXPECT_EQ((*list)[1].name, "/b/c");
  EXPECT_EQ((*list)[1].max_size, 1024u);
  EXPECT_EQ((*list)[1].stats.pinning_readers, 1);
  EXPECT_EQ((*list)[2].name, "/stray");
  EXPECT_THAT((*list)[2].error, HasSubstr("no valid tether channel info"));
}

TEST_F(EndpointsTest, SendAndReceiveDoNotAllocate) {
  auto ch = MakeChannel("/rt", kSample, 1024);
  auto pub = Publisher<Sample>::Create(ch.get());
  auto sub = Subscriber<Sample>::Create(ch.get());
  ASSERT_TRUE(pub.ok() && sub.ok());
  auto build_and_send = [&](uint64_t i) {
    Loan<Sample> loan = (*pub)->MakeLoan();
    loan.root().setStamp(i);
    loan.root().setLabel("steady state");
    auto v = loan.root().initValues(16);
    for (uint32_t k = 0; k < 16; ++k) v.set(k, k * 0.5f);
    return (*pub)->Send(std::move(loan)).status;
  };
  // Warm up (first loans, first slot reuse).
  for (uint64_t i = 0; i < 20; ++i) {
    ASSERT_EQ(build_and_send(i), PublishStatus::kOk);
    Message<Sample> m;
    ASSERT_EQ((*sub)->Next(&m), ReceiveStatus::kOk);
  }
  int64_t allocations = 0;
  double sum = 0;
  {
    testing_util::AllocationCounter counter;
    for (uint64_t i = 20; i < 220; ++i) {
      if (build_and_send(i) != PublishStatus::kOk) break;
      Message<Sample> m;
      if ((*sub)->Next(&m) != ReceiveStatus::kOk) break;
      sum += m.root.getValues()[3] + m.root.getStamp();
    }
    allocations = counter.count();
  }
  EXPECT_EQ(allocations, 0);
  EXPECT_GT(sum, 0);
  // Publish of framed bytes (replay, bridges) checks them whole, also
  // without allocating.
  auto raw = RawPublisher::Create(ch.get());
  ASSERT_TRUE(raw.ok());
  capnp::MallocMessageBuilder source;
  source.initRoot<Sample>().setLabel("framed elsewhere");
  source.getRoot<Sample>().initValues(4).set(3, 2.5f);
  kj::Array<capnp::word> flat = capnp::messageToFlatArray(source);
  const std::span<const std::byte> framed(
      reinterpret_cast<const std::byte*>(flat.begin()), flat.size() * 8);
  int published = 0;
  {
    testing_util::AllocationCounter counter;
    for (int i = 0; i < 100; ++i) {
      if ((*raw)->Publish(framed).status != PublishStatus::kOk) break;
      Message<Sample> m;
      if ((*sub)->Next(&m) != ReceiveStatus::kOk) break;
      if (m.root.getValues()[3] == 2.5f) ++published;
    }
    allocations = counter.count();
  }
  EXPECT_EQ(allocations, 0);
  EXPECT_EQ(published, 100);
  // The counter does see allocations (so the zero above means something).
  {
    testing_util::AllocationCounter counter;
    std::vector<int>* v = new std::vector<int>(10);
    delete v;
    EXPECT_GT(counter.count(), 0);
  }
}

}  // namespace
}  // namespace tether::transport
