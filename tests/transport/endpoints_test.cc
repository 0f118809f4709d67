// Typed endpoints over shared-memory channels: round trips of several
// message shapes (scalars, nested lists and text, a 1 MiB blob, blobs by
// field name), overflow, dropped loans, each message reading only what it
// set, external data refused, and no allocation on the send and receive
// paths. Raw sends and failure counts are in endpoints_raw_test.cc, channel
// creation, schemas and listing in endpoints_channels_test.cc.
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
#include "tests/util/alloc_counter.h"
#include "transport/channel_handle.h"
#include "transport/raw_endpoints.h"
#include "transport/typed_endpoints.h"

namespace tether::transport {
namespace {

using ::testing::HasSubstr;
using testing::EndpointsTest;
using testing::kSample;
using testing::kScalars;

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
