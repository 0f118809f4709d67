// Channel files under races: an open during InUse's probe keeps its lock,
// RemoveIfUnused spares an open channel, an opener of a channel removed and
// made anew ends up on the new one, opens racing removal never see a corrupt
// channel, and concurrent creators agree on one initialised channel.
#include "shm/channel.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shm/publisher.h"
#include "tests/shm/shm_test_util.h"

namespace tether::shm {
namespace {

using testing::Bytes;
using testing::ScopedRoot;
using testing::SmallParams;

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

}  // namespace
}  // namespace tether::shm
