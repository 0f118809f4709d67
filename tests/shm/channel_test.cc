// Channel files: creation, opening, validation on open, permissions, listing,
// race-free creation and removal.
#include "shm/channel.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shm/layout.h"
#include "shm/mounts.h"
#include "shm/publisher.h"
#include "shm/reader.h"
#include "tests/shm/shm_test_util.h"

namespace tether::shm {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
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

// InUse probes with a moment's exclusive flock. A process that maps the
// channel in that moment must still end up holding its shared lock, or the
// channel looks unused (and tether clean would remove it under that
// process).
TEST(Channel, AnOpenDuringInUsesProbeStillHoldsItsLock) {
  ScopedRoot root;
  ASSERT_TRUE(Channel::OpenOrCreate(root.options(), "c", SmallParams()).ok());
  const std::string path = Channel::PathFor(root.options(), "c");
  const int probe = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(probe, 0);
  ASSERT_EQ(::flock(probe, LOCK_EX | LOCK_NB), 0);
  std::thread release([probe] {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ::close(probe);
  });
  auto opened = Channel::Open(root.options(), "c");
  release.join();
  ASSERT_TRUE(opened.ok()) << opened.status();
  auto busy = Channel::InUse(root.options(), "c");
  ASSERT_TRUE(busy.ok()) << busy.status();
  EXPECT_TRUE(*busy) << "the open gave up its shared lock";
  opened->reset();
  EXPECT_FALSE(*Channel::InUse(root.options(), "c"));
}

TEST(Channel, RemoveIfUnusedKeepsAnOpenChannelAndRemovesAnUnusedOne) {
  ScopedRoot root;
  auto c = Channel::OpenOrCreate(root.options(), "c", SmallParams());
  ASSERT_TRUE(c.ok()) << c.status();
  auto kept = Channel::RemoveIfUnused(root.options(), "c");
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_FALSE(*kept);
  EXPECT_TRUE(Channel::Open(root.options(), "c").ok());
  c->reset();
  auto removed = Channel::RemoveIfUnused(root.options(), "c");
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_TRUE(*removed);
  EXPECT_TRUE(absl::IsNotFound(Channel::Open(root.options(), "c").status()));
}

// A channel removed and made anew while a process was opening it (tether
// clean, then a launch): the opener must end up on the channel at the path,
// never on the removed file nobody else will open.
//
// The test holds the file's exclusive lock (as RemoveIfUnused does) while it
// replaces the file. An opener maps the data file (after opening both
// files), then retries its shared lock for at least 20 ms (200 tries,
// 100 us apart) and goes on unlocked. So an attempt tests the race only if
// the file was replaced after the opener mapped it (seen in /proc/self/maps)
// and within 15 ms of that; other attempts (a loaded machine) are
// inconclusive and tried again.
bool MapsInode(ino_t inode) {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    std::istringstream fields(line);
    std::string range, perms, offset, device;
    unsigned long long ino = 0;
    if (fields >> range >> perms >> offset >> device >> ino && ino == inode) {
      return true;
    }
  }
  return false;
}

TEST(Channel, AnOpenerOfARemovedChannelOpensTheOneMadeAfterIt) {
  using Clock = std::chrono::steady_clock;
  ScopedRoot root;
  const std::string path = Channel::PathFor(root.options(), "c");
  int conclusive = 0;
  for (int attempt = 0; attempt < 50 && conclusive < 3; ++attempt) {
    ASSERT_TRUE(Channel::OpenOrCreate(root.options(), "c", SmallParams()).ok());
    const int old_file = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(old_file, 0);
    struct stat old_stat;
    ASSERT_EQ(::fstat(old_file, &old_stat), 0);
    ASSERT_EQ(::flock(old_file, LOCK_EX | LOCK_NB), 0);
    absl::StatusOr<std::unique_ptr<Channel>> opened;
    std::thread opener([&] { opened = Channel::Open(root.options(), "c"); });
    const Clock::time_point give_up = Clock::now() + std::chrono::seconds(5);
    bool mapped = false;
    while (!(mapped = MapsInode(old_stat.st_ino)) && Clock::now() < give_up) {
      std::this_thread::yield();
    }
    const Clock::time_point mapped_at = Clock::now();
    const absl::Status removed = Channel::Remove(root.options(), "c");
    auto fresh = Channel::OpenOrCreate(root.options(), "c", SmallParams());
    const Clock::duration swap = Clock::now() - mapped_at;
    ::close(old_file);
    opener.join();
    ASSERT_TRUE(removed.ok()) << removed;
    ASSERT_TRUE(fresh.ok()) << fresh.status();
    if (mapped && swap < std::chrono::milliseconds(15)) {
      ++conclusive;
      ASSERT_TRUE(opened.ok()) << opened.status();
      // One message through the new file: the opener sees it.
      auto pub = Publisher::Create(fresh->get());
      ASSERT_TRUE(pub.ok()) << pub.status();
      ASSERT_FALSE((*pub)->Loan().empty());
      ASSERT_EQ((*pub)->Send(8).status, SendStatus::kOk);
      EXPECT_EQ((*opened)->Stats().next_queue_index, 1u)
          << "the opener kept the removed file (attempt " << attempt << ")";
    }
    opened = absl::UnknownError("next attempt");
    fresh->reset();
    ASSERT_TRUE(Channel::Remove(root.options(), "c").ok());
  }
  EXPECT_GT(conclusive, 0) << "no attempt replaced the file within 15 ms of "
                              "the opener's mapping it";
}

