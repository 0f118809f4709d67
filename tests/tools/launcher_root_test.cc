// What only real root can check (the target is tagged no-sandbox: Bazel's
// sandbox is a user namespace where setuid to other users, SCHED_FIFO and
// mount fail): a node runs as the configured user, with the configured
// real-time policy, priority and CPUs, and still dies with a SIGKILLed
// launcher after its user switch (which clears the parent-death signal
// until re-armed); the folders a launcher makes for a group stack let
// another user of the group list and read its channels; a stack that fits
// its filesystem only without the launcher's status channel is refused
// before anything is made. Skipped when not root.
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shm/channel.h"
#include "shm/publisher.h"
#include "shm/reader.h"
#include "tests/shm/multi_user_test.h"
#include "tests/shm/shm_test_util.h"
#include "tests/tools/json_test_parser.h"
#include "tests/tools/launch_test_util.h"
#include "tests/util/scoped_tmpfs.h"
#include "tools/launcher.h"
#include "tools/node_process.h"
#include "tools/status_publisher.h"
#include "transport/channel_handle.h"

extern char** environ;

namespace tether::tools {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::ProcessGone;
using testing::ReadFile;
using testing::ShellNode;
using testing::StackJson;
using testing::WaitUntil;
using testing::WriteFile;
using tether::testing::RunAsNobody;
using tether::testing::ScopedGroup;
using tether::testing::ScopedTmpfs;

constexpr milliseconds kGenerous{10000};

// Root, and a "nobody" account to switch to.
std::optional<UserAccount> Nobody() {
  if (::geteuid() != 0) return std::nullopt;
  absl::StatusOr<UserAccount> nobody = LookUpUser("nobody");
  if (!nobody.ok()) return std::nullopt;
  return *nobody;
}

// Runs a stack whose nodes all end by themselves (within a bound, so a
// starved node cannot hang the test); returns its output.
std::string RunToEnd(const std::string& stack_json, std::string* err_text) {
  shm::testing::ScopedRoot root;
  const std::string dir = testing::MakeTempDir();
  WriteFile(dir + "/stack.json", stack_json);
  LaunchOptions options;
  options.stack_path = dir + "/stack.json";
  options.channels = root.options();
  options.working_directory = "/";  // Readable by any user.
  options.base_env = {"PATH=/usr/bin:/bin"};
  options.duration = kGenerous;
  std::ostringstream out, err;
  absl::StatusOr<std::unique_ptr<Launcher>> launcher =
      Launcher::Create(options, nullptr, out, err);
  EXPECT_TRUE(launcher.ok()) << launcher.status();
  if (!launcher.ok()) return "";
  const Launcher::Result result = (*launcher)->Run();
  EXPECT_FALSE(result.stop_requested) << "the nodes did not end in time";
  *err_text = err.str();
  return out.str();
}

TEST(LauncherAsRoot, RunsANodeAsTheConfiguredUser) {
  const std::optional<UserAccount> nobody = Nobody();
  if (!nobody) GTEST_SKIP() << "needs root and a user named nobody";
  std::string err;
  const std::string out = RunToEnd(
      StackJson({}, {ShellNode("as-nobody",
                               "echo \"uid=$(id -u) gid=$(id -g) user=$USER "
                               "home=$HOME\"",
                               R"(, "user": "nobody")")}),
      &err);
  EXPECT_THAT(out, HasSubstr("[as-nobody] uid=" + std::to_string(nobody->uid) +
                             " gid=" + std::to_string(nobody->gid) +
                             " user=nobody home=" + nobody->home + "\n"))
      << err;
}

// A program the node's user cannot reach (a folder above it is closed to
// them, as /root is) is explained as that, not as a file to chmod +x.
TEST(LauncherAsRoot, AProgramBehindAFolderTheUserCannotEnterSaysWhichFolder) {
  const std::optional<UserAccount> nobody = Nobody();
  if (!nobody) GTEST_SKIP() << "needs root and a user named nobody";
  // Under /tmp, which everyone may enter (the test's own folder may be
  // under /root, itself closed to nobody).
  char top[] = "/tmp/tether-closed-XXXXXX";
  ASSERT_NE(::mkdtemp(top), nullptr);
  ASSERT_EQ(::chmod(top, 0755), 0);
  struct RemoveAll {
    std::string path;
    ~RemoveAll() { std::filesystem::remove_all(path); }
  } cleanup{top};
  const std::string dir = std::string(top) + "/closed";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  const std::string program = dir + "/prog";
  std::filesystem::copy_file("/bin/true", program);
  ASSERT_EQ(::chmod(program.c_str(), 0755), 0);
  std::string err;
  const std::string out = RunToEnd(
      StackJson({}, {"{\"name\": \"locked\", \"command\": \"" + program +
                     "\", \"user\": \"nobody\"}"}),
      &err);
  EXPECT_THAT(out + err, HasSubstr("user nobody may not enter the folder " + dir))
      << out << err;
  EXPECT_THAT(out + err, Not(HasSubstr("chmod +x"))) << out << err;
}

TEST(LauncherAsRoot, AppliesRealtimePolicyPriorityAndCpus) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  // Can this machine give SCHED_FIFO at all (a container may not)? A high
  // priority, so that other real-time work on a shared machine cannot
  // starve the node.
  const pid_t probe = ::fork();
  if (probe == 0) {
    sched_param p{};
    p.sched_priority = 1;
    ::_exit(::sched_setscheduler(0, SCHED_FIFO, &p) == 0 ? 0 : 1);
  }
  int status = 0;
  ::waitpid(probe, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    GTEST_SKIP() << "SCHED_FIFO is not available here even as root";
  }
  std::string err;
  const std::string out = RunToEnd(
      StackJson({},
                {ShellNode("rt", "chrt -p $$; taskset -cp $$",
                           R"(, "cpus": [0], "scheduling": {"policy": "fifo",)"
                           R"( "priority": 98, "realtime": "required"})")}),
      &err);
  EXPECT_THAT(out, HasSubstr("started rt (pid "));
  EXPECT_THAT(out, HasSubstr("CPU 0, SCHED_FIFO 98)"));
  EXPECT_THAT(out, HasSubstr("current scheduling policy: SCHED_FIFO\n"));
  EXPECT_THAT(out, HasSubstr("current scheduling priority: 98\n"));
  EXPECT_THAT(out, HasSubstr("current affinity list: 0\n")) << err;
}

