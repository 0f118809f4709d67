// Test helper: runs the real `tether` binary (a data dependency of the test)
// with arguments, as a user would, and returns its exit code and output.
#ifndef TETHER_TESTS_TOOLS_RUN_TETHER_H_
#define TETHER_TESTS_TOOLS_RUN_TETHER_H_

#include <string>
#include <vector>

namespace tether::tools::test {

struct Outcome {
  int code = -1;  // exit code, or 128 + signal
  std::string out;
  std::string err;
};

// The binary's path in the test's runfiles.
std::string TetherPath();

// Runs `tether args...`, capturing stdout and stderr through files in
// TEST_TMPDIR. Blocks until it exits; a failure to start is a test failure.
Outcome RunTether(std::vector<std::string> args);

}  // namespace tether::tools::test

#endif  // TETHER_TESTS_TOOLS_RUN_TETHER_H_
