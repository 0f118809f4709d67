// Test helpers for demo_replay_test: the demo stack recorded as a user
// would (the real launcher, the real node binaries and `tether record` as a
// node of the stack), whether the recorder joined a channel late, and where
// in the recording the replayed controller must start so that its first
// cycles see what the live one saw; the controller's cycle slots.
#ifndef TETHER_TESTS_LOG_DEMO_RECORDING_H_
#define TETHER_TESTS_LOG_DEMO_RECORDING_H_

#include <cstdint>
#include <string>

namespace tether::log::testing {

inline constexpr int64_t kPeriodNs = 1'000'000;
inline constexpr int64_t kPhaseNs = 500'000;  // the controller's phase offset
// The controller's phase point a send at `t` belongs to (its cycle runs at
// the phase point, or late, and sends right after).
inline int64_t Slot(int64_t t) { return (t - kPhaseNs) / kPeriodNs; }
inline int64_t SlotTime(int64_t slot) { return slot * kPeriodNs + kPhaseNs; }

// Runs the demo stack with the recorder as one more node of it, for 3 s.
// Returns the launcher's exit status.
int RecordDemo(const std::string& log, std::string* output);

// The demo's channels, which the recorder must hold from their first
// message on.
inline constexpr const char* kDemoChannels[] = {
    "/robot/imu", "/robot/joint_state", "/robot/state_estimate",
    "/robot/joint_command", "/plant/state"};

// Empty when the recorder started in time to read every demo channel from
// its first message (it starts after the demo's nodes; a loaded machine can
// start it after a 256-deep queue has lapped once); otherwise which channel
// it joined late.
std::string RecorderStartedLate(const std::string& log);

// When to make the replayed controller so that its first cycles see what
// the live one saw. Its first cycle runs at the first phase point after it
// is made, and its fetchers see what is sent after it is made: so it is made
// in the millisecond before the live first cycle's phase point, after every
// input the live one did not see. Candidates are just after each input sent
// in that millisecond; the first one under which every live cycle up to the
// first tracking one is explained wins: an idle cycle saw no estimate, the
// tracking cycle saw the newest estimate sent by its phase point and no
// input arrived between its phase point and its send (live, it did not run
// late past one). `why` says what did not fit when none does.
struct ControllerStart {
  int64_t make_at = 0;
  std::string why;
};

ControllerStart PlanControllerStart(const std::string& log);

}  // namespace tether::log::testing

#endif  // TETHER_TESTS_LOG_DEMO_RECORDING_H_
