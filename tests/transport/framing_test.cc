// Tests for transport/framing.h: messages built in a publisher's private
// arena and copied into a slot, blobs written in place in the slot, read in
// place (one segment or several), overflow and malformed bytes reported as
// errors, garbage written into the slot while building never reaching the
// builder, no stale bytes, and no heap allocation on the build path.
#include "transport/framing.h"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "capnp/message.h"
#include "capnp/serialize.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/transport/framing_test.capnp.h"
#include "tests/util/alloc_counter.h"

namespace tether::transport {
namespace {

using ::testing::HasSubstr;

// An 8-byte aligned slot of `bytes` bytes, initially zero (like a fresh
// shared-memory file), and the publisher's private arena for it.
class Slot {
 public:
  explicit Slot(size_t bytes) : words_(bytes / 8), arena_(bytes) {}
  std::span<std::byte> span() {
    return std::as_writable_bytes(std::span(words_));
  }
  BuildArena* arena() { return &arena_; }
  // The committed bytes of a finished message.
  std::span<const std::byte> framed(const FinishResult& r) {
    return span().subspan(r.offset, r.size);
  }
  std::span<const std::byte> framed(uint64_t size) {
    return span().first(size);
  }

 private:
  std::vector<capnp::word> words_;
  BuildArena arena_;
};

FinishResult MustFinishResult(SlotMessageBuilder& builder) {
  FinishResult result = builder.Finish();
  EXPECT_TRUE(result.ok()) << result.ErrorMessage();
  return result;
}

uint64_t MustFinish(SlotMessageBuilder& builder) {
  FinishResult result = MustFinishResult(builder);
  EXPECT_EQ(result.offset, 0u);  // no blobs: the message starts the slot
  return result.size;
}

void FillSample(Sample::Builder sample, int variant) {
  sample.setStamp(1234567890123ull + variant);
  sample.setLabel("joint_state");
  auto values = sample.initValues(5);
  for (uint32_t i = 0; i < 5; ++i) values.set(i, 0.5f * i + variant);
  auto joints = sample.initJoints(3);
  for (uint32_t i = 0; i < 3; ++i) {
    joints[i].setName(std::string("joint") + std::to_string(i));
    joints[i].setPosition(i * 1.25);
    joints[i].setVelocity(-1.0 * i);
  }
  sample.initInner().setName("base");
  sample.getInner().setPosition(3.5);
  auto names = sample.initNames(2);
  names.set(0, "left");
  names.set(1, "right");
  sample.initChild().setLabel("child");
}

void ExpectSample(Sample::Reader sample, int variant) {
  EXPECT_EQ(sample.getStamp(), 1234567890123ull + variant);
  EXPECT_EQ(sample.getLabel(), "joint_state");
  ASSERT_EQ(sample.getValues().size(), 5u);
  EXPECT_FLOAT_EQ(sample.getValues()[4], 2.0f + variant);
  ASSERT_EQ(sample.getJoints().size(), 3u);
  EXPECT_EQ(sample.getJoints()[2].getName(), "joint2");
  EXPECT_DOUBLE_EQ(sample.getJoints()[2].getPosition(), 2.5);
  EXPECT_DOUBLE_EQ(sample.getJoints()[1].getVelocity(), -1.0);
  EXPECT_EQ(sample.getInner().getName(), "base");
  EXPECT_DOUBLE_EQ(sample.getInner().getPosition(), 3.5);
  ASSERT_EQ(sample.getNames().size(), 2u);
  EXPECT_EQ(sample.getNames()[1], "right");
  EXPECT_EQ(sample.getChild().getLabel(), "child");
}

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

// ---------------------------------------------------------------------------
// Malformed input: errors, never crashes or out-of-bounds reads (run under
// --config=asan too).

std::vector<capnp::word> ValidSample(uint64_t* size) {
  std::vector<capnp::word> words(512);
  BuildArena arena(words.size() * 8);
  SlotMessageBuilder builder(&arena, std::as_writable_bytes(std::span(words)),
                             "/t");
  FillSample(builder.initRoot<Sample>(), 0);
  FinishResult result = builder.Finish();
  EXPECT_TRUE(result.ok());
  *size = result.size;
  words.resize(result.size / 8);
  return words;
}

std::span<const std::byte> Bytes(const std::vector<capnp::word>& words,
                                 size_t size) {
  return std::as_bytes(std::span(words)).first(size);
}

void SetTable(std::vector<capnp::word>& words, uint32_t count_minus_one,
              uint32_t size) {
  const uint32_t table[2] = {count_minus_one, size};
  std::memcpy(static_cast<void*>(words.data()), table, sizeof(table));
}

TEST(SlotMessageReader, RejectsMisalignedBytes) {
  uint64_t size = 0;
  std::vector<capnp::word> words = ValidSample(&size);
  words.push_back({});
  auto misaligned = std::as_bytes(std::span(words)).subspan(4, size);
  SlotMessageReader reader(misaligned);
  EXPECT_EQ(reader.status(), FramingStatus::kMisaligned);
  EXPECT_EQ(CheckedRoot<Sample>(reader).status, FramingStatus::kMisaligned);
}

TEST(SlotMessageReader, RejectsTruncatedBytesAtEveryLength) {
  uint64_t size = 0;
  std::vector<capnp::word> words = ValidSample(&size);
  for (size_t length = 0; length < size; ++length) {
    SlotMessageReader reader(Bytes(words, length));
    EXPECT_FALSE(reader.ok()) << length;
    EXPECT_FALSE(CheckedRoot<Sample>(reader).ok()) << length;
    const FramingStatus expected = length < 16 || length % 8 != 0
                                       ? FramingStatus::kTruncated
                                       : FramingStatus::kSizeMismatch;
    EXPECT_EQ(reader.status(), expected) << length;
  }
}

TEST(SlotMessageReader, RejectsTablesThatDisagreeWithTheBytes) {
  uint64_t size = 0;
  std::vector<capnp::word> words = ValidSample(&size);
  const uint32_t n = static_cast<uint32_t>(size / 8 - 1);
  struct Case {
    uint32_t count_minus_one;
    uint32_t words;
    FramingStatus expected;
  };
  for (const Case& c : {Case{1, n, FramingStatus::kSizeMismatch},
                        Case{kMaxSegments, n, FramingStatus::kBadSegmentCount},
                        Case{0xFFFFFFFF, n, FramingStatus::kBadSegmentCount},
                        Case{0, 0xFFFFFFFF, FramingStatus::kSizeMismatch},
                        Case{0, 1u << 29, FramingStatus::kSizeMismatch},
                        Case{0, n + 1, FramingStatus::kSizeMismatch},
                        Case{0, n - 1, FramingStatus::kSizeMismatch},
                        Case{0, 0, FramingStatus::kSizeMismatch}}) {
    std::vector<capnp::word> copy = words;
    SetTable(copy, c.count_minus_one, c.words);
    SlotMessageReader reader(Bytes(copy, size));
    EXPECT_EQ(reader.status(), c.expected)
        << c.count_minus_one << " " << c.words;
    std::string why;
    EXPECT_EQ(CheckedRoot<Sample>(reader, &why).status, c.expected);
    EXPECT_EQ(why, FramingStatusName(c.expected));
  }
}

TEST(SlotMessageReader, OutOfBoundsRootPointerIsMalformed) {
  uint64_t size = 0;
  std::vector<capnp::word> words = ValidSample(&size);
  // Root struct pointer with offset 1000 words: far outside the segment.
  const uint64_t pointer =
      (uint64_t{1000} << 2) | (uint64_t{2} << 32) | (uint64_t{8} << 48);
  std::memcpy(static_cast<void*>(&words[1]), &pointer, 8);
  SlotMessageReader reader(Bytes(words, size));
  ASSERT_TRUE(reader.ok());  // framing is fine; the content is not
  std::string why;
  RootResult<Sample> root = CheckedRoot<Sample>(reader, &why);
  EXPECT_EQ(root.status, FramingStatus::kMalformed);
  EXPECT_FALSE(why.empty());
}

TEST(SlotMessageReader, RandomBytesGiveErrorsNotCrashes) {
  std::mt19937_64 rng(20261129);
  int malformed = 0;
  for (int round = 0; round < 3000; ++round) {
    const size_t n = 1 + rng() % 64;
    std::vector<capnp::word> words(1 + n);
    for (auto& w : words) {
      const uint64_t v = rng();
      std::memcpy(static_cast<void*>(&w), &v, 8);
    }
    // Mostly a consistent table, so the content itself is exercised.
    if (round % 4 != 0) SetTable(words, 0, static_cast<uint32_t>(n));
    SlotMessageReader reader(Bytes(words, words.size() * 8));
    const FramingStatus status =
        VisitRoot<Sample>(reader, [](Sample::Reader s) {
          // Touch everything a handler might.
          (void)s.getStamp();
          (void)s.getLabel().size();
          for (auto j : s.getJoints()) (void)j.getName().size();
          for (auto name : s.getNames()) (void)name.size();
          (void)s.getBlob().size();
          (void)s.getChild().getInner().getName().size();
        });
    EXPECT_NE(status, FramingStatus::kOverflow);
    if (status == FramingStatus::kMalformed) ++malformed;
  }
  // Random pointers are almost never in bounds: the walk must see that.
  EXPECT_GT(malformed, 1000);
}

TEST(SlotMessageReader, CorruptedValidMessagesGiveErrorsNotCrashes) {
  uint64_t size = 0;
  const std::vector<capnp::word> words = ValidSample(&size);
  std::mt19937 rng(42);
  for (int round = 0; round < 3000; ++round) {
    std::vector<capnp::word> copy = words;
    auto* bytes = reinterpret_cast<uint8_t*>(copy.data());
    for (int flips = 1 + round % 4; flips > 0; --flips) {
      // Keep the table intact; corrupt the content.
      bytes[8 + rng() % (size - 8)] ^= static_cast<uint8_t>(1 + rng() % 255);
    }
    SlotMessageReader reader(Bytes(copy, size));
    const FramingStatus status =
        VisitRoot<Sample>(reader, [](Sample::Reader s) {
          (void)s.getLabel().size();
          for (auto j : s.getJoints()) (void)j.getName().size();
          for (auto name : s.getNames()) (void)name.size();
          (void)s.getChild().getLabel().size();
        });
    EXPECT_TRUE(status == FramingStatus::kOk ||
                status == FramingStatus::kMalformed);
  }
}

TEST(SlotMessageReader, WrongPointerKindIsCaughtByVisitRoot) {
  Slot slot(256);
  SlotMessageBuilder builder(slot.arena(), slot.span(), "/test/struct_first");
  builder.initRoot<StructFirst>().initInner().setName("not text");
  const uint64_t size = MustFinish(builder);

  SlotMessageReader reader(slot.framed(size));
  // The whole-message walk passes: every pointer is in bounds.
  ASSERT_TRUE(CheckedRoot<Sample>(reader).ok());
  // Reading the struct pointer as Text fails, as an error.
  std::string why;
  const FramingStatus status = VisitRoot<Sample>(
      reader, [](Sample::Reader s) { (void)s.getLabel(); }, &why);
  EXPECT_EQ(status, FramingStatus::kMalformed);
  EXPECT_THAT(why, HasSubstr("text"));
}

TEST(SlotMessageReader, NestingLimitIsApplied) {
  Slot slot(64 * 1024);
  SlotMessageBuilder builder(slot.arena(), slot.span(), "/test/deep");
  Sample::Builder node = builder.initRoot<Sample>();
  for (int depth = 0; depth < 100; ++depth) node = node.initChild();
  node.setStamp(7);
  const uint64_t size = MustFinish(builder);

  ReadOptions shallow;
  shallow.nesting_limit = 64;
  SlotMessageReader too_deep(slot.framed(size), shallow);
  EXPECT_EQ(CheckedRoot<Sample>(too_deep).status, FramingStatus::kMalformed);

  ReadOptions deep;
  deep.nesting_limit = 128;
  SlotMessageReader fine(slot.framed(size), deep);
  EXPECT_EQ(CheckedRoot<Sample>(fine).status, FramingStatus::kOk);
}

TEST(SlotMessageReader, TraversalLimitCoversTheCallersReadsNotTheCheck) {
  Slot slot(64 * 1024);
  SlotMessageBuilder builder(slot.arena(), slot.span(), "/test/list");
  builder.initRoot<Sample>().initValues(4000);  // ~2000 words
  const uint64_t size = MustFinish(builder);

  ReadOptions options;
  options.traversal_limit_words = 3000;
  SlotMessageReader reader(slot.framed(size), options);
  auto read_values = [](Sample::Reader s) { (void)s.getValues().size(); };
  // The check does not eat the caller's budget (3000 words plus the
  // message's ~2000, for the check): two full reads fit...
  EXPECT_EQ(VisitRoot<Sample>(reader, read_values), FramingStatus::kOk);
  EXPECT_EQ(VisitRoot<Sample>(reader, read_values), FramingStatus::kOk);
  // ...but the limit holds: a third does not.
  EXPECT_EQ(VisitRoot<Sample>(reader, read_values), FramingStatus::kMalformed);
}

}  // namespace
}  // namespace tether::transport
