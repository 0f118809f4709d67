// transport/wire_bounds.h: the quick walk accepts the messages publishers
// make (every kind of field), declines what it does not handle, and never
// accepts what Cap'n Proto's checked reader refuses (a differential run
// over many corrupted messages; the slot_reader fuzzer does the same on its
// inputs).
#include "transport/wire_bounds.h"

#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "capnp/message.h"
#include "gtest/gtest.h"
#include "tests/transport/framing_test.capnp.h"
#include "transport/framing.h"

namespace tether::transport::internal {
namespace {

// The message's one segment, as words.
std::vector<uint64_t> Words(capnp::MallocMessageBuilder& message) {
  const auto segments = message.getSegmentsForOutput();
  EXPECT_EQ(segments.size(), 1u);
  std::vector<uint64_t> words(segments[0].size());
  std::memcpy(words.data(), segments[0].begin(), words.size() * 8);
  return words;
}

void FillSample(Sample::Builder s, int children) {
  s.setStamp(7);
  s.setLabel("arm");
  auto values = s.initValues(3);
  for (int i = 0; i < 3; ++i) values.set(i, 0.5f * i);
  auto joints = s.initJoints(2);
  joints[0].setName("shoulder");
  joints[1].setName("elbow");
  s.initInner().setName("wrist");
  s.initBlob(20)[3] = 9;
  auto names = s.initNames(2);
  names.set(0, "a");
  names.set(1, "bc");
  if (children > 0) FillSample(s.initChild(), children - 1);
}

// Every kind of pointer and list Cap'n Proto encodes in one segment.
std::vector<uint64_t> AllKinds() {
  capnp::MallocMessageBuilder message(1 << 14);
  Kinds::Builder k = message.initRoot<Kinds>();
  auto flags = k.initFlags(70);
  flags.set(69, true);
  auto matrix = k.initMatrix(2);
  matrix.init(0, 3).set(2, -1);
  matrix.init(1, 0);
  k.initVoids(1000);
  k.initBytes(9).set(8, 1);
  k.initShorts(5).set(4, 2);
  k.initInts(3).set(2, 3);
  k.initLongs(2).set(1, 4);
  auto samples = k.initSamples(2);
  FillSample(samples[0], 1);
  FillSample(samples[1], 0);
  FillSample(k.initSample(), 3);
  k.initEmpties(5);
  k.initEmpty();
  k.initScalars().setI64(1);
  return Words(message);
}

// What Cap'n Proto's checked reader says of the same words.
bool CapnpAccepts(const std::vector<uint64_t>& words, int nesting_limit,
                  std::string* why = nullptr) {
  const kj::ArrayPtr<const capnp::word> segment(
      reinterpret_cast<const capnp::word*>(words.data()), words.size());
  const kj::ArrayPtr<const capnp::word> segments[] = {segment};
  capnp::ReaderOptions options;
  options.nestingLimit = nesting_limit;
  // What the walk promises: Cap'n Proto's check fits in the segment's
  // words plus one (SlotMessageReader gives it the framed message's words,
  // the segment table's included, on top of the caller's limit).
  options.traversalLimitInWords = words.size() + 1;
  capnp::SegmentArrayMessageReader reader(
      kj::arrayPtr(segments, 1), options);
  try {
    (void)reader.getRoot<capnp::AnyPointer>().targetSize();
    return true;
  } catch (const kj::Exception& e) {
    if (why != nullptr) *why = e.getDescription().cStr();
    return false;
  }
}

std::string Dump(const std::vector<uint64_t>& base,
                 const std::vector<uint64_t>& words) {
  std::string out = "\nwords " + std::to_string(words.size()) + " of " +
                    std::to_string(base.size()) + "; changed:";
  char line[96];
  for (size_t i = 0; i < words.size(); ++i) {
    if (words[i] == base[i]) continue;
    std::snprintf(line, sizeof(line), "\n  [%zu] %016llx was %016llx", i,
                  static_cast<unsigned long long>(words[i]),
                  static_cast<unsigned long long>(base[i]));
    out += line;
  }
  return out;
}

bool Quick(const std::vector<uint64_t>& words, int nesting_limit = 64) {
  return OneSegmentInBounds(words, nesting_limit);
}

TEST(WireBounds, AcceptsEveryKindOfFieldAPublisherWrites) {
  const std::vector<uint64_t> words = AllKinds();
  EXPECT_TRUE(Quick(words));
  EXPECT_TRUE(CapnpAccepts(words, 64));
}

TEST(WireBounds, AcceptsANullRootAndAnEmptyStruct) {
  EXPECT_TRUE(Quick({0}));
  capnp::MallocMessageBuilder message;
  message.initRoot<Empty>();
  EXPECT_TRUE(Quick(Words(message)));
  EXPECT_FALSE(OneSegmentInBounds({}, 64));  // no root word at all
}

TEST(WireBounds, AcceptsWhatSlotMessageBuilderMakesWithBlobs) {
  std::vector<uint64_t> slot(512);
  BuildArena arena(slot.size() * 8);
  SlotMessageBuilder builder(
      &arena, {reinterpret_cast<std::byte*>(slot.data()), slot.size() * 8},
      "/test/blob");
  auto s = builder.initRoot<Sample>();
  s.setLabel("x");
  ASSERT_EQ(builder
                .InitBlob(s, capnp::Schema::from<Sample>().getFieldByName("blob"),
                          1000)
                .size(),
            1000u);
  const FinishResult r = builder.Finish();
  ASSERT_TRUE(r.ok()) << r.ErrorMessage();
  SlotMessageReader reader(
      {reinterpret_cast<const std::byte*>(slot.data()) + r.offset, r.size});
  ASSERT_TRUE(reader.ok());
  ASSERT_EQ(reader.segment_count(), 1u);
  EXPECT_TRUE(OneSegmentInBounds(reader.segment_words(0), 64));
}

// Each of these is out of bounds; Cap'n Proto refuses it and so must the
// quick walk (it declines).
TEST(WireBounds, DeclinesPointersOutOfTheSegment) {
  // Root struct pointer: offset 0, 1 data word, 1 pointer; segment of 2.
  const uint64_t root = uint64_t{1} << 32 | uint64_t{1} << 48;
  EXPECT_TRUE(Quick({root, 0, 0}));
  EXPECT_FALSE(Quick({root, 0}));  // the pointer section is past the end
  // A struct pointer backwards, offset -2: before the segment.
  EXPECT_TRUE(Quick({uint64_t{1} << 32, 0}));
  EXPECT_FALSE(Quick({uint64_t{0xfffffff8} | uint64_t{1} << 32, 0}));
  EXPECT_FALSE(CapnpAccepts({uint64_t{0xfffffff8} | uint64_t{1} << 32, 0}, 64));
  // A byte list of 17 bytes (3 words) in a segment with 2 after the root.
  const uint64_t bytes17 = 1 | uint64_t{2} << 32 | uint64_t{17} << 35;
  EXPECT_FALSE(Quick({bytes17, 0, 0}));
  EXPECT_TRUE(Quick({bytes17, 0, 0, 0}));
  // A bit list of 129 bits needs 3 words.
  const uint64_t bits129 = 1 | uint64_t{1} << 32 | uint64_t{129} << 35;
  EXPECT_FALSE(Quick({bits129, 0, 0}));
  EXPECT_TRUE(Quick({bits129, 0, 0, 0}));
  // An inline composite list whose tag claims more elements than its words.
  const uint64_t composite2 = 1 | uint64_t{7} << 32 | uint64_t{2} << 35;
  const uint64_t tag3of1 = uint64_t{3} << 2 | uint64_t{1} << 32;
  const uint64_t tag2of1 = uint64_t{2} << 2 | uint64_t{1} << 32;
  EXPECT_FALSE(Quick({composite2, tag3of1, 0, 0}));
  EXPECT_TRUE(Quick({composite2, tag2of1, 0, 0}));
  // A tag that is not a struct.
  EXPECT_FALSE(Quick({composite2, tag2of1 | 1, 0, 0}));
  for (const auto& words : std::vector<std::vector<uint64_t>>{
           {root, 0}, {bytes17, 0, 0}, {bits129, 0, 0},
           {composite2, tag3of1, 0, 0}, {composite2, tag2of1 | 1, 0, 0}}) {
    EXPECT_FALSE(CapnpAccepts(words, 64));
  }
}

TEST(WireBounds, DeclinesFarAndCapabilityPointers) {
  EXPECT_FALSE(Quick({2}));              // far
  EXPECT_FALSE(Quick({3}));              // capability (index 0)
  EXPECT_FALSE(Quick({uint64_t{1} << 32 | uint64_t{1} << 48, 0, 2}));
}

TEST(WireBounds, DeclinesNestingBeyondTheLimit) {
  capnp::MallocMessageBuilder message(1 << 14);
  FillSample(message.initRoot<Sample>(), 9);  // 10 Samples deep, plus lists
  const std::vector<uint64_t> words = Words(message);
  EXPECT_TRUE(Quick(words, 64));
  EXPECT_FALSE(Quick(words, 5));
  EXPECT_FALSE(CapnpAccepts(words, 5));
  // Deeper than kMaxWireDepth is left to Cap'n Proto even when allowed.
  capnp::MallocMessageBuilder deep(1 << 16);
  Sample::Builder s = deep.initRoot<Sample>();
  for (int i = 0; i < kMaxWireDepth + 5; ++i) s = s.initChild();
  const std::vector<uint64_t> deep_words = Words(deep);
  EXPECT_FALSE(Quick(deep_words, 1000));
  EXPECT_TRUE(CapnpAccepts(deep_words, 1000));
}

// A pointer list whose entries all point at one list: Cap'n Proto charges
// every visit to its read limiter; the quick walk declines once the visits
// exceed the segment.
TEST(WireBounds, DeclinesObjectsSharedBeyondTheSegmentsSize) {
  // Root: a list of 4 pointers at word 1; then a 4-word byte list at 5.
  std::vector<uint64_t> words = {1 | uint64_t{6} << 32 | uint64_t{4} << 35};
  for (int i = 0; i < 4; ++i) {
    // From word 1 + i, the list at word 5: offset 5 - (1 + i) - 1.
    const uint64_t offset = static_cast<uint64_t>(3 - i) << 2;
    words.push_back(1 | offset | uint64_t{2} << 32 | uint64_t{32} << 35);
  }
  words.resize(9);
  EXPECT_FALSE(Quick(words));  // 4 + 4 x 4 words charged in 9
  words[2] = words[3] = words[4] = 0;
  EXPECT_TRUE(Quick(words));
}

// The contract: whatever the quick walk accepts, Cap'n Proto accepts.
// Corrupts valid messages one and several words and bits at a time.
TEST(WireBounds, NeverAcceptsWhatCapnpRefuses) {
  const std::vector<uint64_t> base = AllKinds();
  std::mt19937_64 rng(12);
  int accepted = 0, declined = 0;
  for (int round = 0; round < 200000; ++round) {
    std::vector<uint64_t> words = base;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      uint64_t& w = words[rng() % words.size()];
      switch (rng() % 4) {
        case 0: w ^= uint64_t{1} << (rng() % 64); break;  // a bit
        case 1: w = rng(); break;                          // garbage
        case 2: w += (rng() % 16) << 2; break;             // an offset
        case 3: w ^= (rng() % 8) << 32; break;             // a size
      }
    }
    if (rng() % 8 == 0) words.resize(1 + rng() % words.size());
    const int nesting = rng() % 4 == 0 ? 1 + static_cast<int>(rng() % 6) : 64;
    if (!Quick(words, nesting)) {
      ++declined;
      continue;
    }
    ++accepted;
    std::string why;
    ASSERT_TRUE(CapnpAccepts(words, nesting, &why))
        << "round " << round << " (nesting limit " << nesting
        << "): the quick walk accepted what Cap'n Proto refuses: " << why
        << Dump(base, words);
  }
  // Both outcomes were exercised.
  EXPECT_GT(accepted, 1000);
  EXPECT_GT(declined, 1000);
}

}  // namespace
}  // namespace tether::transport::internal
