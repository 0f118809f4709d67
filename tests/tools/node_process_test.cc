// Starting one node process: command lookup, user lookup, the start report
// (executed or not, and why), output pipes, and the process group.
#include "tools/node_process.h"

#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/tools/launch_test_util.h"

namespace tether::tools {
namespace {

using ::testing::HasSubstr;

// Waits for the start report and reads it.
StartOutcome AwaitStart(const NodeProcessSpec& spec, NodeProcess& process,
                        absl::Status* error) {
  StartOutcome outcome = StartOutcome::kPending;
  for (int i = 0; i < 1000 && outcome == StartOutcome::kPending; ++i) {
    pollfd p{process.start_report.get(), POLLIN, 0};
    ::poll(&p, 1, 10);
    outcome = ReadStartReport(spec, process.start_report, error);
  }
  return outcome;
}

int Reap(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

NodeProcessSpec ShellSpec(const std::string& script) {
  NodeProcessSpec spec;
  spec.name = "n";
  spec.path = "/bin/sh";
  spec.argv = {"sh", "-c", script};
  spec.env = {"PATH=/usr/bin:/bin", "MARK=42"};
  spec.working_directory = "/";
  return spec;
}

TEST(NodeProcess, RunsTheProgramInItsOwnGroupWithOutputPipes) {
  const NodeProcessSpec spec = ShellSpec("echo \"$MARK $(pwd)\"; echo e >&2");
  absl::StatusOr<NodeProcess> p = SpawnNodeProcess(spec);
  ASSERT_TRUE(p.ok()) << p.status();
  absl::Status error;
  EXPECT_EQ(AwaitStart(spec, *p, &error), StartOutcome::kExecuted);
  EXPECT_FALSE(p->start_report.valid());
  EXPECT_EQ(::getpgid(p->pid), p->pid);
  const int status = Reap(p->pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  char buffer[64] = {};
  EXPECT_EQ(::read(p->stdout_fd.get(), buffer, sizeof(buffer) - 1), 5);
  EXPECT_STREQ(buffer, "42 /\n");
  EXPECT_EQ(::read(p->stderr_fd.get(), buffer, sizeof(buffer)), 2);
}

TEST(NodeProcess, ExecAndDirectoryFailuresComeBackAsReports) {
  NodeProcessSpec spec = ShellSpec("true");
  spec.path = "/nonexistent/program";
  absl::StatusOr<NodeProcess> p = SpawnNodeProcess(spec);
  ASSERT_TRUE(p.ok()) << p.status();
  absl::Status error;
  ASSERT_EQ(AwaitStart(spec, *p, &error), StartOutcome::kFailed);
  EXPECT_TRUE(absl::IsNotFound(error)) << error;
  EXPECT_THAT(error.message(), HasSubstr("node n: cannot execute "
                                         "/nonexistent/program"));
  int status = Reap(p->pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 127);

  spec = ShellSpec("true");
  spec.working_directory = "/nonexistent-dir";
  p = SpawnNodeProcess(spec);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(AwaitStart(spec, *p, &error), StartOutcome::kFailed);
  EXPECT_THAT(error.message(),
              HasSubstr("cannot enter working directory /nonexistent-dir"));
  Reap(p->pid);
}

TEST(NodeProcess, ResolvesCommandsLikeAShellAndSaysWhatIsMissing) {
  const std::string dir = testing::MakeTempDir();
  testing::WriteFile(dir + "/tool", "#!/bin/sh\n");
  ASSERT_EQ(::chmod((dir + "/tool").c_str(), 0755), 0);
  testing::WriteFile(dir + "/data", "");
  EXPECT_EQ(*ResolveCommand("./tool", dir, ""), dir + "/tool");
  EXPECT_EQ(*ResolveCommand("tool", "/", "/nowhere:" + dir), dir + "/tool");
  EXPECT_EQ(*ResolveCommand("sh", "/", "/usr/bin:/bin"), "/usr/bin/sh");
  absl::StatusOr<std::string> missing = ResolveCommand("bin/x", dir, "");
  EXPECT_TRUE(absl::IsNotFound(missing.status()));
  EXPECT_THAT(missing.status().message(),
              HasSubstr("relative to the working directory " + dir));
  absl::StatusOr<std::string> data = ResolveCommand("./data", dir, "");
  EXPECT_TRUE(absl::IsPermissionDenied(data.status())) << data.status();
  EXPECT_THAT(data.status().message(), HasSubstr("chmod +x"));
  EXPECT_THAT(ResolveCommand("nope-xyz", "/", "/bin").status().message(),
              HasSubstr("\"nope-xyz\" is not in PATH (/bin)"));
}

TEST(NodeProcess, LooksUpUsers) {
  absl::StatusOr<UserAccount> root = LookUpUser("root");
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(root->uid, 0u);
  EXPECT_EQ(root->gid, 0u);
  EXPECT_FALSE(root->groups.empty());
  EXPECT_TRUE(absl::IsNotFound(LookUpUser("no-such-user-xyz").status()));
}

TEST(NodeProcess, NamesSignals) {
  EXPECT_EQ(SignalName(SIGKILL), "SIGKILL");
  EXPECT_EQ(SignalName(SIGTERM), "SIGTERM");
}

}  // namespace
}  // namespace tether::tools
