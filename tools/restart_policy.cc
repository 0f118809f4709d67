#include "tools/restart_policy.h"

#include <algorithm>

namespace tether::tools {

RestartDecision DecideRestart(const RestartRule& rule, bool failed,
                              bool start_failed,
                              std::chrono::steady_clock::duration ran_for,
                              std::chrono::milliseconds stable_run,
                              RestartHistory* history) {
  using transport::config::RestartPolicy;
  const bool restart = rule.policy == RestartPolicy::ALWAYS ||
                       (rule.policy == RestartPolicy::ON_FAILURE && failed);
  if (!restart) return {RestartDecision::Action::kDone};
  if (rule.max_restarts != 0 && history->restarts >= rule.max_restarts) {
    return {RestartDecision::Action::kGiveUp};
  }
  if (!start_failed && ran_for >= stable_run) history->backoff_doublings = 0;
  uint64_t delay = rule.backoff_ms;
  for (uint32_t i = 0;
       i < history->backoff_doublings && delay < rule.max_backoff_ms; ++i) {
    delay *= 2;
  }
  delay = std::min<uint64_t>(delay, rule.max_backoff_ms);
  ++history->backoff_doublings;
  ++history->restarts;
  return {RestartDecision::Action::kRestart,
          std::chrono::milliseconds(static_cast<int64_t>(delay))};
}

const char* RestartPolicyName(transport::config::RestartPolicy policy) {
  switch (policy) {
    case transport::config::RestartPolicy::NEVER:
      return "never";
    case transport::config::RestartPolicy::ON_FAILURE:
      return "onFailure";
    case transport::config::RestartPolicy::ALWAYS:
      return "always";
  }
  return "?";
}

}  // namespace tether::tools
