// Tests for transport/framing.h: slots and builders used again. A new
// builder over a slot that held a bigger, abandoned or other-shaped message
// reads defaults, never stale bytes; garbage written into the slot while
// building never reaches the builder; Reuse() of a builder whose last
// message was its root alone, refused otherwise; external data refused.
#include "transport/framing.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "capnp/orphan.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kj/common.h"
#include "tests/transport/framing_test.capnp.h"
#include "tests/transport/framing_test_util.h"

namespace tether::transport {
namespace {

using ::testing::HasSubstr;
using testing::ExpectSample;
using testing::FillSample;
using testing::MustFinish;
using testing::MustFinishResult;
using testing::Slot;

// ---------------------------------------------------------------------------
// Reuse and zeroing.

TEST(SlotMessageBuilder, ASmallerMessageAfterABigOneReadsDefaultsNotStaleWords) {
  Slot slot(4096);
  {
    SlotMessageBuilder big(slot.arena(), slot.span(), "/test/sample");
    FillSample(big.initRoot<Sample>(), 2);
    (void)MustFinish(big);
  }
  SlotMessageBuilder small(slot.arena(), slot.span(), "/test/sample");
  small.initRoot<Sample>().setStamp(5);
  const uint64_t size = MustFinish(small);
  SlotMessageReader reader(slot.framed(size));
  RootResult<Sample> root = CheckedRoot<Sample>(reader);
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(root.root.getStamp(), 5u);
  EXPECT_FALSE(root.root.hasLabel());
  EXPECT_FALSE(root.root.hasJoints());
  EXPECT_FALSE(root.root.hasChild());
}

TEST(SlotMessageBuilder, AnAbandonedBuildLeavesTheNextOneClean) {
  Slot slot(4096);
  {
    SlotMessageBuilder abandoned(slot.arena(), slot.span(), "/test/sample");
    FillSample(abandoned.initRoot<Sample>(), 3);
    // No Finish(): like a publisher that gave up mid-build.
  }
  SlotMessageBuilder next(slot.arena(), slot.span(), "/test/sample");
  next.initRoot<Sample>().initInner().setName("x");
  const uint64_t size = MustFinish(next);
  SlotMessageReader reader(slot.framed(size));
  RootResult<Sample> root = CheckedRoot<Sample>(reader);
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(root.root.getInner().getName(), "x");
  EXPECT_FALSE(root.root.hasLabel());
  EXPECT_EQ(root.root.getStamp(), 0u);
}

// The slot is shared memory: another process may write anything into it at
// any time. The builder works in its private arena, so garbage written
// during every build cannot send it out of bounds (run under ASan too).
TEST(SlotMessageBuilder, GarbageWrittenIntoTheSlotWhileBuildingNeverReachesTheBuilder) {
  Slot slot(4096);
  std::atomic<bool> stop{false};
  std::span<std::byte> bytes = slot.span();
  std::thread scribbler([&] {
    std::mt19937_64 rng(11);
    auto* words = reinterpret_cast<std::atomic<uint64_t>*>(bytes.data());
    while (!stop.load(std::memory_order_relaxed)) {
      words[rng() % (bytes.size() / 8)].store(rng(), std::memory_order_relaxed);
    }
  });
  for (int i = 0; i < 20000; ++i) {
    SlotMessageBuilder builder(slot.arena(), slot.span(), "/test/sample");
    FillSample(builder.initRoot<Sample>(), i);
    ASSERT_TRUE(builder.Finish().ok());
  }
  stop = true;
  scribbler.join();
  // Quiet again: the next message is intact.
  SlotMessageBuilder builder(slot.arena(), slot.span(), "/test/sample");
  FillSample(builder.initRoot<Sample>(), 7);
  const uint64_t size = MustFinish(builder);
  SlotMessageReader reader(slot.framed(size));
  RootResult<Sample> root = CheckedRoot<Sample>(reader);
  ASSERT_TRUE(root.ok());
  ExpectSample(root.root, 7);
}

// ---------------------------------------------------------------------------
// Reuse() of a builder, external data, and no stale bytes.

// The bytes of a message built by a new builder over a zero slot, for
// comparing with what a reused builder commits.
std::vector<std::byte> FreshBytes(size_t slot_bytes,
                                  void (*fill)(SlotMessageBuilder&,
                                               Scalars::Builder)) {
  Slot fresh(slot_bytes);
  SlotMessageBuilder b(fresh.arena(), fresh.span(), "/test/fresh");
  fill(b, b.initRoot<Scalars>());
  FinishResult r = MustFinishResult(b);
  std::span<const std::byte> bytes = fresh.framed(r);
  return {bytes.begin(), bytes.end()};
}

// After a message that was its root alone, Reuse() makes the same builder
// build the next one in another slot: the fields the first set read as
// their defaults, and the committed bytes are those a new builder makes.
TEST(SlotMessageBuilder,
     AReusedBuilderStartsFromDefaultsAndCommitsWhatANewOneWould) {
  Slot a(256), b(256);
  std::memset(b.span().data(), 0xEE, b.span().size());  // stale slot bytes
  SlotMessageBuilder builder(a.arena(), a.span(), "/test/reuse");
  Scalars::Builder root = builder.initRoot<Scalars>();
  root.setI64(-1);
  root.setU8(0xAB);
  root.setF64(2.5);
  root.setFlag(true);
  root.setI32(1234);  // not the schema's default (-7)
  (void)MustFinishResult(builder);

  ASSERT_TRUE(builder.Reuse(b.span()));
  root.setU8(7);  // the root builder from initRoot() still serves
  FinishResult r = MustFinishResult(builder);
  SlotMessageReader reader(b.framed(r));
  RootResult<Scalars> got = CheckedRoot<Scalars>(reader);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got.root.getU8(), 7);
  EXPECT_EQ(got.root.getI64(), 0);
  EXPECT_EQ(got.root.getF64(), 0.0);
  EXPECT_FALSE(got.root.getFlag());
  EXPECT_EQ(got.root.getI32(), -7);
  const std::vector<std::byte> fresh = FreshBytes(
      256, [](SlotMessageBuilder&, Scalars::Builder s) { s.setU8(7); });
  const std::span<const std::byte> committed = b.framed(r);
  EXPECT_TRUE(std::equal(committed.begin(), committed.end(), fresh.begin(),
                         fresh.end()));
}

// Blobs are forgotten by Reuse(): the next message without one has a null
// field, and the next with one gets its own, in the new slot.
TEST(SlotMessageBuilder, AReusedBuilderForgetsTheLastMessagesBlobs) {
  const auto blob_field = SlotMessageBuilder::ResolveBlobField(
      capnp::Schema::from<Sample>().getFieldByName("blob"));
  Slot a(1024), b(1024), c(1024);
  SlotMessageBuilder builder(a.arena(), a.span(), "/test/reuse");
  Sample::Builder root = builder.initRoot<Sample>();
  root.setStamp(5);
  std::span<std::byte> blob = builder.InitBlob(root, blob_field, 100);
  std::memset(blob.data(), 0x5A, blob.size());
  (void)MustFinishResult(builder);

  ASSERT_TRUE(builder.Reuse(b.span()));
  FinishResult rb = MustFinishResult(builder);
  EXPECT_EQ(rb.offset, 0u);  // no blob: the message starts the slot
  {
    SlotMessageReader reader(b.framed(rb));
    RootResult<Sample> got = CheckedRoot<Sample>(reader);
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(got.root.getStamp(), 0u);
    EXPECT_FALSE(got.root.hasBlob());
  }
  ASSERT_TRUE(builder.Reuse(c.span()));
  blob = builder.InitBlob(root, blob_field, 10, BlobFill::kZeroed);
  ASSERT_EQ(blob.size(), 10u);
  EXPECT_GE(blob.data(), c.span().data());
  EXPECT_LT(blob.data(), c.span().data() + c.span().size());
  FinishResult rc = MustFinishResult(builder);
  SlotMessageReader reader(c.framed(rc));
  RootResult<Sample> got = CheckedRoot<Sample>(reader);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got.root.getBlob().size(), 10u);
  for (uint8_t x : got.root.getBlob()) EXPECT_EQ(x, 0);
}

