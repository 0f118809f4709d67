// `tether launch` as a separate process, as a user runs it: SIGTERM stops
// every node (also one that ignores SIGTERM, and a node's own children);
// SIGKILL of the launcher takes its nodes with it (parent-death signal);
// help, bad configs and bad options exit with the documented codes.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shm/channel.h"
#include "tests/shm/shm_test_util.h"
#include "tests/tools/json_test_parser.h"
#include "tests/tools/launch_test_util.h"
#include "tests/util/run_command.h"

extern char** environ;

namespace tether::tools {
namespace {

using std::chrono::milliseconds;
using testing::FileExists;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::ProcessGone;
using testing::ReadFile;
using testing::ShellNode;
using testing::StackJson;
using testing::WaitUntil;
using testing::WriteFile;

constexpr milliseconds kGenerous{10000};

std::string TetherPath() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  if (srcdir == nullptr || workspace == nullptr) return "tools/tether";
  return std::string(srcdir) + "/" + workspace + "/tools/tether";
}

class TetherLaunchTest : public ::testing::Test {
 protected:
  TetherLaunchTest() : dir_(testing::MakeTempDir()) {}
  ~TetherLaunchTest() override {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      Wait(kGenerous);
    }
  }

  std::string File(const std::string& name) const { return dir_ + "/" + name; }

  // Starts `tether launch <args>` with stdout/stderr to files.
  void Spawn(std::vector<std::string> args) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, File("out").c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&actions, 2, File("err").c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const std::string path = TetherPath();
    args.insert(args.begin(), {path, "launch"});
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ASSERT_EQ(posix_spawn(&pid_, path.c_str(), &actions, nullptr, argv.data(),
                          environ),
              0);
    posix_spawn_file_actions_destroy(&actions);
  }

  // Waits for the launcher to exit; its exit code, 128+signal, or -1 on
  // timeout.
  int Wait(milliseconds timeout) {
    int status = 0;
    int code = -1;
    WaitUntil(
        [&] {
          const pid_t r = ::waitpid(pid_, &status, WNOHANG);
          if (r == 0) return false;
          code =
              WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
          pid_ = 0;
          return true;
        },
        timeout);
    return code;
  }

  int Run(std::vector<std::string> args) {
    Spawn(std::move(args));
    return Wait(kGenerous);
  }

  std::vector<std::string> ChannelArgs() {
    return {"--root", root_.root(), "--instance", "test"};
  }

  // Waits until the status file shows every node running; their pids.
  std::vector<pid_t> WaitForRunningNodes(size_t count) {
    std::vector<pid_t> pids;
    const bool ok = WaitUntil(
        [&] {
          absl::StatusOr<test::JsonValue> json =
              test::ParseJson(ReadFile(File("status.json")));
          if (!json.ok() || json->Find("nodes") == nullptr) return false;
          pids.clear();
          for (const test::JsonValue& n : json->Find("nodes")->array) {
            if (n.Find("state")->string != "running") return false;
            pids.push_back(static_cast<pid_t>(n.Find("pid")->number));
          }
          return pids.size() == count;
        },
        kGenerous);
    EXPECT_TRUE(ok) << ReadFile(File("out")) << ReadFile(File("err"));
    return pids;
  }

  shm::testing::ScopedRoot root_;
  std::string dir_;
  pid_t pid_ = 0;
};

TEST_F(TetherLaunchTest, SigtermStopsEveryNodeAndTheirChildren) {
  const std::string child_pid_file = File("child.pid");
  const std::string stubborn_ready = File("stubborn.ready");
  WriteFile(
      File("stack.json"),
      StackJson(
          {}, {ShellNode("plain", "exec sleep 30"),
               // sleep inherits the ignored SIGTERM.
               ShellNode("stubborn", "trap '' TERM; touch '" + stubborn_ready +
                                         "'; exec sleep 30"),
               ShellNode("parent", "sleep 30 & echo $! > '" + child_pid_file +
                                       "'; wait")}));
  std::vector<std::string> args = {File("stack.json"), "--kill-timeout", "0.3",
                                   "--status-json", File("status.json")};
  for (const std::string& a : ChannelArgs()) args.push_back(a);
  Spawn(args);
  std::vector<pid_t> pids = WaitForRunningNodes(3);
  ASSERT_EQ(pids.size(), 3u);
  ASSERT_TRUE(
      WaitUntil([&] { return !ReadFile(child_pid_file).empty(); }, kGenerous));
  ASSERT_TRUE(WaitUntil([&] { return FileExists(stubborn_ready); }, kGenerous));
  pids.push_back(std::atoi(ReadFile(child_pid_file).c_str()));
  for (pid_t pid : pids) ASSERT_FALSE(ProcessGone(pid)) << pid;

  ASSERT_EQ(::kill(pid_, SIGTERM), 0);
  EXPECT_EQ(Wait(kGenerous), 0);
  for (pid_t pid : pids) EXPECT_TRUE(ProcessGone(pid)) << pid;
  const std::string out = ReadFile(File("out"));
  EXPECT_THAT(out, HasSubstr("stop requested: stopping 3 nodes"));
  EXPECT_THAT(out, HasSubstr("did not stop within 0.30 s: sending SIGKILL"));
  EXPECT_THAT(out, HasSubstr("signal 9 (SIGKILL)"));
  EXPECT_THAT(out, HasSubstr("NODE"));
}

