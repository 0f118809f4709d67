// tests: the fixture of the hostile memory tests (hostile_memory_test.cc,
// hostile_header_test.cc): a root of its own, the /robot/imu channel they
// damage and messages into it, the files left in the root, and a
// camera-sized channel with a publisher and a pinning reader. Test code
// only.
#ifndef TETHER_TESTS_SHM_HOSTILE_MEMORY_FIXTURE_H_
#define TETHER_TESTS_SHM_HOSTILE_MEMORY_FIXTURE_H_

#include <cstddef>
#include <cstring>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "shm/channel.h"
#include "shm/publisher.h"
#include "shm/reader.h"
#include "tests/shm/shm_test_util.h"

namespace tether::shm::testing {

// The channel most tests damage (/robot/imu).
inline constexpr QueueParams kParams{.slot_size = 256, .queue_depth = 16,
                                     .max_publishers = 2, .max_pinned = 4};

// A root of its own per test, and the channels its tests damage.
class HostileMemoryTest : public ::testing::Test {
 protected:
  std::unique_ptr<Channel> Open() {
    auto c = Channel::OpenOrCreate(root_.options(), "/robot/imu", kParams);
    EXPECT_TRUE(c.ok()) << c.status();
    return std::move(*c);
  }
  void SendSome(Publisher* pub, int n) {
    for (int i = 0; i < n; ++i) {
      std::span<std::byte> loan = pub->Loan();
      ASSERT_FALSE(loan.empty());
      std::memset(loan.data(), i, 64);
      ASSERT_EQ(pub->Send(64).status, SendStatus::kOk);
    }
  }
  std::vector<std::string> Files() {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(
             root_.root() + "/" + root_.options().instance)) {
      names.push_back(e.path().filename().string());
    }
    return names;
  }

  // A camera-sized channel (8 MiB: on huge pages where the kernel gives
  // them), prefaulted, with a publisher and a pinning reader.
  struct LargeChannel {
    std::unique_ptr<Channel> channel;
    std::unique_ptr<Publisher> pub;
    std::unique_ptr<Reader> reader;
  };
  LargeChannel OpenLarge() {
    root_.options().prefault = true;
    LargeChannel l;
    auto c = Channel::OpenOrCreate(
        root_.options(), "/camera/raw",
        {.slot_size = 1u << 20, .queue_depth = 4, .max_publishers = 1,
         .max_pinned = 2});
    EXPECT_TRUE(c.ok()) << c.status();
    if (!c.ok()) return l;
    l.channel = std::move(*c);
    auto pub = Publisher::Create(l.channel.get());
    auto reader = Reader::Create(l.channel.get());
    EXPECT_TRUE(pub.ok() && reader.ok());
    if (pub.ok()) l.pub = std::move(*pub);
    if (reader.ok()) l.reader = std::move(*reader);
    return l;
  }

  ScopedRoot root_;
};

}  // namespace tether::shm::testing

#endif  // TETHER_TESTS_SHM_HOSTILE_MEMORY_FIXTURE_H_