TEST(LauncherAsRoot, NodeOfAnotherUserDiesWithASigkilledLauncher) {
  const std::optional<UserAccount> nobody = Nobody();
  if (!nobody) GTEST_SKIP() << "needs root and a user named nobody";
  shm::testing::ScopedRoot root;
  const std::string dir = testing::MakeTempDir();
  WriteFile(dir + "/stack.json",
            StackJson({}, {ShellNode("n", "exec sleep 30",
                                     R"(, "user": "nobody")")}));
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  const std::string tether =
      srcdir != nullptr && workspace != nullptr
          ? std::string(srcdir) + "/" + workspace + "/tools/tether"
          : "tools/tether";
  std::vector<std::string> args = {
      tether,   "launch",        dir + "/stack.json",
      "--root", root.root(),     "--workdir",
      "/",      "--status-json", dir + "/status.json"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, (dir + "/out").c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t launcher = 0;
  ASSERT_EQ(posix_spawn(&launcher, tether.c_str(), &actions, nullptr,
                        argv.data(), environ),
            0);
  posix_spawn_file_actions_destroy(&actions);

  pid_t node = 0;
  EXPECT_TRUE(WaitUntil(
      [&] {
        absl::StatusOr<test::JsonValue> json =
            test::ParseJson(ReadFile(dir + "/status.json"));
        if (!json.ok()) return false;
        const test::JsonValue& n = json->Find("nodes")->array.at(0);
        if (n.Find("state")->string != "running") return false;
        node = static_cast<pid_t>(n.Find("pid")->number);
        return true;
      },
      kGenerous))
      << ReadFile(dir + "/out");
  ASSERT_EQ(::kill(launcher, SIGKILL), 0);
  int status = 0;
  ::waitpid(launcher, &status, 0);
  ASSERT_GT(node, 0);
  EXPECT_TRUE(WaitUntil([&] { return ProcessGone(node); }, kGenerous));
}

// Options to launch `stack_json` (written into a fresh folder) at `where`.
LaunchOptions OptionsFor(const std::string& stack_json,
                         const shm::ChannelOptions& where) {
  const std::string dir = testing::MakeTempDir();
  WriteFile(dir + "/stack.json", stack_json);
  LaunchOptions options;
  options.stack_path = dir + "/stack.json";
  options.channels = where;
  // The runfiles root: the demo schema's types are named from there.
  char cwd[4096];
  options.working_directory = ::getcwd(cwd, sizeof(cwd)) != nullptr ? cwd : ".";
  options.base_env = {"PATH=/usr/bin:/bin"};
  return options;
}

std::string ModeOf(const std::string& path, gid_t* gid = nullptr) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return "(none)";
  if (gid != nullptr) *gid = st.st_gid;
  char text[8];
  std::snprintf(text, sizeof(text), "%04o", st.st_mode & 07777);
  return text;
}