// Reuse() refuses, changing nothing, whenever the arena holds more than
// the root (text, lists, nested structs), before Finish(), after a failed
// one, and for a slot of another size; a new builder then zeroes it all.
TEST(SlotMessageBuilder, ReuseIsRefusedUnlessTheLastMessageWasItsRootAlone) {
  Slot a(512), b(512), small(256);
  // More than the root in the arena (text, a nested struct), or root
  // pointers that own no words here (a list of 1,000 voids, an empty
  // struct; a capability or a far pointer is refused the same way).
  using Build = void (*)(SlotMessageBuilder&);
  const Build refused[] = {
      [](SlotMessageBuilder& m) {
        m.initRoot<Sample>().setLabel("text allocates");
      },
      [](SlotMessageBuilder& m) { m.initRoot<Sample>().initInner(); },
      [](SlotMessageBuilder& m) { m.initRoot<Kinds>().initVoids(1000); },
      [](SlotMessageBuilder& m) { m.initRoot<Kinds>().initEmpty(); },
  };
  for (Build build : refused) {
    SlotMessageBuilder builder(a.arena(), a.span(), "/test/reuse");
    build(builder);
    EXPECT_FALSE(builder.Reuse(b.span()));  // not finished
    (void)MustFinishResult(builder);
    EXPECT_FALSE(builder.Reuse(b.span()));
  }
  {
    SlotMessageBuilder builder(a.arena(), a.span(), "/test/reuse");
    builder.initRoot<Sample>().setStamp(1);
    (void)MustFinishResult(builder);
    EXPECT_FALSE(builder.Reuse(small.span().first(248)));  // another size
    ASSERT_TRUE(builder.Reuse(b.span()));
    EXPECT_FALSE(builder.Reuse(b.span()));  // once per Finish()
  }
  {
    SlotMessageBuilder builder(a.arena(), small.span().first(64),
                               "/test/reuse");
    builder.initRoot<Sample>().initValues(100);  // outgrows 64 bytes
    EXPECT_EQ(builder.Finish().status, FramingStatus::kOverflow);
    EXPECT_FALSE(builder.Reuse(small.span().first(64)));
  }
  // What those builders left in the arena is zeroed by the next new one.
  SlotMessageBuilder next(a.arena(), b.span(), "/test/reuse");
  next.initRoot<Sample>();
  FinishResult r = MustFinishResult(next);
  SlotMessageReader reader(b.framed(r));
  RootResult<Sample> got = CheckedRoot<Sample>(reader);
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(got.root.hasLabel());
  EXPECT_FALSE(got.root.hasValues());
  EXPECT_FALSE(got.root.hasInner());
  EXPECT_EQ(got.root.getStamp(), 0u);
}

