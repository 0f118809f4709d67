// Channel::corrupt()'s fast path skips the SIGBUS guards while nothing in
// the process was ever damaged or found corrupt. This binary holds one test
// on purpose: it starts from a process-wide corruption count of zero, so it
// fails if the SIGBUS repair ever stops counting (a truncated file would
// then read and take sends as zero pages, silently).
#include <unistd.h>

#include <cstring>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shm/channel.h"
#include "shm/publisher.h"
#include "shm/reader.h"
#include "tests/shm/shm_test_util.h"

namespace tether::shm {
namespace {

using ::testing::HasSubstr;

TEST(SigbusGuard, ATruncationSeenFirstByAnotherThreadFailsEverySendAfter) {
  ASSERT_EQ(Channel::CorruptionEvents(), 0u)
      << "another test in this binary found corruption first";
  testing::ScopedRoot root;
  auto c = Channel::OpenOrCreate(
      root.options(), "/robot/imu",
      {.slot_size = 256, .queue_depth = 16, .max_publishers = 2,
       .max_pinned = 4});
  ASSERT_TRUE(c.ok()) << c.status();
  auto pub = Publisher::Create(c->get());
  auto reader = Reader::Create(c->get());
  ASSERT_TRUE(pub.ok() && reader.ok());
  for (int i = 0; i < 3; ++i) {
    std::span<std::byte> loan = (*pub)->Loan();
    ASSERT_FALSE(loan.empty());
    std::memset(loan.data(), i, 64);
    ASSERT_EQ((*pub)->Send(64).status, SendStatus::kOk);
  }
  EXPECT_FALSE((*c)->corrupt());
  EXPECT_EQ(Channel::CorruptionEvents(), 0u);

  ASSERT_EQ(::truncate((*c)->path().c_str(), 0), 0);
  // The reader's thread takes the SIGBUS and the repair.
  ReadStatus read = ReadStatus::kOk;
  std::thread t([&] {
    MessageView v;
    read = (*reader)->Next(&v);
  });
  t.join();
  EXPECT_EQ(read, ReadStatus::kCorrupt);
  EXPECT_GT(Channel::CorruptionEvents(), 0u);
  // This thread never faulted: its send lands on the zero pages and must
  // still be refused.
  std::span<std::byte> loan = (*pub)->Loan();
  if (!loan.empty()) std::memset(loan.data(), 7, 64);
  EXPECT_EQ((*pub)->Send(64).status, SendStatus::kCorrupt);
  EXPECT_TRUE((*c)->corrupt());
  EXPECT_THAT(std::string((*c)->corruption()), HasSubstr("truncated"));
}

}  // namespace
}  // namespace tether::shm