// The folders a launcher makes itself (for its lock, before any channel)
// get what docs/security.md promises, whatever the umask: a member of the
// stack's group lists the channels and reads them.
TEST(LauncherAsRoot, FreshFoldersOfAGroupStackLetItsGroupListAndRead) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to drop to nobody";
  ScopedGroup group;
  if (::getgrnam(group.name().c_str()) == nullptr) {
    GTEST_SKIP() << "no groupadd here: a stack names its group by name";
  }
  shm::testing::ScopedRoot scratch;
  // Every folder is new: <scratch>/adv is the root, g the instance.
  shm::ChannelOptions where;
  where.root = scratch.root() + "/adv";
  where.instance = "g";
  const std::string instance = where.root + "/g";
  const std::string stack = testing::WithDemoSchema(StackJson(
      {R"({"name": "/robot/state", "type": "examples/demo.capnp:ImuSample",
           "maxSize": 256, "queueDepth": 8, "mode": "0640", "group": ")" +
       group.name() + R"("})"},
      {ShellNode("n", "exit 0")}));
  std::ostringstream out, err;
  const mode_t umask_was = ::umask(027);  // narrower than any folder's mode
  absl::StatusOr<std::unique_ptr<Launcher>> launcher =
      Launcher::Create(OptionsFor(stack, where), nullptr, out, err);
  ::umask(umask_was);
  ASSERT_TRUE(launcher.ok()) << launcher.status();

  // Above the instance: 1777, like /dev/shm. The instance: the group
  // enters and lists, its files inherit the group, others stay out.
  EXPECT_EQ(ModeOf(scratch.root()), "1777");
  EXPECT_EQ(ModeOf(where.root), "1777");
  gid_t gid = 0;
  EXPECT_EQ(ModeOf(instance, &gid), "2750");
  EXPECT_EQ(gid, group.gid());
  EXPECT_EQ(ModeOf(shm::Channel::PathFor(where, "/robot/state"), &gid),
            "0640");
  EXPECT_EQ(gid, group.gid());

  // Root publishes; a member of the group lists, opens and reads.
  auto channel = shm::Channel::Open(where, "/robot/state");
  ASSERT_TRUE(channel.ok()) << channel.status();
  auto publisher = shm::Publisher::Create(channel->get());
  ASSERT_TRUE(publisher.ok()) << publisher.status();
  std::memcpy((*publisher)->Loan().data(), "hello", 5);
  ASSERT_EQ((*publisher)->Send(5).status, shm::SendStatus::kOk);
  const int rc = RunAsNobody({group.gid()}, [&] {
    absl::StatusOr<std::vector<std::string>> names = shm::Channel::List(where);
    if (!names.ok()) {
      std::fprintf(stderr, "child: list: %s\n",
                   std::string(names.status().message()).c_str());
      return 1;
    }
    if (*names != std::vector<std::string>{"/robot/state",
                                           kLauncherStatusChannel}) {
      return 2;
    }
    // As `tether list` reads them: every channel opens and checks clean.
    absl::StatusOr<std::vector<transport::ChannelSummary>> listed =
        transport::ListChannels(where);
    if (!listed.ok() || listed->size() != 2) return 3;
    for (const transport::ChannelSummary& c : *listed) {
      if (!c.error.empty() || !c.corruption.empty()) {
        std::fprintf(stderr, "child: %s: %s%s\n", c.name.c_str(),
                     c.error.c_str(), c.corruption.c_str());
        return 4;
      }
    }
    auto c = shm::Channel::Open(where, "/robot/state");
    if (!c.ok() || (*c)->data_writable() || !(*c)->reader_state_writable()) {
      return 5;
    }
    auto reader = shm::Reader::Create(
        c->get(), {.pin = true, .start = shm::ReaderOptions::Start::kOldest});
    if (!reader.ok()) return 6;
    shm::MessageView v;
    if ((*reader)->Next(&v) != shm::ReadStatus::kOk || v.data.size() != 5 ||
        std::memcmp(v.data.data(), "hello", 5) != 0) {
      return 7;
    }
    return 0;
  });
  EXPECT_EQ(rc, 0) << "a member of the stack's group could not list and read";
}

