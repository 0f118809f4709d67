// tether clean as a library and through its own parser, over real
// channels in a unique shm root: what it removes and keeps (stale and live
// channels, temporary and companion files, files of another layout, junk),
// corrupt and damaged channels decided by who still uses them, and the
// advice it gives when it keeps one.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shm/channel_access.h"
#include "tests/tools/channel_commands_test_fixture.h"
#include "tools/clean.h"
#include "tools/cli.h"
#include "transport/channel_handle.h"
#include "transport/typed_endpoints.h"

namespace tether::tools {
namespace {

using testing::ChannelCommandsTest;
using ::testing::HasSubstr;
using ::testing::Not;

// A child process registers a publisher and dies without deregistering.
void PublishFromDyingChild(transport::ChannelHandle* ch) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto pub = transport::RawPublisher::Create(ch);
    ::_exit(pub.ok() ? 0 : 1);  // no destructor: registration left behind
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

pid_t DeadPid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  return child;
}

TEST_F(ChannelCommandsTest, CleanRemovesStaleKeepsLive) {
  auto stale = MakeChannel("/stale");
  PublishFromDyingChild(stale.get());
  EXPECT_EQ(stale->stats().publishers, 1);  // not yet swept
  stale.reset();  // an open handle, even a tool's, keeps a channel
  auto live = MakeChannel("/live");
  auto live_pub = transport::RawPublisher::Create(live.get());
  ASSERT_TRUE(live_pub.ok());
  const std::string dir = root_.root() + "/test/";
  const std::string dead_tmp =
      ".%2Fx.tmp." + std::to_string(DeadPid()) + ".0";
  const std::string live_tmp = ".%2Fy.tmp." + std::to_string(::getpid()) + ".0";
  std::ofstream(dir + dead_tmp) << "x";
  std::ofstream(dir + live_tmp) << "x";

  // Dry run: reports, changes nothing.
  auto dry = CleanInstance(root_.options(), /*dry_run=*/true);
  ASSERT_TRUE(dry.ok()) << dry.status();
  std::string text = FormatCleanReport(*dry, true);
  EXPECT_THAT(text, HasSubstr("would remove /stale"));
  EXPECT_THAT(text, HasSubstr("would remove " + dead_tmp));
  EXPECT_EQ(shm::Channel::List(root_.options())->size(), 2u);

  auto report = CleanInstance(root_.options(), /*dry_run=*/false);
  ASSERT_TRUE(report.ok()) << report.status();
  text = FormatCleanReport(*report, false);
  EXPECT_THAT(text, HasSubstr("removed /stale: no live publisher"));
  EXPECT_THAT(text, HasSubstr("/live: kept: in use by 1 live publisher"));
  EXPECT_THAT(text, HasSubstr("removed " + dead_tmp));
  EXPECT_THAT(text, HasSubstr(live_tmp + ": kept: temporary file of live"));
  EXPECT_THAT(text, Not(HasSubstr("empty directory")));
  EXPECT_EQ(*shm::Channel::List(root_.options()),
            std::vector<std::string>{"/live"});
  EXPECT_NE(::access((dir + live_tmp).c_str(), F_OK), -1);
  EXPECT_EQ(::access((dir + dead_tmp).c_str(), F_OK), -1);
  EXPECT_EQ(live->stats().publishers, 1);
}

TEST_F(ChannelCommandsTest, CleanKeepsAChannelAnUnregisteredProcessHasOpen) {
  auto open = MakeChannel("/watched");  // no publisher, no pinning reader
  auto report = CleanInstance(root_.options(), /*dry_run=*/false);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_THAT(FormatCleanReport(*report, false),
              HasSubstr("/watched: kept: a process has it open"));
  EXPECT_EQ(shm::Channel::List(root_.options())->size(), 1u);
}

TEST_F(ChannelCommandsTest, CleanRemovesAFileOfAnotherLayoutNobodyMaps) {
  const std::string dir = root_.root() + "/test/";
  ASSERT_EQ(std::system(("mkdir -p " + dir).c_str()), 0);
  // What an older tether left: not a channel this build can open.
  std::ofstream(dir + "%2Fold") << std::string(4096, 'x');
  auto report = CleanInstance(root_.options(), /*dry_run=*/false,
                              /*force=*/true);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_THAT(FormatCleanReport(*report, false),
              HasSubstr("removed /old: cannot open"));
  EXPECT_EQ(::access((dir + "%2Fold").c_str(), F_OK), -1);
}

TEST_F(ChannelCommandsTest, CleanRemovesEmptiedInstanceDirectory) {
  auto stale = MakeChannel("/stale");
  stale.reset();
  auto report = CleanInstance(root_.options(), false);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->directory_removed);
  EXPECT_THAT(FormatCleanReport(*report, false),
              HasSubstr("removed empty directory"));
  EXPECT_EQ(::access((root_.root() + "/test").c_str(), F_OK), -1);
  auto again = CleanInstance(root_.options(), false);
  ASSERT_TRUE(again.ok());
  EXPECT_THAT(FormatCleanReport(*again, false), HasSubstr("nothing to clean"));
}

