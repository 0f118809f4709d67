// Tests for transport/framing.h: messages built in a publisher's private
// arena and copied into a slot, blobs written in place in the slot, read in
// place, overflow reported as errors, and no heap allocation on the build
// path. Reusing slots and builders is in framing_reuse_test.cc, malformed
// bytes in framing_reader_test.cc.
#include "transport/framing.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "capnp/message.h"
#include "capnp/serialize.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/transport/framing_test.capnp.h"
#include "tests/transport/framing_test_util.h"
#include "tests/util/alloc_counter.h"

namespace tether::transport {
namespace {

using ::testing::HasSubstr;
using testing::ExpectSample;
using testing::FillSample;
using testing::MustFinish;
using testing::MustFinishResult;
using testing::Slot;

// ---------------------------------------------------------------------------
// Round trips.

TEST(SlotMessageBuilder, RoundTripsScalars) {
  Slot slot(256);
  SlotMessageBuilder builder(slot.arena(), slot.span(), "/test/scalars");
  auto scalars = builder.initRoot<Scalars>();
  scalars.setI64(-(int64_t{1} << 40));
  scalars.setU8(200);
  scalars.setF64(3.25);
  scalars.setFlag(true);
  const uint64_t size = MustFinish(builder);
  // Table word + root pointer + a struct of 3 data words.
  EXPECT_EQ(size, 8u + 8u + 24u);

  SlotMessageReader reader(slot.framed(size));
  ASSERT_TRUE(reader.ok()) << FramingStatusName(reader.status());
  RootResult<Scalars> root = CheckedRoot<Scalars>(reader);
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(root.root.getI64(), -(int64_t{1} << 40));
  EXPECT_EQ(root.root.getU8(), 200);
  EXPECT_DOUBLE_EQ(root.root.getF64(), 3.25);
  EXPECT_TRUE(root.root.getFlag());
  EXPECT_EQ(root.root.getI32(), -7);  // schema default survives
}

TEST(SlotMessageBuilder, RoundTripsTextListsAndNestedStructs) {
  Slot slot(4096);
  SlotMessageBuilder builder(slot.arena(), slot.span(), "/test/sample");
  FillSample(builder.initRoot<Sample>(), 0);
  const uint64_t size = MustFinish(builder);
  EXPECT_EQ(size % 8, 0u);
  EXPECT_LT(size, 4096u);

  auto reader = ReadSlotMessage(slot.framed(size));
  RootResult<Sample> root = CheckedRoot<Sample>(reader);
  ASSERT_TRUE(root.ok());
  ExpectSample(root.root, 0);
}

TEST(SlotMessageBuilder, RoundTripsAOneMebibyteBlob) {
  constexpr size_t kBlob = 1 << 20;
  Slot slot(kBlob + 1024);
  std::vector<uint8_t> blob(kBlob);
  std::mt19937 rng(7);
  for (uint8_t& b : blob) b = static_cast<uint8_t>(rng());

  SlotMessageBuilder builder(slot.arena(), slot.span(), "/test/blob");
  auto sample = builder.initRoot<Sample>();
  sample.setStamp(99);
  sample.setBlob(kj::arrayPtr(blob.data(), blob.size()));
  const uint64_t size = MustFinish(builder);
  EXPECT_GE(size, kBlob);

  SlotMessageReader reader(slot.framed(size));
  RootResult<Sample> root = CheckedRoot<Sample>(reader);
  ASSERT_TRUE(root.ok());
  ASSERT_EQ(root.root.getBlob().size(), kBlob);
  EXPECT_EQ(std::memcmp(root.root.getBlob().begin(), blob.data(), kBlob), 0);
}

TEST(SlotMessageBuilder, EmptyMessageFinishesWithANullRoot) {
  Slot slot(64);
  SlotMessageBuilder builder(slot.arena(), slot.span(), "/test/empty");
  const uint64_t size = MustFinish(builder);
  EXPECT_EQ(size, 16u);
  SlotMessageReader reader(slot.framed(size));
  RootResult<Scalars> root = CheckedRoot<Scalars>(reader);
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(root.root.getI32(), -7);
}

TEST(SlotMessageBuilder, SlotBytesAreStandardStreamFraming) {
  Slot slot(4096);
  SlotMessageBuilder builder(slot.arena(), slot.span(), "/test/sample");
  FillSample(builder.initRoot<Sample>(), 1);
  const uint64_t size = MustFinish(builder);

  // A plain FlatArrayMessageReader reads the slot's bytes as they are.
  auto framed = slot.framed(size);
  kj::ArrayPtr<const capnp::word> words(
      reinterpret_cast<const capnp::word*>(framed.data()), size / 8);
  capnp::FlatArrayMessageReader flat(words);
  ExpectSample(flat.getRoot<Sample>(), 1);

  // And they are byte for byte what Cap'n Proto's own serializer writes for
  // the same message built in one segment.
  capnp::MallocMessageBuilder reference(4096 / 8);
  FillSample(reference.initRoot<Sample>(), 1);
  kj::Array<capnp::word> expected = capnp::messageToFlatArray(reference);
  ASSERT_EQ(expected.size() * 8, size);
  EXPECT_EQ(std::memcmp(expected.begin(), framed.data(), size), 0);
}

// ---------------------------------------------------------------------------
// Blobs: large Data fields written in place in the slot.

TEST(SlotMessageBuilder, ABlobIsWrittenInPlaceAndReadsBack) {
  constexpr size_t kBlob = (1 << 20) + 3;  // not a whole number of words
  Slot slot(kBlob + 4096);
  SlotMessageBuilder builder(slot.arena(), slot.span(), "/test/blob");
  auto sample = builder.initRoot<Sample>();
  sample.setStamp(42);
  sample.setLabel("camera");
  std::span<std::byte> blob = builder.InitBlob(
      sample, capnp::Schema::from<Sample>().getFieldByName("blob"), kBlob);
  ASSERT_EQ(blob.size(), kBlob);
  // In the slot itself: the producer writes the pixels where readers read.
  EXPECT_GE(blob.data(), slot.span().data());
  EXPECT_LE(blob.data() + blob.size(), slot.span().data() + slot.span().size());
  for (size_t i = 0; i < kBlob; ++i) blob[i] = std::byte(i * 7);
  const FinishResult r = MustFinishResult(builder);
  EXPECT_GT(r.offset, 0u);
  EXPECT_EQ(r.offset + r.size, slot.span().size());  // packed at the end

  SlotMessageReader reader(slot.framed(r));
  ASSERT_TRUE(reader.ok()) << FramingStatusName(reader.status());
  RootResult<Sample> root = CheckedRoot<Sample>(reader);
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(root.root.getStamp(), 42u);
  EXPECT_EQ(root.root.getLabel(), "camera");
  // Once: Cap'n Proto counts every get of a big Data against the traversal
  // limit (its amplification guard).
  const capnp::Data::Reader got = root.root.getBlob();
  ASSERT_EQ(got.size(), kBlob);
  EXPECT_EQ(static_cast<const void*>(got.begin()),
            static_cast<const void*>(blob.data()));  // read in place too
  for (size_t i = 0; i < kBlob; i += 4093) {
    EXPECT_EQ(got[i], static_cast<uint8_t>(i * 7)) << i;
  }
  EXPECT_EQ(got[kBlob - 1], static_cast<uint8_t>((kBlob - 1) * 7));

  // Standard stream framing (one segment): Cap'n Proto's own reader takes
  // the bytes as they are.
  auto framed = slot.framed(r);
  capnp::FlatArrayMessageReader flat(kj::ArrayPtr<const capnp::word>(
      reinterpret_cast<const capnp::word*>(framed.data()), framed.size() / 8));
  const Sample::Reader flat_root = flat.getRoot<Sample>();
  EXPECT_EQ(flat_root.getLabel(), "camera");
  EXPECT_EQ(flat_root.getBlob().size(), kBlob);
}

TEST(SlotMessageBuilder, SeveralBlobsInNestedStructs) {
  Slot slot(64 * 1024);
  SlotMessageBuilder builder(slot.arena(), slot.span(), "/test/blob");
  auto sample = builder.initRoot<Sample>();
  auto child = sample.initChild();
  const auto blob_field = capnp::Schema::from<Sample>().getFieldByName("blob");
  std::span<std::byte> a = builder.InitBlob(sample, blob_field, 1000);
  std::span<std::byte> b =
      builder.InitBlob(child, blob_field, 2000, BlobFill::kZeroed);
  ASSERT_EQ(a.size(), 1000u);
  ASSERT_EQ(b.size(), 2000u);
  std::memset(a.data(), 0xAA, a.size());
  b[1999] = std::byte{0x55};
  child.setLabel("child");
  const FinishResult r = MustFinishResult(builder);
  SlotMessageReader reader(slot.framed(r));
  RootResult<Sample> root = CheckedRoot<Sample>(reader);
  ASSERT_TRUE(root.ok());
  ASSERT_EQ(root.root.getBlob().size(), 1000u);
  EXPECT_EQ(root.root.getBlob()[999], 0xAA);
  ASSERT_EQ(root.root.getChild().getBlob().size(), 2000u);
  EXPECT_EQ(root.root.getChild().getBlob()[0], 0);  // kZeroed
  EXPECT_EQ(root.root.getChild().getBlob()[1999], 0x55);
  EXPECT_EQ(root.root.getChild().getLabel(), "child");
}

// The layout framing.h promises: one segment from `offset` to the slot's
// end, blobs of any size (empty, whole words, ragged) up against it, their
// padding zero, and the slot exactly full when the blobs leave just room
// for the table and the root.
TEST(SlotMessageBuilder, BlobsKeepTheMessageOneSegmentUpToTheSlotsEnd) {
  const auto blob_field = capnp::Schema::from<Sample>().getFieldByName("blob");
  for (const size_t size : {size_t{0}, size_t{8}, size_t{4096}, size_t{13}}) {
    Slot slot(8192);
    std::memset(slot.span().data(), 0xEE, slot.span().size());  // stale
    SlotMessageBuilder builder(slot.arena(), slot.span(), "/test/blob");
    auto sample = builder.initRoot<Sample>();
    std::span<std::byte> b = builder.InitBlob(sample, blob_field, size);
    ASSERT_EQ(b.size(), size);
    for (size_t i = 0; i < size; ++i) b[i] = std::byte(i + 1);
    const FinishResult r = MustFinishResult(builder);
    EXPECT_EQ(r.offset + r.size, slot.span().size()) << size;
    std::span<const std::byte> framed = slot.framed(r);
    uint32_t table[2];
    std::memcpy(table, framed.data(), sizeof(table));
    EXPECT_EQ(table[0], 0u) << "one segment";
    EXPECT_EQ(uint64_t{table[1]} * 8 + 8, r.size);
    // Padding after a ragged blob is zero, not the stale 0xEE.
    if (size % 8 != 0) {
      EXPECT_EQ(framed[framed.size() - 1], std::byte{0});
    }
    SlotMessageReader reader(framed);
    RootResult<Sample> root = CheckedRoot<Sample>(reader);
    ASSERT_TRUE(root.ok()) << size;
    ASSERT_EQ(root.root.getBlob().size(), size);
    if (size > 0) {
      EXPECT_EQ(root.root.getBlob()[size - 1], uint8_t(size));
    }
    EXPECT_FALSE(root.root.hasLabel());
  }
  // Exactly full: the blob takes all but the table word and the root.
  Slot slot(4096);
  size_t root_words = 0;
  {  // one builder at a time per arena
    SlotMessageBuilder probe(slot.arena(), slot.span(), "/test/blob");
    (void)probe.initRoot<Sample>();
    root_words = probe.getSegmentsForOutput()[0].size();
  }
  const size_t room = 4096 - 8 * (1 + root_words);
  SlotMessageBuilder builder(slot.arena(), slot.span(), "/test/blob");
  auto sample = builder.initRoot<Sample>();
  ASSERT_EQ(builder.InitBlob(sample, blob_field, room).size(), room);
  const FinishResult r = MustFinishResult(builder);
  EXPECT_EQ(r.offset, 0u);
  EXPECT_EQ(r.size, 4096u);
}

TEST(SlotMessageBuilder, BlobMisuseAndOverflowAreErrors) {
  Slot slot(4096);
  {
    SlotMessageBuilder builder(slot.arena(), slot.span(), "/test/blob");
    auto sample = builder.initRoot<Sample>();
    // Not a Data field.
    EXPECT_TRUE(builder
                    .InitBlob(sample,
                              capnp::Schema::from<Sample>().getFieldByName(
                                  "label"),
                              10)
                    .empty());
    EXPECT_EQ(builder.Finish().status, FramingStatus::kBadBlob);
  }
  {
    SlotMessageBuilder builder(slot.arena(), slot.span(), "/test/blob");
    auto sample = builder.initRoot<Sample>();
    EXPECT_TRUE(builder
                    .InitBlob(sample,
                              capnp::Schema::from<Sample>().getFieldByName(
                                  "blob"),
                              8192)
                    .empty());  // larger than the slot
    FinishResult r = builder.Finish();
    EXPECT_EQ(r.status, FramingStatus::kOverflow);
    EXPECT_THAT(r.ErrorMessage(), HasSubstr("/test/blob"));
    // The size it asks for counts the blob that did not fit.
    EXPECT_GT(r.size, r.capacity);
  }
  {
    SlotMessageBuilder builder(slot.arena(), slot.span(), "/test/blob");
    auto choice = builder.initRoot<Choice>();
    EXPECT_TRUE(builder
                    .InitBlob(choice,
                              capnp::Schema::from<Choice>().getFieldByName(
                                  "image"),
                              10)
                    .empty());  // in a union
    EXPECT_EQ(builder.Finish().status, FramingStatus::kBadBlob);
  }
  {
    // A second blob for one field: the first one's bytes (here an earlier
    // message's 0xA1s, never written) would stay framed with nothing
    // pointing at them.
    std::memset(slot.span().data(), 0xA1, slot.span().size());
    SlotMessageBuilder builder(slot.arena(), slot.span(), "/test/blob");
    auto sample = builder.initRoot<Sample>();
    const auto field = SlotMessageBuilder::ResolveBlobField(
        capnp::Schema::from<Sample>().getFieldByName("blob"));
    EXPECT_EQ(builder.InitBlob(sample, field, 3000).size(), 3000u);
    EXPECT_TRUE(builder.InitBlob(sample, field, 10).empty());
    EXPECT_EQ(builder.Finish().status, FramingStatus::kBadBlob);
  }
  // The arena is fine afterwards.
  SlotMessageBuilder builder(slot.arena(), slot.span(), "/test/blob");
  builder.initRoot<Scalars>().setU8(1);
  (void)MustFinish(builder);
}

// ---------------------------------------------------------------------------
// Overflow.

TEST(SlotMessageBuilder, OverflowIsAnErrorNamingTheChannelAndTheSlotSize) {
  Slot slot(64);
  SlotMessageBuilder builder(slot.arena(), slot.span(), "/robot/camera");
  builder.initRoot<Sample>().setLabel(std::string(1000, 'x'));
  EXPECT_TRUE(builder.overflowed());
  FinishResult result = builder.Finish();
  EXPECT_EQ(result.status, FramingStatus::kOverflow);
  EXPECT_FALSE(result.ok());
  EXPECT_GE(result.size, 1000u);
  EXPECT_EQ(result.capacity, 64u);
  EXPECT_THAT(result.ErrorMessage(), HasSubstr("/robot/camera"));
  EXPECT_THAT(result.ErrorMessage(), HasSubstr("hold 64 bytes"));
  EXPECT_THAT(result.ErrorMessage(), HasSubstr("maxSize"));
}

TEST(SlotMessageBuilder, HugeOverflowDoesNotAbortAndTheSlotStaysUsable) {
  Slot slot(64);
  {
    SlotMessageBuilder builder(slot.arena(), slot.span(), "/robot/camera");
    auto sample = builder.initRoot<Sample>();
    auto blob = sample.initBlob(64 << 20);  // far beyond the slot and spill
    blob[blob.size() - 1] = 1;
    sample.setLabel("after the blob");
    FinishResult result = builder.Finish();
    EXPECT_EQ(result.status, FramingStatus::kOverflow);
    EXPECT_GE(result.size, uint64_t{64} << 20);
  }
  // The failed build left the arena marked dirty; the next one is clean.
  SlotMessageBuilder builder(slot.arena(), slot.span(), "/robot/camera");
  builder.initRoot<Scalars>().setU8(9);
  const uint64_t size = MustFinish(builder);
  SlotMessageReader reader(slot.framed(size));
  RootResult<Scalars> root = CheckedRoot<Scalars>(reader);
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(root.root.getU8(), 9);
  EXPECT_FALSE(root.root.getFlag());
}

TEST(SlotMessageBuilder, RootTooBigForTheSlotOverflows) {
  Slot slot(16);  // room for the root pointer only
  SlotMessageBuilder builder(slot.arena(), slot.span(), "/test/tiny");
  builder.initRoot<Scalars>().setU8(1);
  EXPECT_EQ(builder.Finish().status, FramingStatus::kOverflow);
}

// ---------------------------------------------------------------------------
// No heap on the build (and read) path.

TEST(SlotMessageBuilder, WarmBuildAndReadDoNotAllocate) {
  Slot slot(4096);
  {
    SlotMessageBuilder warm(slot.arena(), slot.span(), "/test/sample");
    FillSample(warm.initRoot<Sample>(), 0);
    (void)MustFinish(warm);
  }
  const std::string names[3] = {"joint0", "joint1", "joint2"};
  uint64_t size = 0;
  int64_t build_allocations = -1;
  {
    testing_util::AllocationCounter counter;
    SlotMessageBuilder builder(slot.arena(), slot.span(), "/test/sample");
    auto sample = builder.initRoot<Sample>();
    sample.setStamp(1234567890123ull);
    sample.setLabel("joint_state");
    auto values = sample.initValues(5);
    for (uint32_t i = 0; i < 5; ++i) values.set(i, 0.5f * i);
    auto joints = sample.initJoints(3);
    for (uint32_t i = 0; i < 3; ++i) {
      joints[i].setName(names[i]);
      joints[i].setPosition(i * 1.25);
    }
    FinishResult result = builder.Finish();
    size = result.size;
    build_allocations = counter.count();
    ASSERT_TRUE(result.ok());
  }
  EXPECT_EQ(build_allocations, 0);

  int64_t read_allocations = -1;
  {
    testing_util::AllocationCounter counter;
    SlotMessageReader reader(slot.framed(size));
    RootResult<Sample> root = CheckedRoot<Sample>(reader);
    ASSERT_TRUE(root.ok());
    EXPECT_EQ(root.root.getJoints()[2].getName(), "joint2");
    read_allocations = counter.count();
  }
  EXPECT_EQ(read_allocations, 0);
}

TEST(SlotMessageBuilder, AllocationCounterSeesHeapBuilders) {
  // The counter above must be able to fail: Cap'n Proto's heap builder
  // (calloc) and a C++ new are both counted.
  int64_t capnp_allocations = 0;
  {
    testing_util::AllocationCounter counter;
    capnp::MallocMessageBuilder heap;
    heap.initRoot<Sample>().setLabel("x");
    capnp_allocations = counter.count();
  }
  EXPECT_GT(capnp_allocations, 0);
  int64_t new_allocations = 0;
  {
    testing_util::AllocationCounter counter;
    auto vector = std::make_unique<std::vector<int>>(100);
    new_allocations = counter.count();
  }
  EXPECT_GE(new_allocations, 2);
}

// ---------------------------------------------------------------------------
// CopyMessageIntoSlot.

TEST(CopyMessageIntoSlot, CopiesFramedBytesToTheStartOfTheSlot) {
  Slot source(4096);
  SlotMessageBuilder builder(source.arena(), source.span(), "/test/sample");
  FillSample(builder.initRoot<Sample>(), 4);
  const uint64_t size = MustFinish(builder);

  Slot slot(4096);
  std::memset(slot.span().data(), 0xFF, slot.span().size());  // "dirty"
  FinishResult copied =
      CopyMessageIntoSlot(source.framed(size), slot.span(), "/test/sample");
  ASSERT_TRUE(copied.ok()) << copied.ErrorMessage();
  EXPECT_EQ(copied.size, size);
  EXPECT_EQ(copied.offset, 0u);
  SlotMessageReader reader(slot.framed(size));
  RootResult<Sample> root = CheckedRoot<Sample>(reader);
  ASSERT_TRUE(root.ok());
  ExpectSample(root.root, 4);

}

TEST(CopyMessageIntoSlot, RejectsOversizeAndBadFraming) {
  Slot source(4096);
  SlotMessageBuilder builder(source.arena(), source.span(), "/test/sample");
  FillSample(builder.initRoot<Sample>(), 0);
  const uint64_t size = MustFinish(builder);
  Slot small(64);
  FinishResult result =
      CopyMessageIntoSlot(source.framed(size), small.span(), "/test/small");
  EXPECT_EQ(result.status, FramingStatus::kOverflow);
  EXPECT_THAT(result.ErrorMessage(), HasSubstr("/test/small"));
  EXPECT_EQ(
      CopyMessageIntoSlot(source.framed(size - 8), small.span(), "/x").status,
      FramingStatus::kSizeMismatch);
}

}  // namespace
}  // namespace tether::transport