// Opens racing removals and re-creations of the channel (tether clean and a
// restarted node) find the channel or find it missing, and nothing else:
// an open that lost its data file's name, or whose reader-state file
// vanished because the channel was removed between its two opens, tries
// again; it never says DataLoss ("removed by hand?") about a healthy
// channel.
TEST(Channel, OpensRacingRemovalAndRecreationNeverSeeACorruptChannel) {
  using Clock = std::chrono::steady_clock;
  ScopedRoot root;
  std::atomic<bool> stop{false};
  std::thread churn([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      // Made, closed, removed: its own failures show as the opener's.
      (void)Channel::OpenOrCreate(root.options(), "c", SmallParams());
      (void)Channel::Remove(root.options(), "c");
    }
  });
  int opened = 0, missing = 0;
  std::vector<std::string> other;
  const Clock::time_point end = Clock::now() + std::chrono::seconds(1);
  while (Clock::now() < end || opened == 0) {
    absl::StatusOr<std::unique_ptr<Channel>> c =
        Channel::Open(root.options(), "c");
    if (c.ok()) {
      ++opened;
    } else if (absl::IsNotFound(c.status())) {
      ++missing;
    } else if (other.size() < 5) {
      other.push_back(c.status().ToString());
    }
    if (Clock::now() > end + std::chrono::seconds(10)) break;
  }
  stop = true;
  churn.join();
  EXPECT_THAT(other, ::testing::IsEmpty());
  EXPECT_GT(opened, 0);
  RecordProperty("opened", opened);
  RecordProperty("missing", missing);
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

// Large channels on huge pages (channel_files.h): a data file of 2 MiB or
// more is a whole number of them, and every mapping of it maps them so.

constexpr uint64_t kHuge = 2u << 20;

QueueParams LargeParams() {  // 7 slots of 1 MiB: a camera channel
  return {.slot_size = 1u << 20, .queue_depth = 4, .max_publishers = 1,
          .max_pinned = 2};
}

// Bytes of `path` this process maps with PMD (huge page) entries, over all
// its mappings of the file. By inode: the creator maps the file under the
// private name it built it as (since unlinked).
uint64_t HugeMappedBytes(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return 0;
  const std::string ino = std::to_string(st.st_ino);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool ours = false;
  uint64_t kib = 0;
  while (std::getline(smaps, line)) {
    std::istringstream in(line);
    std::string first;
    in >> first;
    if (first.find('-') != std::string::npos && first.back() != ':') {
      std::string perms, offset, dev, inode;
      in >> perms >> offset >> dev >> inode;
      ours = inode == ino;
    } else if (ours && first == "ShmemPmdMapped:") {
      uint64_t v = 0;
      in >> v;
      kib += v;
    }
  }
  return kib * 1024;
}

