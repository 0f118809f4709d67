// The launcher's restart decisions without processes: which policies
// restart which exits, the doubling backoff and its cap, a stable run
// starting the doubling over (a failed start never does), and maxRestarts.
#include "tools/restart_policy.h"

#include <chrono>
#include <vector>

#include "gtest/gtest.h"

namespace tether::tools {
namespace {

using std::chrono::milliseconds;
using transport::config::RestartPolicy;
using Action = RestartDecision::Action;

constexpr milliseconds kStable{10000};
constexpr milliseconds kShort{100};

RestartRule Rule(RestartPolicy policy, uint32_t max_restarts = 0) {
  return {policy, /*backoff_ms=*/100, /*max_backoff_ms=*/1000, max_restarts};
}

TEST(DecideRestart, PolicyDecidesWhichExitsRestart) {
  RestartHistory h;
  EXPECT_EQ(DecideRestart(Rule(RestartPolicy::NEVER), true, false, kShort,
                          kStable, &h)
                .action,
            Action::kDone);
  EXPECT_EQ(DecideRestart(Rule(RestartPolicy::ON_FAILURE), false, false, kShort,
                          kStable, &h)
                .action,
            Action::kDone);
  EXPECT_EQ(h.restarts, 0u);
  EXPECT_EQ(DecideRestart(Rule(RestartPolicy::ON_FAILURE), true, false, kShort,
                          kStable, &h)
                .action,
            Action::kRestart);
  EXPECT_EQ(DecideRestart(Rule(RestartPolicy::ALWAYS), false, false, kShort,
                          kStable, &h)
                .action,
            Action::kRestart);
  EXPECT_EQ(h.restarts, 2u);
}

TEST(DecideRestart, BackoffDoublesUpToItsCap) {
  RestartHistory h;
  std::vector<int64_t> delays;
  for (int i = 0; i < 6; ++i) {
    delays.push_back(DecideRestart(Rule(RestartPolicy::ALWAYS), true, false,
                                   kShort, kStable, &h)
                         .delay.count());
  }
  EXPECT_EQ(delays, (std::vector<int64_t>{100, 200, 400, 800, 1000, 1000}));
}

TEST(DecideRestart, StableRunStartsTheDoublingOverButAFailedStartDoesNot) {
  RestartHistory h;
  for (int i = 0; i < 3; ++i) {
    DecideRestart(Rule(RestartPolicy::ALWAYS), true, false, kShort, kStable,
                  &h);
  }
  // A failed start, however long ago the last one: still doubling.
  EXPECT_EQ(DecideRestart(Rule(RestartPolicy::ALWAYS), true, true, kStable * 2,
                          kStable, &h)
                .delay,
            milliseconds(800));
  EXPECT_EQ(DecideRestart(Rule(RestartPolicy::ALWAYS), true, false, kStable,
                          kStable, &h)
                .delay,
            milliseconds(100));
}

TEST(DecideRestart, MaxRestartsCountsEveryRestartThenGivesUp) {
  RestartHistory h;
  const RestartRule rule = Rule(RestartPolicy::ALWAYS, /*max_restarts=*/2);
  EXPECT_EQ(DecideRestart(rule, true, false, kStable, kStable, &h).action,
            Action::kRestart);
  EXPECT_EQ(DecideRestart(rule, true, false, kStable, kStable, &h).action,
            Action::kRestart);
  const RestartDecision third =
      DecideRestart(rule, true, false, kStable, kStable, &h);
  EXPECT_EQ(third.action, Action::kGiveUp);
  EXPECT_EQ(h.restarts, 2u);
}

TEST(RestartPolicyName, SpelledAsTheConfigSpellsThem) {
  EXPECT_STREQ(RestartPolicyName(RestartPolicy::NEVER), "never");
  EXPECT_STREQ(RestartPolicyName(RestartPolicy::ON_FAILURE), "onFailure");
  EXPECT_STREQ(RestartPolicyName(RestartPolicy::ALWAYS), "always");
}

}  // namespace
}  // namespace tether::tools
