// Test helpers for running the real demo stack through the real launcher
// binary (tests/examples): a working directory in which the stack config's
// paths hold, running commands, and the checks of the monitor's summary.
#ifndef TETHER_TESTS_EXAMPLES_DEMO_RUN_H_
#define TETHER_TESTS_EXAMPLES_DEMO_RUN_H_

#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <regex>
#include <string>

#include "gtest/gtest.h"
#include "tests/util/run_command.h"

namespace tether::examples::testing {

// The config names binaries as bazel-bin/examples/<node> (run from the repo
// root); in runfiles they are examples/<node>: a working directory with
// bazel-bin -> the runfiles root (and the packages linked in) makes both
// hold. Removed when destroyed.
class DemoWorkdir {
 public:
  DemoWorkdir(const std::string& path,
              std::initializer_list<const char*> packages = {"examples"})
      : path_(path) {
    char cwd[4096];
    EXPECT_NE(::getcwd(cwd, sizeof(cwd)), nullptr);
    EXPECT_EQ(::mkdir(path_.c_str(), 0755), 0);
    EXPECT_EQ(::symlink(cwd, (path_ + "/bazel-bin").c_str()), 0);
    for (const char* package : packages) {
      EXPECT_EQ(::symlink((std::string(cwd) + "/" + package).c_str(),
                          (path_ + "/" + package).c_str()),
                0);
    }
  }
  ~DemoWorkdir() {
    if (std::system(("rm -rf '" + path_ + "'").c_str()) != 0) ADD_FAILURE();
  }
  DemoWorkdir(const DemoWorkdir&) = delete;
  DemoWorkdir& operator=(const DemoWorkdir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

using ::tether::testing::RunCommand;

// The monitor's summary in the launcher's output `out`: every 1 kHz channel
// flowed with nothing missed, the controller tracked, and every node stopped
// cleanly. No rates: other tests load the machine (the phased loops then skip
// cycles, counted by the controller), and timing belongs in benchmarks.
inline void ExpectTheDemoRanWell(const std::string& out) {
  for (const char* channel :
       {"/robot/imu", "/robot/joint_state", "/robot/state_estimate",
        "/robot/joint_command", "/plant/state"}) {
    std::regex row(std::string("\\[monitor\\] ") + channel +
                   R"(\s+(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+))");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(out, m, row)) << channel;
    const long sent = std::stol(m[1]), received = std::stol(m[2]),
               missed = std::stol(m[3]);
    EXPECT_GT(sent, 200) << channel;
    EXPECT_EQ(received, sent) << channel;
    EXPECT_EQ(missed, 0) << channel;
  }
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      out, m,
      std::regex(R"(\[controller\] controller: tracking rms ([\d.]+) mm)")));
  EXPECT_LT(std::stod(m[1]), 20.0);
  for (const char* node :
       {"sensors", "estimator", "controller", "actuator", "monitor"}) {
    EXPECT_TRUE(std::regex_search(
        out, std::regex(std::string("\n") + node +
                        R"(\s+stopped\s+-\s+0\s+exit code 0)")))
        << node;
  }
}

}  // namespace tether::examples::testing

#endif  // TETHER_TESTS_EXAMPLES_DEMO_RUN_H_
