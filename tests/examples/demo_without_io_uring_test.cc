// The demo where io_uring is refused, as Docker's default seccomp profile
// refuses it: every node picks the futex_waitv wake backend on its own,
// says so and why, and the stack runs as well as with io_uring.
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

TEST(DemoWithoutIoUring, NodesFallBackToFutexWaitvAndTheStackRuns) {
  for (const char* errno_name : {"EPERM", "ENOSYS"}) {
    SCOPED_TRACE(errno_name);
    shm::testing::ScopedRoot root;
    DemoWorkdir workdir(root.root() + "-work");
    const std::string where = " --root " + root.root() + " --instance demo";
    int status = 0;
    const std::string out = RunCommand(
        std::string("tests/util/no_io_uring --errno=") + errno_name +
            " tools/tether launch " + workdir.path() +
            "/examples/config/example_stack.json" + where +
            " --duration 3 --workdir " + workdir.path() + " 2>&1",
        &status);
    SCOPED_TRACE(out);
    ASSERT_EQ(status, 0);
    // Each node says which backend runs and why.
    for (const char* node : {"sensors", "estimator", "controller", "actuator",
                             "monitor"}) {
      EXPECT_THAT(out, HasSubstr(std::string("[") + node + "] " + node +
                                 ": running (futex_waitv: io_uring is not "
                                 "usable here"))
          << node;
    }
    EXPECT_THAT(out, HasSubstr(errno_name));
    ExpectTheDemoRanWell(out);
  }
}

}  // namespace
}  // namespace tether::examples
