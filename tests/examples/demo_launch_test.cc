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
#include "tests/examples/demo_run.h"
#include "tests/shm/shm_test_util.h"

namespace tether::examples {
namespace {

using ::testing::HasSubstr;

using examples::testing::DemoWorkdir;
using examples::testing::ExpectTheDemoRanWell;
using examples::testing::RunCommand;

TEST(DemoLaunch, EveryChannelFlowsAndNothingIsMissed) {
  shm::testing::ScopedRoot root;
  DemoWorkdir workdir(root.root() + "-work");
  const std::string& work = workdir.path();
  const std::string where = " --root " + root.root() + " --instance demo";
  FILE* launch = ::popen(("tools/tether launch " + work +
                          "/examples/config/example_stack.json" + where +
                          " --duration 10 --workdir " + work + " 2>&1")
                             .c_str(),
                         "r");
  ASSERT_NE(launch, nullptr);
  // While the stack runs: the CLI against it, once the launcher has made
  // its channels (waited for, not slept on: a loaded machine starts late).
  int tool_status = 0;
  std::string list;
  for (int i = 0; i < 200; ++i) {
    list = RunCommand("tools/tether list" + where + " 2>/dev/null",
                      &tool_status);
    if (tool_status == 0 &&
        list.find("/tether/launcher/status") != std::string::npos) {
      break;
    }
    ::usleep(100 * 1000);
  }
  EXPECT_EQ(tool_status, 0);
  EXPECT_THAT(list, HasSubstr("examples/demo.capnp:JointCommand"));
  EXPECT_THAT(list, HasSubstr("/tether/launcher/status"));
  const std::string echo = RunCommand(
      "timeout 20 tools/tether echo /robot/joint_command --count 2 "
      "--context" + where +
          " 2>/dev/null",
      &tool_status);
  EXPECT_EQ(tool_status, 0);
  EXPECT_THAT(echo, HasSubstr("\"leftEffortNm\""));
  EXPECT_THAT(echo, HasSubstr("\"latency_us\""));
  const std::string stat = RunCommand(
      "timeout 20 tools/tether stat /robot/imu,/robot/joint_command "
      "--duration 1" + where,
      &tool_status);
  EXPECT_EQ(tool_status, 0);
  // Messages seen in its second (a count, not a rate: other tests load the
  // machine).
  EXPECT_TRUE(std::regex_search(
      stat, std::regex(R"(/robot/imu\s+[1-9]\d*\s+\d+\s)")))
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
  SCOPED_TRACE(out);
  ASSERT_EQ(status, 0);
  ExpectTheDemoRanWell(out);
}

}  // namespace
}  // namespace tether::examples