// A file about a channel (the net bridge's forwarding cursor) stays while
// its channel does and goes with it; the folder goes when nothing is left.
TEST_F(ChannelCommandsTest, CleanRemovesAChannelsCompanionFileWithTheChannel) {
  auto stale = MakeChannel("/stale");
  stale.reset();
  auto live = MakeChannel("/live");
  auto live_pub = transport::RawPublisher::Create(live.get());
  ASSERT_TRUE(live_pub.ok());
  const std::string stale_cursor = shm::Channel::CompanionPathFor(
      root_.options(), "/stale", "net-cursor", "robot/1");
  const std::string live_cursor = shm::Channel::CompanionPathFor(
      root_.options(), "/live", "net-cursor", "robot");
  std::ofstream(stale_cursor) << "x";
  std::ofstream(live_cursor) << "x";
  ASSERT_EQ(shm::Channel::CompanionOf(
                stale_cursor.substr(stale_cursor.rfind('/') + 1)),
            "/stale");
  EXPECT_EQ(shm::Channel::CompanionOf(".%2Fx.tmp.12.0"), std::nullopt);
  EXPECT_EQ(*shm::Channel::List(root_.options()),
            (std::vector<std::string>{"/live", "/stale"}));

  auto dry = CleanInstance(root_.options(), /*dry_run=*/true);
  ASSERT_TRUE(dry.ok()) << dry.status();
  EXPECT_THAT(FormatCleanReport(*dry, true),
              HasSubstr("belonged to channel /stale, which is gone"));
  EXPECT_EQ(::access(stale_cursor.c_str(), F_OK), 0);

  auto report = CleanInstance(root_.options(), /*dry_run=*/false);
  ASSERT_TRUE(report.ok()) << report.status();
  const std::string text = FormatCleanReport(*report, false);
  EXPECT_THAT(text, HasSubstr("belonged to channel /stale, which is gone"));
  EXPECT_THAT(text, HasSubstr("kept: belongs to channel /live, which stays"));
  EXPECT_EQ(::access(stale_cursor.c_str(), F_OK), -1);
  EXPECT_EQ(::access(live_cursor.c_str(), F_OK), 0);

  live_pub->reset();
  live.reset();
  report = CleanInstance(root_.options(), /*dry_run=*/false);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(::access(live_cursor.c_str(), F_OK), -1);
  EXPECT_TRUE(report->directory_removed) << FormatCleanReport(*report, false);
}

// Where the ring of channel `name` lies in its file, in bytes. Opening the
// channel sweeps it: ask before a process dies whose registration the test
// wants left behind.
struct FileBytes {
  uint64_t begin = 0, end = 0;
};
FileBytes RingOf(const shm::ChannelOptions& options, const std::string& name) {
  auto c = shm::Channel::Open(options, name);
  EXPECT_TRUE(c.ok()) << c.status();
  if (!c.ok()) return {};
  using Access = shm::internal::ChannelAccess;
  const auto* base = reinterpret_cast<const std::byte*>(Access::header(**c));
  auto at = [base](const void* p) {
    return static_cast<uint64_t>(reinterpret_cast<const std::byte*>(p) - base);
  };
  return {at(Access::ring_entry(**c, 0)),
          at(Access::ring_entry(**c, (*c)->params().queue_depth - 1)) + 8};
}

// `dd if=/dev/urandom of=<file> conv=notrunc` over `bytes` of channel
// `name`'s file: through the file, no channel opened (so nothing swept).
void WriteGarbage(const shm::ChannelOptions& options, const std::string& name,
                  FileBytes bytes) {
  std::mt19937_64 rng(2000);
  std::vector<uint64_t> words((bytes.end - bytes.begin + 7) / 8);
  for (uint64_t& w : words) w = rng();
  const std::string path = shm::Channel::PathFor(options, name);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0) << path;
  EXPECT_EQ(::pwrite(fd, words.data(), bytes.end - bytes.begin,
                     static_cast<off_t>(bytes.begin)),
            static_cast<ssize_t>(bytes.end - bytes.begin));
  ::close(fd);
}

