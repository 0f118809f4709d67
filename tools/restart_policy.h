// tools: whether and when the launcher restarts a node that ended -- its
// restart policy, restart.maxRestarts and the exponential backoff of
// transport/config.capnp's Restart -- as a pure function that the
// supervisor (tools/launcher.h) applies and tests check without processes.
//
// Backoff: the n-th restart in a row waits min(backoffMs * 2^(n-1),
// maxBackoffMs); a run that lasted at least `stable_run` starts the
// doubling over (a start that failed never counts as a run).
// maxRestarts (0: no limit) counts every restart of the launch.
#ifndef TETHER_TOOLS_RESTART_POLICY_H_
#define TETHER_TOOLS_RESTART_POLICY_H_

#include <chrono>
#include <cstdint>

#include "transport/config.capnp.h"

namespace tether::tools {

// A node's restart settings, from its config's "restart".
struct RestartRule {
  transport::config::RestartPolicy policy =
      transport::config::RestartPolicy::NEVER;
  uint32_t backoff_ms = 0;
  uint32_t max_backoff_ms = 0;
  uint32_t max_restarts = 0;  // 0: no limit.
};

// What happened to one node so far in the launch.
struct RestartHistory {
  uint32_t restarts = 0;
  uint32_t backoff_doublings = 0;  // Restarts in a row since a stable run.
};

struct RestartDecision {
  enum class Action {
    kDone,     // The policy does not restart it (exited or failed).
    kGiveUp,   // It would restart, but maxRestarts is used up.
    kRestart,  // Restart after `delay`.
  };
  Action action = Action::kDone;
  std::chrono::milliseconds delay{0};
};

// Decides for a node that ended: `failed` unless it exited with code 0,
// `start_failed` if its program never ran, after running for `ran_for`. A
// restart counts itself in `history`. Any thread; RT-safe.
RestartDecision DecideRestart(const RestartRule& rule, bool failed,
                              bool start_failed,
                              std::chrono::steady_clock::duration ran_for,
                              std::chrono::milliseconds stable_run,
                              RestartHistory* history);

// "never", "onFailure", "always" (as the config spells them). Any thread;
// RT-safe.
const char* RestartPolicyName(transport::config::RestartPolicy policy);

}  // namespace tether::tools

#endif  // TETHER_TOOLS_RESTART_POLICY_H_
