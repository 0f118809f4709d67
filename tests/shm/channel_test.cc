// Channel files: creation, opening, validation on open, permissions, listing,
// race-free creation and removal.
#include "shm/channel.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shm/mounts.h"
#include "shm/publisher.h"
#include "shm/reader.h"
#include "tests/shm/shm_test_util.h"

namespace tether::shm {
namespace {

using ::testing::HasSubstr;
using testing::ScopedRoot;

QueueParams SmallParams() { return {.slot_size = 128, .queue_depth = 8,
                                    .max_publishers = 2, .max_pinned = 2}; }

std::span<const std::byte> Bytes(const char* s) {
  return {reinterpret_cast<const std::byte*>(s), std::strlen(s)};
}

// A full filesystem's error names the mount to grow: a tmpfs gets the
// remount (and, for /dev/shm, Docker's flag); any other filesystem is told
// that channels belong on a tmpfs.
TEST(NoSpaceError, NamesTheMountToGrowAndWhatKindItIs) {
  const absl::Status shm =
      NoSpaceError("channel /robot/imu needs", "/dev/shm", 3u << 20);
  EXPECT_TRUE(absl::IsResourceExhausted(shm)) << shm;
  EXPECT_THAT(shm.message(), HasSubstr("channel /robot/imu needs 3.0 MiB"));
  std::optional<MountFacts> dev_shm = MountOf("/dev/shm");
  ASSERT_TRUE(dev_shm.has_value());
  if (dev_shm->fstype == "tmpfs" && dev_shm->point == "/dev/shm") {
    EXPECT_THAT(shm.message(), HasSubstr("mount -o remount,size=2G /dev/shm"));
    EXPECT_THAT(shm.message(), HasSubstr("docker run --shm-size=2g"));
  }
  // The test's own folder: on this machine's disk, not a tmpfs.
  const char* tmp = std::getenv("TEST_TMPDIR");
  ASSERT_NE(tmp, nullptr);
  std::optional<MountFacts> disk = MountOf(tmp);
  ASSERT_TRUE(disk.has_value());
  if (disk->fstype == "tmpfs") GTEST_SKIP() << tmp << " is on a tmpfs here";
  const absl::Status other = NoSpaceError("channel /x needs", tmp, 4096);
  EXPECT_THAT(other.message(),
              HasSubstr("free space on " + disk->point + " (" + disk->fstype +
                        "); channels belong on a tmpfs such as /dev/shm"));
  EXPECT_THAT(other.message(), ::testing::Not(HasSubstr("docker")));
}

TEST(Channel, CreatesThenOpensWithTheSameParamsAndMetadata) {
  ScopedRoot root;
  auto created = Channel::OpenOrCreate(root.options(), "/robot/joint_state",
                                       SmallParams(), Bytes("type=JointState"));
  ASSERT_TRUE(created.ok()) << created.status();
  auto opened = Channel::Open(root.options(), "/robot/joint_state");
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ((*opened)->params(), SmallParams());
  std::string meta(reinterpret_cast<const char*>((*opened)->metadata().data()),
                   (*opened)->metadata().size());
  EXPECT_EQ(meta, "type=JointState");
  // One file per channel, with the '/' escaped.
  struct stat st;
  EXPECT_EQ(::stat((root.root() + "/test/%2Frobot%2Fjoint_state").c_str(), &st),
            0);
}

TEST(Channel, OpenOfAMissingChannelSaysWhatToCheck) {
  ScopedRoot root;
  auto c = Channel::Open(root.options(), "/nope");
  ASSERT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(c.status().message(), HasSubstr("is the stack running"));
}

// Found by the channel fuzzer: a corrupt header's depth above 2^31 made the
// suggestion's bit_ceil undefined behaviour.
TEST(Channel, AnyQueueDepthIsRefusedWithASuggestionInRange) {
  for (uint32_t depth : {0u, 3u, 0x80000001u, 0xffffffffu}) {
    absl::Status s = Validate({.slot_size = 8, .queue_depth = depth,
                               .max_publishers = 1, .max_pinned = 0});
    ASSERT_FALSE(s.ok());
    const std::string m(s.message());
    EXPECT_THAT(m, ::testing::ContainsRegex("e.g. [0-9]+\\)"));
    EXPECT_THAT(m, ::testing::Not(HasSubstr("e.g. 0)")));
  }
}

TEST(Channel, ParamsMismatchOnOpenNamesBothSides) {
  ScopedRoot root;
  ASSERT_TRUE(Channel::OpenOrCreate(root.options(), "c", SmallParams()).ok());
  QueueParams other = SmallParams();
  other.queue_depth = 16;
  auto c = Channel::OpenOrCreate(root.options(), "c", other);
  ASSERT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(c.status().message(), HasSubstr("queue_depth=8"));
  EXPECT_THAT(c.status().message(), HasSubstr("queue_depth=16"));
}

TEST(Channel, MetadataMismatchOnOpenIsAnError) {
  ScopedRoot root;
  ASSERT_TRUE(
      Channel::OpenOrCreate(root.options(), "c", SmallParams(), Bytes("A")).ok());
  auto c = Channel::OpenOrCreate(root.options(), "c", SmallParams(), Bytes("B"));
  ASSERT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(c.status().message(), HasSubstr("different metadata"));
}

TEST(Channel, InvalidParamsAreRejectedWithTheValidRange) {
  ScopedRoot root;
  QueueParams p = SmallParams();
  p.queue_depth = 12;
  auto c = Channel::OpenOrCreate(root.options(), "c", p);
  ASSERT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("power of two"));
  EXPECT_THAT(c.status().message(), HasSubstr("16"));
  p = SmallParams();
  p.max_pinned = 65;
  EXPECT_THAT(Channel::OpenOrCreate(root.options(), "c", p).status().message(),
              HasSubstr("max_pinned 65"));
  p = SmallParams();
  p.slot_size = 0;
  EXPECT_THAT(Channel::OpenOrCreate(root.options(), "c", p).status().message(),
              HasSubstr("slot_size 0"));
}

TEST(Channel, NotAChannelFileIsDataLoss) {
  ScopedRoot root;
  ASSERT_TRUE(Channel::OpenOrCreate(root.options(), "c", SmallParams()).ok());
  std::string path = Channel::PathFor(root.options(), "c");
  // Bad magic.
  int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  uint64_t junk = 0x1234;
  ASSERT_EQ(::pwrite(fd, &junk, sizeof(junk), 0), 8);
  auto c = Channel::Open(root.options(), "c");
  EXPECT_EQ(c.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(c.status().message(), HasSubstr("not a tether channel"));
  ::close(fd);
  // Truncated.
  ASSERT_TRUE(Channel::Remove(root.options(), "c").ok());
  ASSERT_TRUE(Channel::OpenOrCreate(root.options(), "c", SmallParams()).ok());
  ASSERT_EQ(::truncate(path.c_str(), 1000), 0);
  c = Channel::Open(root.options(), "c");
  EXPECT_EQ(c.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(c.status().message(), HasSubstr("truncated or corrupt"));
  // Too small for a header.
  ASSERT_EQ(::truncate(path.c_str(), 10), 0);
  EXPECT_EQ(Channel::Open(root.options(), "c").status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(Channel, FileModeAndGroupAreApplied) {
  ScopedRoot root;
  root.options().mode = 0640;
  root.options().group = ::getegid();
  ASSERT_TRUE(Channel::OpenOrCreate(root.options(), "c", SmallParams()).ok());
  struct stat st;
  ASSERT_EQ(::stat(Channel::PathFor(root.options(), "c").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);  // not narrowed by the umask
  EXPECT_EQ(st.st_gid, ::getegid());
}

TEST(Channel, AGroupThatCannotBeSetIsAClearError) {
  ScopedRoot root;
  root.options().group = 4242;  // not ours (inside Bazel's sandbox, unmapped)
  auto c = Channel::OpenOrCreate(root.options(), "c", SmallParams());
  if (c.ok()) return;  // a real root may chown to any group
  EXPECT_THAT(c.status().message(), HasSubstr("group 4242"));
  EXPECT_THAT(*Channel::List(root.options()), ::testing::IsEmpty());
}

TEST(Channel, ListShowsChannelsWithTheirNames) {
  ScopedRoot root;
  ASSERT_TRUE(Channel::OpenOrCreate(root.options(), "/b/x", SmallParams()).ok());
  ASSERT_TRUE(Channel::OpenOrCreate(root.options(), "/a", SmallParams()).ok());
  ASSERT_TRUE(Channel::OpenOrCreate(root.options(), "50%", SmallParams()).ok());
  auto names = Channel::List(root.options());
  ASSERT_TRUE(names.ok());
  EXPECT_THAT(*names, ::testing::ElementsAre("/a", "/b/x", "50%"));
  ASSERT_TRUE(Channel::Remove(root.options(), "/a").ok());
  EXPECT_THAT(*Channel::List(root.options()),
              ::testing::ElementsAre("/b/x", "50%"));
}

TEST(Channel, ConcurrentCreatorsAgreeOnOneInitialisedChannel) {
  ScopedRoot root;
  constexpr int kProcs = 6;
  constexpr int kRounds = 20;
  QueueParams params = SmallParams();
  params.max_publishers = kProcs;
  for (int round = 0; round < kRounds; ++round) {
    std::string name = "race" + std::to_string(round);
    std::vector<pid_t> pids;
    for (int i = 0; i < kProcs; ++i) {
      pid_t pid = ::fork();
      ASSERT_GE(pid, 0);
      if (pid == 0) {
        auto c = Channel::OpenOrCreate(root.options(), name, params,
                                       Bytes("meta"));
        if (!c.ok()) ::_exit(1);
        // Every opener can publish at once: the channel was complete.
        auto pub = Publisher::Create(c->get());
        if (!pub.ok()) ::_exit(2);
        auto loan = (*pub)->Loan();
        std::memcpy(loan.data(), &i, sizeof(i));
        if ((*pub)->Send(sizeof(i)).status != SendStatus::kOk) ::_exit(3);
        ::_exit(0);
      }
      pids.push_back(pid);
    }
    for (pid_t pid : pids) {
      int status = 0;
      ASSERT_EQ(::waitpid(pid, &status, 0), pid);
      ASSERT_TRUE(WIFEXITED(status));
      ASSERT_EQ(WEXITSTATUS(status), 0) << "round " << round;
    }
    auto c = Channel::Open(root.options(), name);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ((*c)->Stats().next_queue_index, uint64_t{kProcs});
  }
  // No temporary files are left behind.
  auto names = Channel::List(root.options());
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(names->size(), size_t{kRounds});
}

TEST(Channel, PrefaultAndLockMemoryMapTheChannel) {
  ScopedRoot root;
  root.options().prefault = true;
  root.options().lock_memory = true;
  auto c = Channel::OpenOrCreate(root.options(), "c", SmallParams());
  if (!c.ok() && c.status().code() == absl::StatusCode::kPermissionDenied) {
    EXPECT_THAT(c.status().message(), HasSubstr("RLIMIT_MEMLOCK"));
    return;
  }
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_GT((*c)->Stats().file_size, 8u * 128u);
}

TEST(Channel, SizeIsSlotsPlusASmallFixedOverhead) {
  ScopedRoot root;
  QueueParams p{.slot_size = 1024, .queue_depth = 64, .max_publishers = 4,
                .max_pinned = 8};
  auto c = Channel::OpenOrCreate(root.options(), "c", p);
  ASSERT_TRUE(c.ok());
  const uint64_t slots = p.pool_size() * p.slot_size;
  const uint64_t overhead = (*c)->Stats().file_size - slots;
  // Data file: header + publisher registry (a line each) + ring + one
  // 64-byte header per slot. Reader-state file: header + pin registry (a
  // line each) + the sleeper registry (64 x 8 B) + a pin word per slot.
  EXPECT_EQ(overhead, 256u + 64u * 4 + 8u * 64 + 64u * p.pool_size() +
                          128u + 64u * 8 + 8u * 64 +
                          (8u * p.pool_size() + 63) / 64 * 64);
}

}  // namespace
}  // namespace tether::shm