// `tether clean` with these words, through the command's own parser.
int RunClean(const std::vector<std::string>& words, std::string* out) {
  absl::StatusOr<ParsedArgs> args = CleanParser().Parse(words);
  EXPECT_TRUE(args.ok()) << args.status();
  if (!args.ok()) return -1;
  std::ostringstream o, e;
  const int code = RunCleanCommand(*args, o, e);
  *out = o.str() + e.str();
  return code;
}

// The tester's case: a corrupt ring, and its only publisher killed. A sweep
// reclaims nothing from a corrupt channel, so the dead publisher stays
// registered; clean must say "corrupt", not "in use by 1 live publisher",
// and remove it, since nobody alive uses it.
TEST_F(ChannelCommandsTest, CleanRemovesACorruptChannelWhoseProcessesAreDead) {
  auto imu = MakeChannel("/robot/imu", 16, /*publishers=*/1);
  const FileBytes ring = RingOf(root_.options(), "/robot/imu");
  PublishFromDyingChild(imu.get());
  EXPECT_EQ(imu->stats().publishers, 1);  // not swept
  imu.reset();
  WriteGarbage(root_.options(), "/robot/imu", ring);
  const std::vector<std::string> where = {"--root", root_.root(),
                                          "--instance", "test"};

  std::vector<std::string> dry = where;
  dry.push_back("--dry-run");
  std::string text;
  EXPECT_EQ(RunClean(dry, &text), kExitOk) << text;
  EXPECT_THAT(text, HasSubstr("would remove /robot/imu: corrupt (ring "
                              "position "));
  EXPECT_THAT(text, HasSubstr("; no live process uses it (its registered "
                              "process(es) "));
  EXPECT_THAT(text, HasSubstr(" are dead)"));
  EXPECT_THAT(text, Not(HasSubstr("live publisher")));
  EXPECT_EQ(shm::Channel::List(root_.options())->size(), 1u);

  EXPECT_EQ(RunClean(where, &text), kExitOk) << text;
  EXPECT_THAT(text, HasSubstr("removed /robot/imu: corrupt (ring position "));
  EXPECT_TRUE(shm::Channel::List(root_.options())->empty());
  // What a fresh launch then does: a new, healthy channel.
  auto fresh = MakeChannel("/robot/imu", 16, 1);
  ASSERT_NE(fresh, nullptr);
  EXPECT_FALSE(fresh->corrupt());
  EXPECT_TRUE(transport::RawPublisher::Create(fresh.get()).ok());
}

TEST_F(ChannelCommandsTest, CleanNeverRemovesACorruptChannelALiveProcessUses) {
  auto published = MakeChannel("/published");
  auto live_pub = transport::RawPublisher::Create(published.get());
  ASSERT_TRUE(live_pub.ok()) << live_pub.status();
  auto opened = MakeChannel("/opened");  // open, registered nowhere
  WriteGarbage(root_.options(), "/published",
               RingOf(root_.options(), "/published"));
  WriteGarbage(root_.options(), "/opened", RingOf(root_.options(), "/opened"));

  std::string text;
  EXPECT_EQ(RunClean({"--root", root_.root(), "--instance", "test"}, &text),
            kExitFailure)
      << text;
  const std::string again = "then run `tether clean --root " + root_.root() +
                            " --instance test` again to remove it";
  EXPECT_THAT(text, HasSubstr("/published: kept: corrupt (ring position "));
  EXPECT_THAT(text, HasSubstr(" and in use by live process(es) " +
                              std::to_string(::getpid()) +
                              ": stop them (stop the stack), " + again));
  EXPECT_THAT(text, HasSubstr("/opened: kept: corrupt (ring position "));
  EXPECT_THAT(text, HasSubstr(" and a process has it open (an unpinned "
                              "reader or a tool?): stop it, " + again));
  EXPECT_EQ(shm::Channel::List(root_.options())->size(), 2u);
  // --force is about unreadable maps, never about a live user.
  auto forced = CleanInstance(root_.options(), false, /*force=*/true);
  ASSERT_TRUE(forced.ok()) << forced.status();
  for (const CleanEntry& e : forced->entries) {
    EXPECT_TRUE(e.corrupt) << e.name;
    EXPECT_FALSE(e.removed) << e.name;
  }
  EXPECT_EQ(shm::Channel::List(root_.options())->size(), 2u);
}

