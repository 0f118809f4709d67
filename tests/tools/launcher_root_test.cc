// What only real root can check (the target is tagged no-sandbox: Bazel's
// sandbox is a user namespace where setuid to other users and SCHED_FIFO
// fail): a node runs as the configured user, with the configured real-time
// policy, priority and CPUs, and still dies with a SIGKILLed launcher after
// its user switch (which clears the parent-death signal until re-armed).
// Skipped when not root.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/shm/shm_test_util.h"
#include "tests/tools/json_test_parser.h"
#include "tests/tools/launch_test_util.h"
#include "tools/launcher.h"
#include "tools/node_process.h"

extern char** environ;

namespace tether::tools {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;
using testing::ProcessGone;
using testing::ReadFile;
using testing::ShellNode;
using testing::StackJson;
using testing::WaitUntil;
using testing::WriteFile;

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

}  // namespace
}  // namespace tether::tools