// The launcher adds its status channel to the stack's: the up-front space
// check counts it too, so a filesystem that holds only the stack's channels
// refuses the launch before anything is made, and stays empty.
TEST(LauncherAsRoot, StackThatFitsOnlyWithoutTheStatusChannelIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to mount a tmpfs";
  const std::string stack = testing::WithDemoSchema(
      StackJson({testing::ImuChannel("/a"), testing::ImuChannel("/b")},
                {ShellNode("n", "exit 0")}));
  // What the stack's own channels take, launched without the status
  // channel where there is room.
  tether::testing::FolderUsage stack_only;
  {
    ScopedTmpfs roomy(16 << 20);
    if (!roomy.ok()) {
      GTEST_SKIP() << "cannot mount a tmpfs here (" << roomy.error() << ")";
    }
    shm::ChannelOptions where;
    where.root = roomy.path();
    where.instance = "s";
    LaunchOptions options = OptionsFor(stack, where);
    options.status_channel = false;
    std::ostringstream out, err;
    absl::StatusOr<std::unique_ptr<Launcher>> launcher =
        Launcher::Create(options, nullptr, out, err);
    ASSERT_TRUE(launcher.ok()) << launcher.status();
    stack_only = tether::testing::UsageOf(roomy.path() + "/s");
  }
  ASSERT_GT(stack_only.taken, 0u);

  // Exactly that much room: the stack's channels alone would fit.
  ScopedTmpfs small(stack_only.taken);
  ASSERT_TRUE(small.ok()) << small.error();
  ASSERT_EQ(small.free_bytes(), stack_only.taken);
  shm::ChannelOptions where;
  where.root = small.path();
  where.instance = "s";
  std::ostringstream out, err;
  absl::StatusOr<std::unique_ptr<Launcher>> launcher =
      Launcher::Create(OptionsFor(stack, where), nullptr, out, err);
  ASSERT_FALSE(launcher.ok()) << "launched a stack that does not fit";
  EXPECT_TRUE(absl::IsResourceExhausted(launcher.status()))
      << launcher.status();
  const std::string message(launcher.status().message());
  EXPECT_THAT(message, HasSubstr("has 3 new channels (with " +
                                 std::string(kLauncherStatusChannel) +
                                 ") that together need"));
  EXPECT_THAT(message, HasSubstr("is free there"));
  EXPECT_THAT(out.str(), Not(HasSubstr("created")));
  EXPECT_TRUE(std::filesystem::is_empty(small.path()))
      << "left behind in " << small.path() << " after: " << message;
}

