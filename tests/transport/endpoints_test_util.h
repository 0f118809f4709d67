// Test fixture for the endpoints tests: channels made from config entries
// in a shared-memory root of the test's own, the test schemas registered,
// and every slot of a channel held so that no loan can be made.
#ifndef TETHER_TESTS_TRANSPORT_ENDPOINTS_TEST_UTIL_H_
#define TETHER_TESTS_TRANSPORT_ENDPOINTS_TEST_UTIL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "capnp/message.h"
#include "gtest/gtest.h"
#include "shm/channel.h"
#include "shm/channel_access.h"
#include "tests/shm/shm_test_util.h"
#include "tests/transport/framing_test.capnp.h"
#include "transport/channel_handle.h"
#include "transport/config.capnp.h"
#include "transport/schema_registry.h"

namespace tether::transport::testing {

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

inline constexpr char kScalars[] = "tests/transport/framing_test.capnp:Scalars";
inline constexpr char kSample[] = "tests/transport/framing_test.capnp:Sample";

}  // namespace tether::transport::testing

#endif  // TETHER_TESTS_TRANSPORT_ENDPOINTS_TEST_UTIL_H_
