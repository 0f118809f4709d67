// Tests for transport/framing.h: reading framed bytes that are not what a
// builder writes. Misaligned, truncated, inconsistent tables, out-of-bounds
// and wrong-kind pointers, random and corrupted bytes are errors, never
// crashes or out-of-bounds reads; nesting and traversal limits apply.
#include "transport/framing.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "capnp/common.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/transport/framing_test.capnp.h"
#include "tests/transport/framing_test_util.h"

namespace tether::transport {
namespace {

using ::testing::HasSubstr;
using testing::FillSample;
using testing::MustFinish;
using testing::Slot;

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