// The runtime attacker's damaged files: a channel this build made, then
// truncated, grown, its magic zeroed, its slot size changed. None opens
// any more, and /proc/<pid>/maps of other users may be unreadable (here
// even root's are), so the maps scan cannot tell whether a process maps
// them; the header says the flock can, and clean decides by it: kept (exit
// 1) while a process that opened the channel before the damage still has
// it, removed without --force once it is gone.
TEST_F(ChannelCommandsTest, CleanDecidesDamagedChannelsByTheirLock) {
  using Header = shm::internal::ChannelHeader;
  const auto damage = [&](const std::string& name,
                          const std::function<void(int fd)>& how) {
    const std::string path = shm::Channel::PathFor(root_.options(), name);
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    ASSERT_GE(fd, 0) << path;
    how(fd);
    ::close(fd);
  };
  const auto poke = [](int fd, size_t offset, uint64_t value, size_t bytes) {
    EXPECT_EQ(::pwrite(fd, &value, bytes, static_cast<off_t>(offset)),
              static_cast<ssize_t>(bytes));
  };
  const std::vector<std::string> names = {"/truncated", "/grown",
                                          "/zeroed_magic", "/slot_size"};
  std::vector<std::unique_ptr<transport::ChannelHandle>> users;
  for (const std::string& n : names) users.push_back(MakeChannel(n));
  damage("/truncated", [](int fd) { EXPECT_EQ(::ftruncate(fd, 4096), 0); });
  damage("/grown", [](int fd) {
    struct stat st;
    ASSERT_EQ(::fstat(fd, &st), 0);
    EXPECT_EQ(::ftruncate(fd, st.st_size + 4096), 0);
  });
  damage("/zeroed_magic",
         [&](int fd) { poke(fd, offsetof(Header, magic), 0, 8); });
  damage("/slot_size",
         [&](int fd) { poke(fd, offsetof(Header, slot_size), 123456, 4); });
  for (const std::string& n : names) {
    EXPECT_FALSE(shm::Channel::Open(root_.options(), n).ok()) << n;
    EXPECT_TRUE(shm::Channel::LockTellsUse(root_.options(), n)) << n;
  }

  const std::vector<std::string> where = {"--root", root_.root(),
                                          "--instance", "test"};
  std::string text;
  EXPECT_EQ(RunClean(where, &text), kExitFailure) << text;
  for (const std::string& n : names) {
    EXPECT_THAT(text, HasSubstr(n + ": kept: cannot open ("));
  }
  EXPECT_THAT(text, Not(HasSubstr("maps are unreadable")));
  EXPECT_EQ(shm::Channel::List(root_.options())->size(), names.size());

  users.clear();  // the processes that used them stopped
  std::vector<std::string> dry = where;
  dry.push_back("--dry-run");
  EXPECT_EQ(RunClean(dry, &text), kExitOk) << text;
  EXPECT_EQ(shm::Channel::List(root_.options())->size(), names.size());
  EXPECT_EQ(RunClean(where, &text), kExitOk) << text;
  for (const std::string& n : names) {
    EXPECT_THAT(text, HasSubstr("removed " + n + ": cannot open ("));
  }
  EXPECT_TRUE(shm::Channel::List(root_.options())->empty());
  // Their reader-state files went with them: the folder is empty.
  EXPECT_THAT(text, HasSubstr("removed empty directory"));
}

// A file no header vouches for (junk where a channel's file would be) is
// decided by the maps scan: removed where every process's maps can be
// read, kept with exit status 1 and the --force advice where some cannot.
TEST_F(ChannelCommandsTest, CleanOfJunkSaysWhetherItRemovedIt) {
  const std::string dir = root_.root() + "/test/";
  ASSERT_EQ(std::system(("mkdir -p " + dir).c_str()), 0);
  std::ofstream(dir + "%2Fjunk") << std::string(4096, '\0');
  EXPECT_FALSE(shm::Channel::LockTellsUse(root_.options(), "/junk"));
  std::string text;
  const int code =
      RunClean({"--root", root_.root(), "--instance", "test"}, &text);
  const bool gone = ::access((dir + "%2Fjunk").c_str(), F_OK) != 0;
  if (gone) {
    EXPECT_EQ(code, kExitOk) << text;
    EXPECT_THAT(text, HasSubstr("removed /junk: cannot open ("));
  } else {
    EXPECT_EQ(code, kExitFailure) << text;
    EXPECT_THAT(text, HasSubstr("/junk: kept: cannot open ("));
    EXPECT_THAT(text, HasSubstr("--force removes it"));
  }
}


}  // namespace
}  // namespace tether::tools