// The launcher's own status channel overwritten under it (`dd` over its
// header): the launcher says so once, with the recovery, and stops
// publishing there; the nodes run on.
TEST_F(TetherLaunchTest, ACorruptStatusChannelIsReportedOnceAndTheStackRunsOn) {
  WriteFile(File("stack.json"),
            StackJson({}, {ShellNode("n", "exec sleep 30")}));
  std::vector<std::string> args = {File("stack.json"), "--status-json",
                                   File("status.json")};
  for (const std::string& a : ChannelArgs()) args.push_back(a);
  Spawn(args);
  const std::vector<pid_t> pids = WaitForRunningNodes(1);
  ASSERT_EQ(pids.size(), 1u);
  shm::ChannelOptions where = root_.options();
  where.instance = "test";
  const std::string status_file =
      shm::Channel::PathFor(where, "/tether/launcher/status");
  {
    const int fd = ::open(status_file.c_str(), O_WRONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0) << status_file;
    const std::vector<char> ones(8192, '\xff');
    ASSERT_EQ(::pwrite(fd, ones.data(), ones.size(), 0), 8192);
    ::close(fd);
  }
  const std::string said = "the launcher no longer publishes the stack's status";
  EXPECT_TRUE(WaitUntil(
      [&] {
        return (ReadFile(File("out")) + ReadFile(File("err"))).find(said) !=
               std::string::npos;
      },
      kGenerous))
      << ReadFile(File("out")) << ReadFile(File("err"));
  EXPECT_FALSE(ProcessGone(pids[0]));
  ASSERT_EQ(::kill(pid_, SIGTERM), 0);
  EXPECT_EQ(Wait(kGenerous), 0);
  const std::string all = ReadFile(File("out")) + ReadFile(File("err"));
  EXPECT_EQ(all.find(said), all.rfind(said)) << "said more than once:\n" << all;
  EXPECT_THAT(all, HasSubstr("tether clean --root"));
}

TEST_F(TetherLaunchTest, NodesDieWithASigkilledLauncher) {
  WriteFile(File("stack.json"),
            StackJson({}, {ShellNode("a", "exec sleep 30"),
                           ShellNode("b", "exec sleep 30",
                                     R"(, "startAfter": ["a"])")}));
  std::vector<std::string> args = {File("stack.json"), "--status-json",
                                   File("status.json")};
  for (const std::string& a : ChannelArgs()) args.push_back(a);
  Spawn(args);
  const std::vector<pid_t> pids = WaitForRunningNodes(2);
  ASSERT_EQ(pids.size(), 2u);
  ASSERT_EQ(::kill(pid_, SIGKILL), 0);
  EXPECT_EQ(Wait(kGenerous), 128 + SIGKILL);
  for (pid_t pid : pids) {
    EXPECT_TRUE(WaitUntil([&] { return ProcessGone(pid); }, kGenerous)) << pid;
  }
}

