// Runs the real `tether` binary (a data dependency) as a user would.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/tools/run_tether.h"
#include "loop/kernel_probe.h"
#include "tests/tools/json_test_parser.h"

namespace tether::tools {
namespace {

using test::JsonValue;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

using test::Outcome;
using test::RunTether;

TEST(TetherBinary, HelpListsTheDoctorAndExitsZero) {
  const Outcome o = RunTether({"--help"});
  EXPECT_EQ(o.code, 0);
  EXPECT_THAT(o.out, HasSubstr("usage: tether <command>"));
  EXPECT_THAT(o.out, HasSubstr("doctor"));
  EXPECT_THAT(o.err, IsEmpty());
}

TEST(TetherBinary, UnknownCommandListsTheCommandsAndExitsTwo) {
  const Outcome o = RunTether({"launch-the-rockets"});
  EXPECT_EQ(o.code, 2);
  EXPECT_THAT(o.out, IsEmpty());
  EXPECT_THAT(o.err, HasSubstr("unknown command 'launch-the-rockets'"));
  EXPECT_THAT(o.err, HasSubstr("doctor"));
}

TEST(TetherBinary, NoCommandExitsTwo) {
  const Outcome o = RunTether({});
  EXPECT_EQ(o.code, 2);
  EXPECT_THAT(o.err, HasSubstr("usage: tether <command>"));
}

TEST(TetherBinary, DoctorHelpDescribesItsOptions) {
  const Outcome o = RunTether({"doctor", "--help"});
  EXPECT_EQ(o.code, 0);
  EXPECT_THAT(o.out, HasSubstr("usage: tether doctor"));
  EXPECT_THAT(o.out, HasSubstr("--json"));
  EXPECT_EQ(RunTether({"doctor", "--bogus"}).code, 2);
}

TEST(TetherBinary, DoctorJsonPassesOnThisMachineWithTheExpectedKeys) {
  const Outcome o = RunTether({"doctor", "--json"});
  EXPECT_EQ(o.code, 0) << o.out << o.err;
  absl::StatusOr<JsonValue> json = test::ParseJson(o.out);
  ASSERT_TRUE(json.ok()) << json.status() << "\n" << o.out;
  for (const char* key : {"ok", "counts", "wake_backend", "kernel", "checks"}) {
    EXPECT_NE(json->Find(key), nullptr) << key;
  }
  ASSERT_NE(json->Find("ok"), nullptr);
  EXPECT_TRUE(json->Find("ok")->boolean);
  EXPECT_EQ(json->Find("counts")->Find("fail")->number, 0);

  const std::optional<loop::KernelVersion> version =
      loop::ParseKernelRelease(json->Find("kernel")->Find("release")->string);
  ASSERT_TRUE(version.has_value());
  const bool futex_ops = *version >= loop::KernelVersion{6, 7, 0};
  EXPECT_EQ(json->Find("kernel")->Find("op_futex_wait")->boolean, futex_ops);
  EXPECT_EQ(json->Find("wake_backend")->string,
            futex_ops ? "uring_futex" : "futex_waitv");

  const std::set<std::string> verdicts = {"OK", "WARN", "FAIL"};
  std::set<std::string> ids;
  const JsonValue* checks = json->Find("checks");
  ASSERT_NE(checks, nullptr);
  for (const JsonValue& check : checks->array) {
    for (const char* key : {"id", "title", "verdict", "detail", "fix"}) {
      ASSERT_NE(check.Find(key), nullptr) << key;
      EXPECT_EQ(check.Find(key)->kind, JsonValue::Kind::kString) << key;
    }
    ids.insert(check.Find("id")->string);
    EXPECT_EQ(verdicts.count(check.Find("verdict")->string), 1u);
    EXPECT_NE(check.Find("verdict")->string, "FAIL")
        << check.Find("id")->string << ": " << check.Find("detail")->string;
    if (check.Find("verdict")->string == "WARN") {
      EXPECT_THAT(check.Find("fix")->string, Not(IsEmpty()));
    }
  }
  EXPECT_EQ(ids, (std::set<std::string>{"io_uring", "io_uring_futex",
                                        "ring_setup", "wake_backend",
                                        "preempt_rt", "rtprio", "memlock",
                                        "dev_shm", "huge_pages", "cpus",
                                        "cpu_governor",
                                        "logind_remove_ipc",
                                        "channel_folders",
                                        "deadline_timer"}));
}

TEST(TetherBinary, DoctorTextReportEndsWithTheCounts) {
  const Outcome o = RunTether({"doctor"});
  EXPECT_EQ(o.code, 0) << o.out << o.err;
  EXPECT_THAT(o.out, HasSubstr("OK    io_uring enabled"));
  EXPECT_THAT(o.out, ::testing::EndsWith(" 0 FAIL\n"));
}

// --root (or $TETHER_ROOT) points the filesystem and instance checks at
// that root: here one that does not exist yet, under the test's own folder.
TEST(TetherBinary, DoctorChecksTheRootItIsGiven) {
  const std::string tmp = std::getenv("TEST_TMPDIR");
  const Outcome o = RunTether({"doctor", "--root", tmp + "/no/root/yet"});
  EXPECT_THAT(o.out, HasSubstr(tmp + " (channel files)")) << o.out << o.err;
  EXPECT_THAT(o.out, ::testing::Not(HasSubstr("/dev/shm (channel files)")));
}

}  // namespace
}  // namespace tether::tools