// 0 if this kernel collapses a tmpfs file in `dir` into huge pages, else
// madvise's errno: a probe of its own, independent of the code under test.
int ProbeCollapse(const std::string& dir) {
  const std::string path = dir + "/probe";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return errno;
  ::unlink(path.c_str());
  int err = 0;
  void* r = ::mmap(nullptr, 2 * kHuge, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  char* at = reinterpret_cast<char*>(
      (reinterpret_cast<uintptr_t>(r) + kHuge - 1) & ~(kHuge - 1));
  if (::ftruncate(fd, kHuge) != 0 ||
      ::mmap(at, kHuge, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd,
             0) == MAP_FAILED) {
    err = errno;
  } else {
    std::memset(at, 1, kHuge);
    if (::madvise(at, kHuge, 25 /* MADV_COLLAPSE */) != 0) err = errno;
  }
  ::munmap(r, 2 * kHuge);
  ::close(fd);
  return err;
}

std::string DataPath(const ScopedRoot& root, const char* name) {
  return root.root() + "/test/" + name;
}

TEST(ChannelHugePages, ALargeDataFileIsAWholeNumberOfHugePages) {
  ScopedRoot root;
  auto big = Channel::OpenOrCreate(root.options(), "big", LargeParams());
  ASSERT_TRUE(big.ok()) << big.status();
  struct stat st;
  ASSERT_EQ(::stat(DataPath(root, "big").c_str(), &st), 0);
  EXPECT_EQ(st.st_size % kHuge, 0u) << st.st_size;
  EXPECT_GE(uint64_t(st.st_size), LargeParams().pool_size() << 20);
  EXPECT_LT(uint64_t(st.st_size), (LargeParams().pool_size() << 20) + kHuge);
  // A small channel keeps its exact size (SizeIsSlotsPlus... above).
  auto small = Channel::OpenOrCreate(root.options(), "small", SmallParams());
  ASSERT_TRUE(small.ok()) << small.status();
  ASSERT_EQ(::stat(DataPath(root, "small").c_str(), &st), 0);
  EXPECT_LT(uint64_t(st.st_size), 64u << 10);
}

TEST(ChannelHugePages, EveryMappingOfALargeChannelUsesHugePages) {
  ScopedRoot root;
  root.options().prefault = true;  // every page mapped now, to be counted
  // Made first, so the probe's file has a folder to live in.
  auto made = Channel::OpenOrCreate(root.options(), "cam", LargeParams());
  ASSERT_TRUE(made.ok()) << made.status();
  if (const int err = ProbeCollapse(root.root() + "/test"); err != 0) {
    GTEST_SKIP() << "this kernel does not collapse tmpfs files into huge "
                    "pages (MADV_COLLAPSE: "
                 << std::strerror(err) << ")";
  }
  const std::string path = DataPath(root, "cam");
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  // The creator's mapping, then a second one (an opener's): every byte.
  EXPECT_EQ(HugeMappedBytes(path), uint64_t(st.st_size));
  auto opened = Channel::Open(root.options(), "cam");
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(HugeMappedBytes(path), 2 * uint64_t(st.st_size));
  // And the channel works as before: a message through it, read in place.
  auto pub = Publisher::Create(made->get());
  ASSERT_TRUE(pub.ok()) << pub.status();
  auto reader = Reader::Create(opened->get());
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::span<std::byte> loan = (*pub)->Loan();
  ASSERT_EQ(loan.size(), LargeParams().slot_size);
  for (size_t i = 0; i < loan.size(); ++i) loan[i] = std::byte(i * 7);
  ASSERT_EQ((*pub)->Send(loan.size()).status, SendStatus::kOk);
  MessageView m;
  ASSERT_EQ((*reader)->Next(&m), ReadStatus::kOk);
  ASSERT_EQ(m.data.size(), LargeParams().slot_size);
  for (size_t i = 0; i < m.data.size(); i += 4093) {
    ASSERT_EQ(m.data[i], std::byte(i * 7)) << i;
  }
}

TEST(ChannelHugePages, OffTheFileKeepsItsSmallPages) {
  ScopedRoot root;
  root.options().prefault = true;
  root.options().huge_pages = false;
  auto c = Channel::OpenOrCreate(root.options(), "cam", LargeParams());
  ASSERT_TRUE(c.ok()) << c.status();
  std::optional<MountFacts> m = MountOf(root.root());
  ASSERT_TRUE(m.has_value());
  std::ifstream thp("/sys/kernel/mm/transparent_hugepage/shmem_enabled");
  std::string mode;
  std::getline(thp, mode);
  if ((m->huge != "never" && !m->huge.empty()) ||
      mode.find("[force]") != std::string::npos ||
      mode.find("[always]") != std::string::npos) {
    GTEST_SKIP() << m->point << " gives tmpfs files huge pages by itself";
  }
  EXPECT_EQ(HugeMappedBytes(DataPath(root, "cam")), 0u);
}

}  // namespace
}  // namespace tether::shm