// One launcher per instance, with or without the status channel: the
// second is refused naming the first, and the lock goes with the first
// however it ends (here SIGKILL), so the next launch runs.
TEST_F(TetherLaunchTest, ASecondLauncherOfTheInstanceIsRefusedUntilTheFirstDies) {
  WriteFile(File("stack.json"),
            StackJson({}, {ShellNode("a", "exec sleep 30")}));
  std::vector<std::string> args = {File("stack.json"), "--status-json",
                                   File("status.json"), "--no-status-channel"};
  for (const std::string& a : ChannelArgs()) args.push_back(a);
  Spawn(args);
  const pid_t first = pid_;
  ASSERT_EQ(WaitForRunningNodes(1).size(), 1u);

  std::string out;
  const std::string second = absl::StrCat(
      TetherPath(), " launch ", File("stack.json"),
      " --no-status-channel --duration 1 --root ", root_.root(),
      " --instance test 2>&1");
  int status = 0;
  out = ::tether::testing::RunCommand(second, &status);
  EXPECT_EQ(WEXITSTATUS(status), 1) << out;
  EXPECT_THAT(out, HasSubstr(absl::StrCat("another launcher (pid ", first,
                                          ") is running stack instance "
                                          "\"test\"")));
  EXPECT_THAT(out, Not(HasSubstr("created")));

  ASSERT_EQ(::kill(first, SIGKILL), 0);
  EXPECT_EQ(Wait(kGenerous), 128 + SIGKILL);
  out = ::tether::testing::RunCommand(second, &status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << out;
  EXPECT_THAT(out, HasSubstr("--duration 1.00 s is over"));
}

TEST_F(TetherLaunchTest, RunsForDurationAndPrefixesOutput) {
  WriteFile(
      File("stack.json"),
      testing::WithDemoSchema(StackJson(
          {testing::ImuChannel("/test/imu")},
          {ShellNode("hello", "echo hi from $TETHER_NODE; exec sleep 30")})));
  // Long enough for /bin/sh to start and echo on a loaded machine.
  std::vector<std::string> args = {File("stack.json"), "--duration", "3"};
  for (const std::string& a : ChannelArgs()) args.push_back(a);
  EXPECT_EQ(Run(args), 0) << ReadFile(File("err"));
  const std::string out = ReadFile(File("out"));
  EXPECT_THAT(out, HasSubstr("created 1 channel in " + root_.root() + "/test"));
  EXPECT_THAT(out, HasSubstr("[hello] hi from hello\n"));
  EXPECT_THAT(out, HasSubstr("--duration 3.00 s is over"));
  EXPECT_THAT(out, HasSubstr("hello  stopped"));
}

TEST_F(TetherLaunchTest, UnknownTypesGetAHintAndSchemasAddThem) {
  WriteFile(File("stack.json"), StackJson({testing::ImuChannel("/test/imu")},
                                          {ShellNode("n", "exec sleep 30")}));
  std::vector<std::string> args = {File("stack.json"), "--duration", "0.2"};
  for (const std::string& a : ChannelArgs()) args.push_back(a);
  EXPECT_EQ(Run(args), 1);
  const std::string err = ReadFile(File("err"));
  EXPECT_THAT(err,
              HasSubstr("channels[0].type: \"examples/demo.capnp:ImuSample\""));
  EXPECT_THAT(err, HasSubstr("the launcher knows these types: tools/launcher_status.capnp:LauncherStatus;"));
  EXPECT_THAT(err, HasSubstr("--schemas FILE"));
  EXPECT_FALSE(FileExists(root_.root() + "/test"));

  char cwd[4096];
  ASSERT_NE(::getcwd(cwd, sizeof(cwd)), nullptr);
  args.push_back("--schemas");
  args.push_back(std::string(cwd) + "/examples/demo.capnp");
  EXPECT_EQ(Run(args), 0) << ReadFile(File("err"));
  EXPECT_THAT(ReadFile(File("out")), HasSubstr("created 1 channel"));
}

TEST_F(TetherLaunchTest, HelpBadConfigAndBadOptions) {
  EXPECT_EQ(Run({"--help"}), 0);
  const std::string help = ReadFile(File("out"));
  EXPECT_THAT(help, HasSubstr("usage: tether launch"));
  for (const char* option :
       {"--root", "--instance", "--duration", "--kill-timeout", "--status-json",
        "--schemas", "--workdir"}) {
    EXPECT_THAT(help, HasSubstr(option));
  }

  const std::string marker = File("started");
  WriteFile(
      File("bad.json"),
      testing::WithDemoSchema(StackJson(
          {R"({"name": "/test/imu", "type": "examples/demo.capnp:ImuSample",
                          "maxSize": 256, "queueDepth": 100})"},
          {ShellNode("n", "touch '" + marker + "'")})));
  std::vector<std::string> args = {File("bad.json")};
  for (const std::string& a : ChannelArgs()) args.push_back(a);
  EXPECT_EQ(Run(args), 1);
  const std::string err = ReadFile(File("err"));
  EXPECT_THAT(err, HasSubstr("tether launch: "));
  EXPECT_THAT(err, HasSubstr("bad.json:"));
  EXPECT_THAT(err, HasSubstr("queueDepth"));
  EXPECT_THAT(err, Not(HasSubstr("ImuSample")));  // The type is known.
  EXPECT_FALSE(FileExists(marker));
  EXPECT_FALSE(FileExists(root_.root() + "/test"));

  EXPECT_EQ(Run({File("missing.json")}), 1);
  EXPECT_THAT(ReadFile(File("err")), HasSubstr("missing.json"));
  EXPECT_EQ(Run({File("bad.json"), "--duration", "soon"}), 2);
  EXPECT_THAT(ReadFile(File("err")), HasSubstr("--duration soon"));
  EXPECT_EQ(Run({File("bad.json"), "--kill-timeout", "-1"}), 2);
  EXPECT_EQ(Run({}), 2);  // No stack.
}

}  // namespace
}  // namespace tether::tools
