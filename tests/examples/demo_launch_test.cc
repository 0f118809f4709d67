// The demo as `./tether demo` runs it: the real `tether launch` binary
// starts the five real node binaries from examples/config/example_stack.json
// for a few seconds, while list, echo, stat, doctor and pub run against it;
// the summary must show every channel flowing at its rate with nothing
// missed, the controller tracking, and every node stopped cleanly.
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <regex>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/shm/shm_test_util.h"

namespace tether::examples {
namespace {

using ::testing::HasSubstr;

std::string RunCommand(const std::string& command, int* status) {
  std::string out;
  FILE* p = ::popen(command.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  *status = ::pclose(p);
  return out;
}

TEST(DemoLaunch, EveryChannelFlowsAndNothingIsMissed) {
  shm::testing::ScopedRoot root;
  // The config names binaries as bazel-bin/examples/<node> (run from the
  // repo root); in runfiles they are examples/<node>: a working directory
  // with bazel-bin -> the runfiles root makes both hold.
  char cwd[4096];
  ASSERT_NE(::getcwd(cwd, sizeof(cwd)), nullptr);
  const std::string work = root.root() + "-work";
  ASSERT_EQ(::mkdir(work.c_str(), 0755), 0);
  ASSERT_EQ(::symlink(cwd, (work + "/bazel-bin").c_str()), 0);
  ASSERT_EQ(::symlink((std::string(cwd) + "/examples").c_str(),
                      (work + "/examples").c_str()),
            0);
  const std::string where = " --root " + root.root() + " --instance demo";
  FILE* launch = ::popen(("tools/tether launch " + work +
                          "/examples/config/example_stack.json" + where +
                          " --duration 4 --workdir " + work + " 2>&1")
                             .c_str(),
                         "r");
  ASSERT_NE(launch, nullptr);
  // While the stack runs: the CLI against it.
  ::usleep(1500 * 1000);
  int tool_status = 0;
  const std::string list = RunCommand("tools/tether list" + where, &tool_status);
  EXPECT_EQ(tool_status, 0);
  EXPECT_THAT(list, HasSubstr("examples/demo.capnp:JointCommand"));
  EXPECT_THAT(list, HasSubstr("/tether/launcher/status"));
  const std::string echo = RunCommand(
      "tools/tether echo /robot/joint_command --count 2 --context" + where +
          " 2>/dev/null",
      &tool_status);
  EXPECT_EQ(tool_status, 0);
  EXPECT_THAT(echo, HasSubstr("\"leftEffortNm\""));
  EXPECT_THAT(echo, HasSubstr("\"latency_us\""));
  const std::string stat = RunCommand(
      "tools/tether stat /robot/imu,/robot/joint_command --duration 1" + where,
      &tool_status);
  EXPECT_EQ(tool_status, 0);
  EXPECT_TRUE(std::regex_search(
      stat, std::regex(R"(/robot/imu\s+\d{3,}\s+0\s)")))
      << stat;
  const std::string doctor = RunCommand("tools/tether doctor", &tool_status);
  EXPECT_THAT(doctor, HasSubstr("wake backend"));
  // pub on a channel nobody else writes is refused only if it is full of
  // publishers: /monitor/status allows one (the monitor's).
  const std::string pub = RunCommand(
      "tools/tether pub /monitor/status '{}'" + where + " 2>&1", &tool_status);
  EXPECT_NE(tool_status, 0);
  EXPECT_THAT(pub, HasSubstr("maxPublishers"));

  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), launch)) > 0) out.append(buf, n);
  const int status = ::pclose(launch);
  if (std::system(("rm -rf '" + work + "'").c_str()) != 0) ADD_FAILURE();
  SCOPED_TRACE(out);
  ASSERT_EQ(status, 0);
  // The monitor's summary: every 1 kHz channel at about its rate, 0 missed.
  for (const char* channel :
       {"/robot/imu", "/robot/joint_state", "/robot/state_estimate",
        "/robot/joint_command", "/plant/state"}) {
    std::regex row(std::string("\\[monitor\\] ") + channel +
                   R"(\s+(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+))");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(out, m, row)) << channel;
    const long sent = std::stol(m[1]), received = std::stol(m[2]),
               missed = std::stol(m[3]);
    const double rate = std::stod(m[4]);
    // ~4 s at 1 kHz minus start-up; other tests may load the machine (the
    // phased loops then skip cycles, counted by the controller), so the
    // bounds are loose: flowing, at about its rate, nothing lost.
    EXPECT_GT(sent, 1000) << channel;
    EXPECT_EQ(received, sent) << channel;
    EXPECT_EQ(missed, 0) << channel;
    EXPECT_GT(rate, 500) << channel;
    EXPECT_LT(rate, 1100) << channel;
  }
  // The controller tracked (millimetres, not metres) and says so.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      out, m, std::regex(R"(\[controller\] controller: tracking rms ([\d.]+) mm)")));
  EXPECT_LT(std::stod(m[1]), 20.0);
  // Every node stopped by the launcher, cleanly, in the summary.
  for (const char* node :
       {"sensors", "estimator", "controller", "actuator", "monitor"}) {
    EXPECT_TRUE(std::regex_search(
        out, std::regex(std::string("\n") + node + R"(\s+stopped\s+-\s+0\s+exit code 0)")))
        << node;
  }
}

}  // namespace
}  // namespace tether::examples
