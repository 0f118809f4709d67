// Channel files: creation, opening, validation on open, permissions, listing,
// size.
#include "shm/channel.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shm/layout.h"
#include "shm/mounts.h"
#include "tests/shm/shm_test_util.h"

namespace tether::shm {
namespace {

using ::testing::HasSubstr;
using testing::Bytes;
using testing::ScopedRoot;
using testing::SmallParams;

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

// Another shape while a process uses the channel: refused, naming both
// sides and how to change it (removing the file under a live process
// would split the stack).
TEST(Channel, ParamsMismatchWhileInUseNamesBothSidesAndWhatToDo) {
  ScopedRoot root;
  auto user = Channel::OpenOrCreate(root.options(), "c", SmallParams());
  ASSERT_TRUE(user.ok());
  QueueParams other = SmallParams();
  other.queue_depth = 16;
  auto c = Channel::OpenOrCreate(root.options(), "c", other);
  ASSERT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(c.status().message(), HasSubstr("queue_depth=8"));
  EXPECT_THAT(c.status().message(), HasSubstr("queue_depth=16"));
  EXPECT_THAT(c.status().message(),
              HasSubstr("stop every process that uses it"));
  EXPECT_THAT(c.status().message(), HasSubstr("splits the stack"));
  EXPECT_THAT(c.status().message(), HasSubstr("tether clean --root"));
}

TEST(Channel, MetadataMismatchWhileInUseIsAnError) {
  ScopedRoot root;
  auto user =
      Channel::OpenOrCreate(root.options(), "c", SmallParams(), Bytes("A"));
  ASSERT_TRUE(user.ok());
  auto c = Channel::OpenOrCreate(root.options(), "c", SmallParams(), Bytes("B"));
  ASSERT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(c.status().message(),
              HasSubstr("channel c exists with different metadata"));
  EXPECT_THAT(c.status().message(),
              HasSubstr("stop every process that uses it"));
}

// A stopped stack's channel of another shape or metadata (a config or
// schema changed since) is made anew by the next creator: nobody has it
// open, so nothing splits. The refused open drops its own lock before it
// decides, or it would count itself as a user.
TEST(Channel, AnUnusedChannelOfAnotherShapeOrMetadataIsMadeAnew) {
  ScopedRoot root;
  ASSERT_TRUE(
      Channel::OpenOrCreate(root.options(), "c", SmallParams(), Bytes("A")).ok());
  QueueParams other = SmallParams();
  other.queue_depth = 16;
  auto reshaped =
      Channel::OpenOrCreate(root.options(), "c", other, Bytes("A"));
  ASSERT_TRUE(reshaped.ok()) << reshaped.status();
  EXPECT_TRUE((*reshaped)->created());
  EXPECT_EQ((*reshaped)->params().queue_depth, 16u);
  reshaped->reset();
  auto retyped = Channel::OpenOrCreate(root.options(), "c", other, Bytes("B"));
  ASSERT_TRUE(retyped.ok()) << retyped.status();
  EXPECT_TRUE((*retyped)->created());
  // One channel, with one reader-state file: the old ones are gone.
  auto names = Channel::List(root.options());
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(names->size(), 1u);
  EXPECT_TRUE((*retyped)->CheckConsistency().ok());
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
  EXPECT_THAT(c.status().message(), HasSubstr("the file was truncated"));
  EXPECT_THAT(c.status().message(), HasSubstr("tether clean --root"));
  // Grown.
  const uintmax_t right = [&] {
    EXPECT_TRUE(Channel::Remove(root.options(), "c").ok());
    EXPECT_TRUE(Channel::OpenOrCreate(root.options(), "c", SmallParams()).ok());
    return std::filesystem::file_size(path);
  }();
  ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(right + 4096)), 0);
  c = Channel::Open(root.options(), "c");
  EXPECT_EQ(c.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(c.status().message(), HasSubstr("the file was grown"));
  // Too small for a header.
  ASSERT_EQ(::truncate(path.c_str(), 10), 0);
  EXPECT_EQ(Channel::Open(root.options(), "c").status().code(),
            absl::StatusCode::kDataLoss);
}

// A header whose params no longer match their hash (a slot size changed
// in the file, as a hostile writer of the data file can): refused as
// corrupt, with the command that removes it.
TEST(Channel, AHeaderWithAnotherSlotSizeSaysHowToRecover) {
  ScopedRoot root;
  ASSERT_TRUE(Channel::OpenOrCreate(root.options(), "c", SmallParams()).ok());
  const std::string path = Channel::PathFor(root.options(), "c");
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  const uint32_t other_size = 2 * SmallParams().slot_size;
  ASSERT_EQ(::pwrite(fd, &other_size, sizeof(other_size),
                     offsetof(internal::ChannelHeader, slot_size)),
            4);
  ::close(fd);
  auto c = Channel::Open(root.options(), "c");
  ASSERT_EQ(c.status().code(), absl::StatusCode::kDataLoss) << c.status();
  EXPECT_THAT(c.status().message(), HasSubstr("header is corrupt"));
  EXPECT_THAT(c.status().message(),
              HasSubstr(Channel::CleanCommand(root.options())));
}

// An upgrade: a channel file another tether build made (another layout
// version) is refused while a process of that build maps it (holds its
// shared flock), saying what to do, and made anew by a creator once none
// does; a reader never re-creates it.
TEST(Channel, AnotherBuildsChannelIsMadeAnewOnceNobodyMapsIt) {
  ScopedRoot root;
  ASSERT_TRUE(Channel::OpenOrCreate(root.options(), "c", SmallParams()).ok());
  const std::string path = Channel::PathFor(root.options(), "c");
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  const uint32_t old_version = 3;
  ASSERT_EQ(::pwrite(fd, &old_version, sizeof(old_version),
                     offsetof(internal::ChannelHeader, layout_version)),
            4);
  // The other build's process maps it: nothing is removed.
  ASSERT_EQ(::flock(fd, LOCK_SH), 0);
  auto busy = Channel::OpenOrCreate(root.options(), "c", SmallParams());
  EXPECT_EQ(busy.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(busy.status().message(),
              HasSubstr("has layout version 3, this build uses"));
  EXPECT_THAT(busy.status().message(),
              HasSubstr("another tether build made it"));
  EXPECT_THAT(busy.status().message(),
              HasSubstr(Channel::CleanCommand(root.options())));
  ::close(fd);  // that process stops
  // A reader does not re-create it.
  EXPECT_EQ(Channel::Open(root.options(), "c").status().code(),
            absl::StatusCode::kFailedPrecondition);
  auto anew = Channel::OpenOrCreate(root.options(), "c", SmallParams());
  ASSERT_TRUE(anew.ok()) << anew.status();
  EXPECT_TRUE((*anew)->created());
  EXPECT_TRUE(Channel::Open(root.options(), "c").ok());
  // One data file and one reader-state file, as for any channel.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(
           root.root() + "/" + root.options().instance)) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 2);
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

// A channel made but then not mappable (here: mlock refused, with no
// RLIMIT_MEMLOCK to spare) is taken back: no file of it is left.
TEST(Channel, AChannelThatCannotBeMappedAfterCreationLeavesNoFile) {
  ScopedRoot root;
  root.options().lock_memory = true;
  const pid_t child = ::fork();
  if (child == 0) {
    const rlimit none{0, 0};
    if (::setrlimit(RLIMIT_MEMLOCK, &none) != 0) ::_exit(2);
    auto c = Channel::OpenOrCreate(root.options(), "/c", SmallParams());
    if (c.ok()) ::_exit(3);  // CAP_IPC_LOCK: mlock ignores the limit
    ::_exit(c.status().code() == absl::StatusCode::kPermissionDenied ? 0 : 4);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 3) {
    GTEST_SKIP() << "this process may mlock beyond RLIMIT_MEMLOCK";
  }
  ASSERT_EQ(WEXITSTATUS(status), 0);
  std::vector<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(
           root.root() + "/" + root.options().instance)) {
    left.push_back(e.path().filename().string());
  }
  EXPECT_THAT(left, ::testing::IsEmpty());
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
