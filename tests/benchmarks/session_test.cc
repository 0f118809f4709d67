// The bench runners' command line: every flag parses into the session, and
// bad input is refused with a message that names the flag and what would
// be valid.
#include "benchmarks/harness/session.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tether::bench {
namespace {

absl::StatusOr<Session> Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "runner");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return ParseSession(static_cast<int>(argv.size()), argv.data());
}

TEST(ParseCases, ReadsPayloadModeSamplesAndWarmup) {
  auto cases = ParseCases("64:touch16:500:50,1048576:full");
  ASSERT_TRUE(cases.ok()) << cases.status();
  ASSERT_EQ(cases->size(), 2u);
  EXPECT_EQ((*cases)[0].payload, 64u);
  EXPECT_EQ((*cases)[0].mode, WriteMode::kTouch16);
  EXPECT_EQ((*cases)[0].samples, 500);
  EXPECT_EQ((*cases)[0].warmup, 50);
  EXPECT_EQ((*cases)[1].payload, 1048576u);
  EXPECT_EQ((*cases)[1].mode, WriteMode::kFull);
  EXPECT_EQ((*cases)[1].samples, 1000);  // the defaults
  EXPECT_EQ((*cases)[1].warmup, 100);
}

TEST(ParseCases, RefusesPayloadsSmallerThanTheHeaderAndUnknownModes) {
  auto small = ParseCases("16:touch16");
  ASSERT_FALSE(small.ok());
  EXPECT_NE(small.status().message().find(">= 64"), std::string::npos)
      << small.status();
  auto mode = ParseCases("64:zero");
  ASSERT_FALSE(mode.ok());
  EXPECT_NE(mode.status().message().find("touch16 or full"), std::string::npos)
      << mode.status();
  EXPECT_FALSE(ParseCases("64:full:0").ok());
  EXPECT_FALSE(ParseCases("").ok());
}

TEST(ParseSession, FillsEveryFlag) {
  auto s = Parse({"--test=fanout", "--cases=64:touch16:10:1", "--pongs=4",
                  "--variant=futex_waitv", "--spin_us=50", "--ping_cpu=0",
                  "--pong_cpu=1", "--shm_root=/dev/shm/x", "--timeout_s=9",
                  "--name=tether"});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->test, bench::Test::kFanout);
  EXPECT_EQ(s->pongs, 4);
  EXPECT_EQ(s->variant, "futex_waitv");
  EXPECT_EQ(s->spin_us, 50);
  EXPECT_EQ(s->ping_cpu, 0);
  EXPECT_EQ(s->pong_cpu, 1);
  EXPECT_EQ(s->shm_root, "/dev/shm/x");
  EXPECT_EQ(s->timeout_s, 9);
  EXPECT_EQ(s->name, "tether");
  EXPECT_EQ(s->max_payload(), 64u);
}

TEST(ParseSession, ThroughputNeedsNoCasesAndSizesForItsPayload) {
  auto s = Parse({"--test=throughput", "--payload=4096", "--phase_ms=50"});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->max_payload(), 4096u);
  EXPECT_EQ(s->phase_ms, 50);
}

TEST(ParseSession, RefusesWhatCannotRunAndSaysWhy) {
  auto no_cases = Parse({"--test=latency"});
  ASSERT_FALSE(no_cases.ok());
  EXPECT_NE(no_cases.status().message().find("--cases"), std::string::npos);
  auto many = Parse({"--test=fanout", "--cases=64:full", "--pongs=17"});
  ASSERT_FALSE(many.ok());
  EXPECT_NE(many.status().message().find("1..16"), std::string::npos);
  auto latency_pongs = Parse({"--cases=64:full", "--pongs=2"});
  EXPECT_FALSE(latency_pongs.ok());
  auto unknown = Parse({"--cases=64:full", "--bogus=1"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("--bogus"), std::string::npos);
  auto nan = Parse({"--cases=64:full", "--ping_cpu=one"});
  ASSERT_FALSE(nan.ok());
  EXPECT_NE(nan.status().message().find("not a number"), std::string::npos);
  auto test = Parse({"--test=speed"});
  ASSERT_FALSE(test.ok());
  EXPECT_NE(test.status().message().find("latency, fanout or throughput"),
            std::string::npos);
}

TEST(ParseSession, TheApiIsTypedUnlessRawIsAskedForLatencyOrFanout) {
  auto typed = Parse({"--cases=64:full"});
  ASSERT_TRUE(typed.ok()) << typed.status();
  EXPECT_FALSE(typed->raw_api);
  auto raw = Parse({"--cases=64:full", "--api=raw"});
  ASSERT_TRUE(raw.ok()) << raw.status();
  EXPECT_TRUE(raw->raw_api);
  auto named = Parse({"--cases=64:full", "--api=typed"});
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_FALSE(named->raw_api);
  auto bogus = Parse({"--cases=64:full", "--api=capnp"});
  ASSERT_FALSE(bogus.ok());
  EXPECT_NE(bogus.status().message().find("typed or raw"), std::string::npos)
      << bogus.status();
  auto throughput = Parse({"--test=throughput", "--api=raw"});
  ASSERT_FALSE(throughput.ok());
  EXPECT_NE(throughput.status().message().find("latency and fanout"),
            std::string::npos)
      << throughput.status();
}

}  // namespace
}  // namespace tether::bench