// A filesystem out of inodes (not of space) is named as such, with the
// command that shows it and the mount option that fixes it.
TEST(LauncherAsRoot, AFilesystemOutOfInodesSaysSoAndNotFull) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to mount a tmpfs";
  ScopedTmpfs few(8 << 20, "nr_inodes=4");
  if (!few.ok()) GTEST_SKIP() << "cannot mount a tmpfs here (" << few.error() << ")";
  shm::ChannelOptions where;
  where.root = few.path();
  where.instance = "i";
  const std::string stack = testing::WithDemoSchema(StackJson(
      {R"({"name": "/a", "type": "examples/demo.capnp:ImuSample", "maxSize": 256, "queueDepth": 8})",
       R"({"name": "/b", "type": "examples/demo.capnp:ImuSample", "maxSize": 256, "queueDepth": 8})",
       R"({"name": "/c", "type": "examples/demo.capnp:ImuSample", "maxSize": 256, "queueDepth": 8})"},
      {ShellNode("n", "exit 0")}));
  std::ostringstream out, err;
  auto launcher = Launcher::Create(OptionsFor(stack, where), nullptr, out, err);
  ASSERT_FALSE(launcher.ok()) << "four inodes held a stack of three channels";
  EXPECT_TRUE(absl::IsResourceExhausted(launcher.status())) << launcher.status();
  const std::string message(launcher.status().message());
  EXPECT_THAT(message, HasSubstr("has no free inodes")) << message;
  EXPECT_THAT(message, HasSubstr("df -i " + few.path())) << message;
  EXPECT_THAT(message, HasSubstr("nr_inodes=")) << message;
  EXPECT_THAT(message, Not(HasSubstr("is /dev/shm full"))) << message;
}

// Another user who made the instance folder, or a channel file, before
// the launch could write every channel of the stack: root's launcher
// refuses to adopt them, naming the owner and the remedy, and starts no
// node.
TEST(LauncherAsRoot, AnInstanceFolderOrChannelFileOfAnotherUserIsRefused) {
  const std::optional<UserAccount> nobody = Nobody();
  if (!nobody) GTEST_SKIP() << "needs root and a user named nobody";
  shm::testing::ScopedRoot scratch;
  shm::ChannelOptions where;
  where.root = scratch.root() + "/shared";
  where.instance = "robot";
  const std::string instance = where.root + "/robot";
  std::filesystem::create_directories(where.root);
  ASSERT_EQ(::chmod(scratch.root().c_str(), 0755), 0);
  ASSERT_EQ(::chmod(where.root.c_str(), 01777), 0);  // as /dev/shm is
  const std::string stack = testing::WithDemoSchema(StackJson(
      {R"({"name": "/robot/cmd", "type": "examples/demo.capnp:ImuSample",
           "maxSize": 256, "queueDepth": 8})"},
      {ShellNode("n", "echo started")}));
  ASSERT_EQ(RunAsNobody({}, [&] { return ::mkdir(instance.c_str(), 0770); }),
            0);
  {
    std::ostringstream out, err;
    auto launcher = Launcher::Create(OptionsFor(stack, where), nullptr, out, err);
    ASSERT_FALSE(launcher.ok()) << "adopted a folder nobody made";
    EXPECT_TRUE(absl::IsPermissionDenied(launcher.status())) << launcher.status();
    EXPECT_THAT(std::string(launcher.status().message()),
                HasSubstr("the instance folder " + instance +
                          " belongs to nobody (uid " +
                          std::to_string(nobody->uid) + ")"));
    EXPECT_THAT(std::string(launcher.status().message()),
                HasSubstr("rm -r " + instance));
    EXPECT_THAT(out.str(), Not(HasSubstr("created")));
  }
  // Root's own folder, but a channel file handed to another user.
  std::filesystem::remove_all(instance);
  {
    std::ostringstream out, err;
    auto first = Launcher::Create(OptionsFor(stack, where), nullptr, out, err);
    ASSERT_TRUE(first.ok()) << first.status();
  }
  const std::string file = shm::Channel::PathFor(where, "/robot/cmd");
  ASSERT_EQ(::chown(file.c_str(), nobody->uid, nobody->gid), 0);
  std::ostringstream out, err;
  auto launcher = Launcher::Create(OptionsFor(stack, where), nullptr, out, err);
  ASSERT_FALSE(launcher.ok()) << "adopted a channel file of nobody's";
  EXPECT_THAT(std::string(launcher.status().message()),
              HasSubstr("channel /robot/cmd: the channel file " + file +
                        " belongs to nobody"));
  EXPECT_THAT(std::string(launcher.status().message()),
              HasSubstr("tether clean --root"));
}

}  // namespace
}  // namespace tether::tools
