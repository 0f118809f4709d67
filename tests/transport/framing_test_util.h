// Test helpers for transport/framing.h, shared by the framing tests: an
// aligned slot with its publisher's private arena, Finish() that must
// succeed, and a Sample filled and checked field by field.
#ifndef TETHER_TESTS_TRANSPORT_FRAMING_TEST_UTIL_H_
#define TETHER_TESTS_TRANSPORT_FRAMING_TEST_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "capnp/common.h"
#include "gtest/gtest.h"
#include "tests/transport/framing_test.capnp.h"
#include "transport/framing.h"

namespace tether::transport::testing {

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

inline FinishResult MustFinishResult(SlotMessageBuilder& builder) {
  FinishResult result = builder.Finish();
  EXPECT_TRUE(result.ok()) << result.ErrorMessage();
  return result;
}

inline uint64_t MustFinish(SlotMessageBuilder& builder) {
  FinishResult result = MustFinishResult(builder);
  EXPECT_EQ(result.offset, 0u);  // no blobs: the message starts the slot
  return result.size;
}

inline void FillSample(Sample::Builder sample, int variant) {
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

inline void ExpectSample(Sample::Reader sample, int variant) {
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

}  // namespace tether::transport::testing

#endif  // TETHER_TESTS_TRANSPORT_FRAMING_TEST_UTIL_H_
