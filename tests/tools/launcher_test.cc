// The launcher in-process, with /bin/sh scripts as nodes: channels exist
// before nodes start, nodes get their env and prefixed output, startAfter
// order and reverse-order shutdown, restarts with backoff, giving up on a
// crashing node while the rest runs, required vs best-effort real-time
// settings, nodes that cannot start or are blocked, ending by itself, by a
// stop or by --duration, status as JSON and on a channel, and the summary.
// (Launcher::Create's checks of the stack: launcher_config_test.cc.)
#include "tools/launcher.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shm/channel.h"
#include "tests/tools/json_test_parser.h"
#include "tests/tools/launch_test_util.h"
#include "tests/tools/launcher_test_fixture.h"
#include "tools/launcher_status.capnp.h"
#include "tools/status_publisher.h"
#include "transport/channel_handle.h"
#include "transport/typed_endpoints.h"

namespace tether::tools {
namespace {

using std::chrono::milliseconds;
using testing::DemoTypes;
using testing::FileExists;
using testing::FindNode;
using testing::ImuChannel;
using testing::kGenerous;
using testing::LauncherTest;
using testing::NodeIs;
using testing::ProcessGone;
using testing::ShellNode;
using testing::StackJson;
using testing::WaitUntil;
using testing::WriteFile;
using ::testing::HasSubstr;
using ::testing::Not;

TEST_F(LauncherTest, ChannelsExistBeforeNodesStartAndNodesGetEnvAndPrefixes) {
  const std::string channel_file =
      shm::Channel::PathFor(root_.options(), "/test/imu");
  const std::string ready = File("talker.ready");
  auto running = Start(StackJson(
      {ImuChannel("/test/imu")},
      {ShellNode("talker",
                 "test -e '" + channel_file +
                     "' && echo channel-ok; "
                     "echo \"node=$TETHER_NODE instance=$TETHER_INSTANCE "
                     "root=$TETHER_ROOT greeting=$GREETING\"; "
                     "echo \"stack=$TETHER_STACK\"; "
                     "echo oops >&2; printf 'no newline'; touch '" +
                     ready + "'; exec sleep 30",
                 R"(, "env": [{"name": "GREETING", "value": "hi"}])"),
       ShellNode("listener", "exec sleep 30")}));
  ASSERT_NE(running, nullptr);
  ASSERT_TRUE(running->WaitFor([](const StackStatus& s) {
    return NodeIs(s, "talker", NodeState::kRunning) &&
           NodeIs(s, "listener", NodeState::kRunning);
  }));
  ASSERT_TRUE(WaitUntil([&] { return FileExists(ready); }, kGenerous));
  const StackStatus live = running->Last();
  std::vector<pid_t> pids;
  for (const NodeStatus& n : live.nodes) {
    EXPECT_GT(n.pid, 0);
    EXPECT_FALSE(ProcessGone(n.pid)) << n.name;
    pids.push_back(n.pid);
  }

  const Launcher::Result result = running->Stop();
  EXPECT_TRUE(result.stop_requested);
  EXPECT_EQ(result.exit_code, 0);
  for (const NodeStatus& n : result.status.nodes) {
    EXPECT_EQ(n.state, NodeState::kStopped) << n.name;
    EXPECT_EQ(n.pid, 0);
  }
  for (pid_t pid : pids) EXPECT_TRUE(ProcessGone(pid)) << pid;

  const std::string out = out_.str();
  EXPECT_THAT(out, HasSubstr("[talker] channel-ok\n"));
  EXPECT_THAT(out, HasSubstr("[talker] node=talker instance=test root=" +
                             root_.root() + " greeting=hi\n"));
  EXPECT_THAT(out, HasSubstr("[talker] stack=" + dir_ + "/stack.json\n"));
  EXPECT_THAT(out, HasSubstr("launch: started talker (pid "));
  EXPECT_THAT(out, HasSubstr("NODE"));  // The summary.
  // A last line without a newline is passed on when the node ends.
  EXPECT_THAT(out, HasSubstr("[talker] no newline\n"));
  EXPECT_THAT(out, Not(HasSubstr("oops")));
  const std::string err = err_.str();
  EXPECT_THAT(err, HasSubstr("[talker] oops\n"));
  EXPECT_THAT(err, Not(HasSubstr("channel-ok")));
}

TEST_F(LauncherTest, StartsInStartAfterOrderAndStopsInReverse) {
  // Listed against their order on purpose.
  auto running = Start(StackJson(
      {}, {ShellNode("c", "exec sleep 30", R"(, "startAfter": ["b"])"),
           ShellNode("b", "exec sleep 30", R"(, "startAfter": ["a"])"),
           ShellNode("a", "exec sleep 30")}));
  ASSERT_NE(running, nullptr);
  ASSERT_TRUE(running->WaitFor([](const StackStatus& s) {
    return NodeIs(s, "a", NodeState::kRunning) &&
           NodeIs(s, "b", NodeState::kRunning) &&
           NodeIs(s, "c", NodeState::kRunning);
  }));
  // The order in which nodes turned running.
  std::vector<std::string> order;
  for (const StackStatus& s : running->History()) {
    for (const NodeStatus& n : s.nodes) {
      if (n.state == NodeState::kRunning &&
          std::find(order.begin(), order.end(), n.name) == order.end()) {
        order.push_back(n.name);
      }
    }
  }
  EXPECT_EQ(order, (std::vector<std::string>{"a", "b", "c"}));
  running->Stop();
  const std::string out = out_.str();
  const size_t stop_c = out.find("stopped c (pid");
  const size_t stop_b = out.find("stopped b (pid");
  const size_t stop_a = out.find("stopped a (pid");
  ASSERT_NE(stop_c, std::string::npos) << out;
  ASSERT_NE(stop_b, std::string::npos) << out;
  ASSERT_NE(stop_a, std::string::npos) << out;
  EXPECT_LT(stop_c, stop_b);
  EXPECT_LT(stop_b, stop_a);
}

TEST_F(LauncherTest, RestartsAKilledNodeAfterItsBackoff) {
  auto running = Start(StackJson(
      {}, {ShellNode(
              "worker", "exec sleep 30",
              R"(, "restart": {"policy": "onFailure", "backoffMs": 300})")}));
  ASSERT_NE(running, nullptr);
  ASSERT_TRUE(running->WaitFor([](const StackStatus& s) {
    return NodeIs(s, "worker", NodeState::kRunning);
  }));
  const pid_t first = FindNode(running->Last(), "worker")->pid;
  const auto killed_at = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(first, SIGKILL), 0);
  ASSERT_TRUE(running->WaitFor([&](const StackStatus& s) {
    const NodeStatus* n = FindNode(s, "worker");
    return n->state == NodeState::kRunning && n->pid != first;
  }));
  const auto restarted_after = std::chrono::steady_clock::now() - killed_at;
  const NodeStatus worker = *FindNode(running->Last(), "worker");
  EXPECT_EQ(worker.restarts, 1u);
  EXPECT_EQ(worker.starts, 2u);
  EXPECT_EQ(worker.last_exit.kind, ExitInfo::Kind::kSignal);
  EXPECT_EQ(worker.last_exit.value, SIGKILL);
  // Not before the backoff (measured from the exit, which is after the
  // kill); the upper bound only catches a restart that never comes.
  EXPECT_GE(restarted_after, milliseconds(290));
  EXPECT_TRUE(ProcessGone(first));
  running->Stop();
  EXPECT_THAT(out_.str(), HasSubstr("worker exited with signal 9 (SIGKILL)"));
  EXPECT_THAT(out_.str(), HasSubstr("restarting in 300 ms (restart 1 of 5)"));
  EXPECT_THAT(out_.str(), HasSubstr("restarted worker (pid "));
}

TEST_F(LauncherTest, GivesUpOnACrashingNodeWhileTheOthersKeepRunning) {
  auto running = Start(StackJson(
      {}, {ShellNode("crash", "echo crashing; exit 3",
                     R"(, "restart": {"policy": "onFailure", "backoffMs": 10,)"
                     R"( "maxBackoffMs": 40, "maxRestarts": 3})"),
           ShellNode("steady", "exec sleep 30")}));
  ASSERT_NE(running, nullptr);
  ASSERT_TRUE(running->WaitFor([](const StackStatus& s) {
    return NodeIs(s, "crash", NodeState::kFailed) &&
           NodeIs(s, "steady", NodeState::kRunning);
  }));
  const StackStatus s = running->Last();
  const NodeStatus crash = *FindNode(s, "crash");
  EXPECT_EQ(crash.restarts, 3u);
  EXPECT_EQ(crash.starts, 4u);
  EXPECT_EQ(crash.last_exit.kind, ExitInfo::Kind::kCode);
  EXPECT_EQ(crash.last_exit.value, 3);
  // Still failed (not restarted again) a while later, and the rest runs.
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_TRUE(NodeIs(running->Last(), "crash", NodeState::kFailed));
  EXPECT_TRUE(NodeIs(running->Last(), "steady", NodeState::kRunning));
  EXPECT_FALSE(ProcessGone(FindNode(s, "steady")->pid));

  const Launcher::Result result = running->Stop();
  EXPECT_EQ(result.exit_code, 1);  // A node failed for good.
  EXPECT_THAT(err_.str(), HasSubstr("giving up on node crash after 3 "
                                    "restarts: last exit code 3"));
  const std::string out = out_.str();
  // Exponential backoff: 10, 20, 40 ms.
  EXPECT_THAT(out, HasSubstr("restarting in 10 ms (restart 1 of 3)"));
  EXPECT_THAT(out, HasSubstr("restarting in 20 ms (restart 2 of 3)"));
  EXPECT_THAT(out, HasSubstr("restarting in 40 ms (restart 3 of 3)"));
  EXPECT_THAT(out, HasSubstr("[crash] crashing\n"));
}

TEST_F(LauncherTest, BackoffIsCappedAtMaxBackoff) {
  auto running = Start(StackJson(
      {}, {ShellNode("crash", "exit 1",
                     R"(, "restart": {"policy": "always", "backoffMs": 10,)"
                     R"( "maxBackoffMs": 25, "maxRestarts": 4})")}));
  ASSERT_NE(running, nullptr);
  ASSERT_TRUE(running->WaitFor([](const StackStatus& s) {
    return NodeIs(s, "crash", NodeState::kFailed);
  }));
  const Launcher::Result result = running->Join();  // Every node ended.
  EXPECT_FALSE(result.stop_requested);
  EXPECT_THAT(out_.str(), HasSubstr("restarting in 20 ms (restart 2 of 4)"));
  EXPECT_THAT(out_.str(), HasSubstr("restarting in 25 ms (restart 3 of 4)"));
  EXPECT_THAT(out_.str(), HasSubstr("restarting in 25 ms (restart 4 of 4)"));
}

TEST_F(LauncherTest, RequiredRealtimeFailsTheNodeBestEffortOnlyWarns) {
  // CPU 1023 is a valid CPU id that no test machine has online.
  const std::string strict_marker = File("strict.ran");
  auto running = Start(StackJson(
      {},
      {ShellNode("strict", "touch '" + strict_marker + "'; exec sleep 30",
                 R"(, "cpus": [1023], "scheduling": {"realtime": "required"})"),
       ShellNode(
           "lenient", "exec sleep 30",
           R"(, "cpus": [0, 1023], "scheduling": {"realtime": "bestEffort"})")}));
  ASSERT_NE(running, nullptr);
  ASSERT_TRUE(running->WaitFor([](const StackStatus& s) {
    return NodeIs(s, "strict", NodeState::kFailed) &&
           NodeIs(s, "lenient", NodeState::kRunning);
  }));
  const NodeStatus strict = *FindNode(running->Last(), "strict");
  EXPECT_EQ(strict.starts, 0u);
  EXPECT_EQ(strict.last_exit.kind, ExitInfo::Kind::kStartFailed);
  EXPECT_THAT(strict.last_exit.message, HasSubstr("\"required\""));
  EXPECT_THAT(strict.last_exit.message, HasSubstr("CPU 1023 is not available"));
  const pid_t lenient = FindNode(running->Last(), "lenient")->pid;
  const std::string allowed =
      testing::ReadFile("/proc/" + std::to_string(lenient) + "/status");
  EXPECT_THAT(allowed, HasSubstr("Cpus_allowed_list:\t0\n"));
  running->Stop();
  EXPECT_FALSE(FileExists(strict_marker));
  EXPECT_THAT(err_.str(), HasSubstr("cannot start node strict: its "
                                    "scheduling.realtime is \"required\""));
  EXPECT_THAT(err_.str(), HasSubstr("warning: node lenient runs without a "
                                    "setting (realtime is bestEffort): CPU "
                                    "1023 is not available"));
}

TEST_F(LauncherTest, NodesAfterANodeThatNeverStartedAreBlocked) {
  auto running = Start(StackJson(
      {},
      {ShellNode("base", "exec sleep 30",
                 R"(, "cpus": [1023], "scheduling": {"realtime": "required"})"),
       ShellNode("dependent", "exec sleep 30", R"(, "startAfter": ["base"])"),
       ShellNode("other", "exit 0")}));
  ASSERT_NE(running, nullptr);
  const Launcher::Result result = running->Join();  // Nothing keeps running.
  EXPECT_FALSE(result.stop_requested);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_TRUE(NodeIs(result.status, "base", NodeState::kFailed));
  EXPECT_TRUE(NodeIs(result.status, "dependent", NodeState::kBlocked));
  EXPECT_TRUE(NodeIs(result.status, "other", NodeState::kExited));
  EXPECT_EQ(FindNode(result.status, "dependent")->starts, 0u);
  EXPECT_THAT(out_.str(), HasSubstr("not starting dependent: it starts after "
                                    "base, which never started"));
}

TEST_F(LauncherTest, EndsByItselfWhenEveryNodeHasEnded) {
  LaunchOptions options = Options(StackJson(
      {},
      {ShellNode("once", "echo done"),
       ShellNode("twice", "test -e flag && exit 0; touch flag; exit 1",
                 R"(, "restart": {"policy": "onFailure", "backoffMs": 10})")}));
  options.stop_fd = -1;
  auto running = StartWith(std::move(options));
  ASSERT_NE(running, nullptr);
  const Launcher::Result result = running->Join();
  EXPECT_FALSE(result.stop_requested);
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_TRUE(NodeIs(result.status, "once", NodeState::kExited));
  EXPECT_TRUE(NodeIs(result.status, "twice", NodeState::kExited));
  EXPECT_EQ(FindNode(result.status, "twice")->restarts, 1u);
  EXPECT_EQ(result.status.phase, StackStatus::Phase::kStopped);
  EXPECT_THAT(out_.str(), HasSubstr("[once] done\n"));
  EXPECT_THAT(out_.str(), HasSubstr("every node has ended"));
}

TEST_F(LauncherTest, ProgramThatCannotBeExecutedIsAFailedStart) {
  const std::string program = File("not-a-program");
  WriteFile(program, "no #! line here\n");
  ASSERT_EQ(::chmod(program.c_str(), 0755), 0);
  auto running = Start(StackJson(
      {}, {"{\"name\": \"bad\", \"command\": \"" + program +
           "\", \"restart\": {\"policy\": \"onFailure\", \"backoffMs\": 10, "
           "\"maxRestarts\": 1}}"}));
  ASSERT_NE(running, nullptr);
  const Launcher::Result result = running->Join();
  const NodeStatus bad = *FindNode(result.status, "bad");
  EXPECT_EQ(bad.state, NodeState::kFailed);
  EXPECT_EQ(bad.starts, 0u);
  EXPECT_EQ(bad.restarts, 1u);
  EXPECT_EQ(bad.last_exit.kind, ExitInfo::Kind::kStartFailed);
  EXPECT_THAT(bad.last_exit.message, HasSubstr("cannot execute " + program));
  EXPECT_THAT(bad.last_exit.message, HasSubstr("a script needs a #! line"));
  EXPECT_THAT(err_.str(), HasSubstr("giving up on node bad after 1 restart: "
                                    "last start failed: node bad: cannot "
                                    "execute"));
}

TEST_F(LauncherTest, StopBeforeRunStartsNothing) {
  const std::string marker = File("started");
  const uint64_t one = 1;
  ASSERT_EQ(::write(stop_fd_, &one, sizeof(one)), 8);
  auto running = Start(
      StackJson({}, {ShellNode("n", "touch '" + marker + "'; exec sleep 30")}));
  ASSERT_NE(running, nullptr);
  const Launcher::Result result = running->Join();
  EXPECT_TRUE(result.stop_requested);
  EXPECT_TRUE(NodeIs(result.status, "n", NodeState::kStopped));
  EXPECT_EQ(FindNode(result.status, "n")->starts, 0u);
  EXPECT_FALSE(FileExists(marker));
}

TEST_F(LauncherTest, RefusedUserSwitchIsAClearStartError) {
  // Where switching to nobody works (real root), launcher_root_test covers
  // it; here (Bazel's sandbox is a user namespace) it must fail clearly.
  const pid_t probe = ::fork();
  if (probe == 0) ::_exit(::setgid(65534) == 0 && ::setuid(65534) == 0 ? 0 : 1);
  int status = 0;
  ::waitpid(probe, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    GTEST_SKIP() << "this process may switch users";
  }
  if (::geteuid() != 0) GTEST_SKIP() << "non-root: refused at Create instead";
  const std::string marker = File("started");
  auto running = Start(StackJson(
      {}, {ShellNode("n", "touch '" + marker + "'", R"(, "user": "nobody")")}));
  ASSERT_NE(running, nullptr);
  const Launcher::Result result = running->Join();
  const NodeStatus n = *FindNode(result.status, "n");
  EXPECT_EQ(n.state, NodeState::kFailed);
  EXPECT_EQ(n.last_exit.kind, ExitInfo::Kind::kStartFailed);
  EXPECT_THAT(n.last_exit.message, HasSubstr("for user nobody failed"));
  EXPECT_THAT(n.last_exit.message,
              HasSubstr("needs a launcher running as root"));
  EXPECT_FALSE(FileExists(marker));
}

TEST_F(LauncherTest, DurationStopsTheStack) {
  LaunchOptions options =
      Options(StackJson({}, {ShellNode("n", "exec sleep 30")}));
  options.duration = milliseconds(300);
  const auto begin = std::chrono::steady_clock::now();
  auto running = StartWith(std::move(options));
  ASSERT_NE(running, nullptr);
  const Launcher::Result result = running->Join();
  EXPECT_GE(std::chrono::steady_clock::now() - begin, milliseconds(300));
  EXPECT_TRUE(result.stop_requested);
  EXPECT_TRUE(NodeIs(result.status, "n", NodeState::kStopped));
  EXPECT_THAT(out_.str(), HasSubstr("--duration 0.30 s is over"));
}

TEST_F(LauncherTest, PublishesStatusAsJsonAndOnTheStatusChannel) {
  LaunchOptions options = Options(
      StackJson({ImuChannel("/test/imu")}, {ShellNode("n", "exec sleep 30")}));
  options.status_json_path = File("status.json");
  options.status_period = milliseconds(50);
  auto running = StartWith(options);
  ASSERT_NE(running, nullptr);
  ASSERT_TRUE(running->WaitFor([](const StackStatus& s) {
    return NodeIs(s, "n", NodeState::kRunning);
  }));
  const pid_t pid = FindNode(running->Last(), "n")->pid;

  // The JSON file.
  absl::StatusOr<test::JsonValue> json;
  ASSERT_TRUE(WaitUntil(
      [&] {
        json = test::ParseJson(testing::ReadFile(options.status_json_path));
        return json.ok() && json->Find("nodes") != nullptr &&
               !json->Find("nodes")->array.empty() &&
               json->Find("nodes")->array[0].Find("state")->string == "running";
      },
      kGenerous));
  EXPECT_EQ(json->Find("phase")->string, "running");
  EXPECT_EQ(json->Find("instance")->string, "test");
  EXPECT_EQ(json->Find("launcher_pid")->number, ::getpid());
  const test::JsonValue& node = json->Find("nodes")->array[0];
  EXPECT_EQ(node.Find("name")->string, "n");
  EXPECT_EQ(node.Find("pid")->number, pid);
  EXPECT_EQ(node.Find("restarts")->number, 0);

  // The channel, read as any tool would (type and schema from the file).
  absl::StatusOr<std::unique_ptr<transport::ChannelHandle>> channel =
      transport::ChannelHandle::Open(root_.options(), kLauncherStatusChannel);
  ASSERT_TRUE(channel.ok()) << channel.status();
  EXPECT_EQ((*channel)->type_name(),
            "tools/launcher_status.capnp:LauncherStatus");
  auto sub = transport::Subscriber<wire::LauncherStatus>::Create(
      channel->get(), {.pin = true, .from_oldest = true});
  ASSERT_TRUE(sub.ok()) << sub.status();
  transport::Message<wire::LauncherStatus> message;
  // Published at least every 50 ms: the newest one shows the running node.
  ASSERT_TRUE(WaitUntil(
      [&] {
        return (*sub)->Latest(&message) == transport::ReceiveStatus::kOk &&
               message.root.getNodes().size() == 1 &&
               message.root.getNodes()[0].getState() ==
                   wire::NodeState::RUNNING;
      },
      kGenerous));
  EXPECT_EQ(message.root.getPhase(), wire::LauncherStatus::Phase::RUNNING);
  EXPECT_EQ(message.root.getLauncherPid(), ::getpid());
  EXPECT_EQ(std::string(message.root.getNodes()[0].getName().cStr()), "n");
  EXPECT_EQ(message.root.getNodes()[0].getPid(), pid);
  (*sub)->Release();

  // A second launcher of the same instance is refused: it would fight the
  // first over the nodes' channels.
  std::ostringstream out2, err2;
  absl::StatusOr<std::unique_ptr<Launcher>> second =
      Launcher::Create(options, DemoTypes(), out2, err2);
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(second.status().message(),
              HasSubstr(absl::StrCat("another launcher (pid ", ::getpid(),
                                     ") is running stack instance \"test\"")));

  running->Stop();
  json = test::ParseJson(testing::ReadFile(options.status_json_path));
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(json->Find("phase")->string, "stopped");
  EXPECT_EQ(json->Find("nodes")->array[0].Find("state")->string, "stopped");
  EXPECT_EQ(json->Find("nodes")
                ->array[0]
                .Find("last_exit")
                ->Find("signal_name")
                ->string,
            "SIGTERM");
}

TEST(LauncherFormat, SummaryAndExitDescriptions) {
  StackStatus status;
  NodeStatus a;
  a.name = "alpha";
  a.state = NodeState::kRunning;
  a.pid = 42;
  NodeStatus b;
  b.name = "b";
  b.state = NodeState::kFailed;
  b.restarts = 3;
  b.last_exit = {ExitInfo::Kind::kSignal, SIGSEGV, ""};
  status.nodes = {a, b};
  const std::string table = FormatSummary(status);
  EXPECT_THAT(table, HasSubstr("NODE   STATE    PID  RESTARTS  LAST EXIT\n"));
  EXPECT_THAT(table, HasSubstr("alpha  running   42         0  -\n"));
  EXPECT_THAT(
      table, HasSubstr("b      failed     -         3  signal 11 (SIGSEGV)\n"));
  EXPECT_EQ(DescribeExit({ExitInfo::Kind::kCode, 3, ""}), "exit code 3");
  EXPECT_EQ(DescribeExit({ExitInfo::Kind::kStartFailed, 0, "why"}),
            "start failed: why");
  EXPECT_TRUE(test::ParseJson(FormatStatusJson(status)).ok());
}


}  // namespace
}  // namespace tether::tools