// Data adopted from outside the arena (Orphanage::referenceExternalData)
// would make a second segment that the slot does not hold: Finish() refuses
// the message and says what to do, rather than commit a far pointer to
// nothing.
TEST(SlotMessageBuilder, ExternalDataIsRefusedNotCommittedAsAFarPointer) {
  Slot slot(1024);
  alignas(8) static const uint8_t kExternal[16] = {1, 2, 3};
  SlotMessageBuilder builder(slot.arena(), slot.span(), "/test/external");
  Sample::Builder root = builder.initRoot<Sample>();
  root.adoptBlob(
      capnp::Orphanage::getForMessageContaining(root).referenceExternalData(
          kj::arrayPtr(kExternal, 16)));
  FinishResult r = builder.Finish();
  EXPECT_EQ(r.status, FramingStatus::kExternalData);
  EXPECT_THAT(r.ErrorMessage(), HasSubstr("/test/external"));
  EXPECT_THAT(r.ErrorMessage(), HasSubstr("referenceExternalData"));
  EXPECT_FALSE(builder.Reuse(slot.span()));
}

// A slot reused by a message of another shape: every field the new message
// did not set reads as its default, and no byte of the old message shows in
// the new message's framed bytes, whatever the field kind (scalars, text,
// lists of scalars, of structs, of text, nested structs, data, blobs).
TEST(SlotMessageBuilder, NoStaleBytesAfterReuseByAnotherShape) {
  constexpr uint8_t kOld = 0xA7;
  Slot slot(64 * 1024);
  {
    SlotMessageBuilder old(slot.arena(), slot.span(), "/test/stale");
    auto s = old.initRoot<Sample>();
    s.setStamp(0xA7A7A7A7A7A7A7A7ull);
    s.setLabel(std::string(300, static_cast<char>(kOld)));
    auto values = s.initValues(100);
    for (uint32_t i = 0; i < 100; ++i) values.set(i, -3.1e-13f);  // bytes 0xA7
    auto joints = s.initJoints(20);
    for (uint32_t i = 0; i < 20; ++i) {
      joints[i].setName(std::string(50, static_cast<char>(kOld)));
    }
    auto names = s.initNames(20);
    for (uint32_t i = 0; i < 20; ++i) {
      names.set(i, std::string(40, static_cast<char>(kOld)));
    }
    std::vector<uint8_t> data(5000, kOld);
    s.initChild().setBlob(kj::arrayPtr(data.data(), data.size()));
    std::span<std::byte> blob = old.InitBlob(
        s, capnp::Schema::from<Sample>().getFieldByName("blob"), 20000);
    std::memset(blob.data(), kOld, blob.size());
    (void)MustFinishResult(old);
  }
  for (int shape = 0; shape < 3; ++shape) {
    SlotMessageBuilder next(slot.arena(), slot.span(), "/test/stale");
    FinishResult r;
    if (shape == 0) {
      next.initRoot<Scalars>().setU8(1);
      r = MustFinishResult(next);
    } else {
      auto s = next.initRoot<Sample>();
      s.initJoints(30);  // more structs than before, names unset
      s.initNames(25);
      s.initValues(150);
      s.initInner();
      if (shape == 2) {
        std::span<std::byte> blob = next.InitBlob(
            s, capnp::Schema::from<Sample>().getFieldByName("blob"), 777,
            BlobFill::kZeroed);
        ASSERT_EQ(blob.size(), 777u);
      }
      r = MustFinishResult(next);
      SlotMessageReader reader(slot.framed(r));
      RootResult<Sample> root = CheckedRoot<Sample>(reader);
      ASSERT_TRUE(root.ok());
      EXPECT_EQ(root.root.getStamp(), 0u);
      EXPECT_FALSE(root.root.hasLabel());
      EXPECT_FALSE(root.root.getChild().hasBlob());
      for (auto j : root.root.getJoints()) EXPECT_FALSE(j.hasName());
      for (auto n : root.root.getNames()) EXPECT_EQ(n.size(), 0u);
      for (float v : root.root.getValues()) EXPECT_EQ(v, 0.0f);
    }
    // Not one byte of the old message in what readers of this one get.
    for (std::byte b : slot.framed(r)) {
      ASSERT_NE(static_cast<uint8_t>(b), kOld) << "shape " << shape;
    }
  }
}

}  // namespace
}  // namespace tether::transport
