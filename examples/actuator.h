// examples: the demo stack's actuator node. It plays the motor drives *and*
// the robot: it owns the plant (a DiffDrivePlant), holds the latest
// JointCommand from /robot/joint_command, and in a 1 kHz phased loop applies
// it (with the motors' torque limits) and integrates the physics, then
// publishes the plant's true wheel state on /plant/state for the sensors
// node to sample. A command older than `command_timeout` (controller dead or
// late) is replaced by zero torque, as a drive's watchdog would.
//
// Why here: applying efforts and integrating them are one step, so the
// physics lives where the commands arrive; the sensors node stays a pure
// sampler that adds noise. Across processes the only coupling is the
// /plant/state channel (true state, never read by the controller side).
#ifndef TETHER_EXAMPLES_ACTUATOR_H_
#define TETHER_EXAMPLES_ACTUATOR_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "examples/demo.capnp.h"
#include "examples/plant.h"
#include "loop/event_loop.h"

namespace tether::examples {

struct ActuatorOptions {
  std::string command_channel = "/robot/joint_command";
  std::string plant_channel = "/plant/state";
  // Physics step: every `period` at phase `phase_offset` (on the monotonic
  // clock's grid, so nodes in other processes line up with it), split into
  // `substeps` integration steps.
  loop::Duration period = std::chrono::milliseconds(1);
  loop::Duration phase_offset = loop::Duration::zero();
  int substeps = 4;
  // A command older than this (by its receive time) is not applied.
  loop::Duration command_timeout = std::chrono::milliseconds(20);
  // A late loop integrates the time it missed, up to this many periods (the
  // plant is "reality"; it does not pause), then drops the rest.
  int max_catch_up_periods = 100;
  PlantParams plant;
  PlantState initial;
};

struct ActuatorStats {
  uint64_t steps = 0;            // phased-loop runs
  uint64_t missed_steps = 0;     // phase points run late (integrated anyway)
  uint64_t commands = 0;         // commands received
  uint64_t missed_commands = 0;  // commands lost before the watcher saw them
  // Commands whose bytes failed the typed check (skipped, never acted on).
  uint64_t malformed_commands = 0;
  uint64_t stale_steps = 0;      // steps with no fresh command (zero torque)
  uint64_t saturated_steps = 0;  // a motor limit clipped the command
  uint64_t publish_failures = 0;
};

// Loop thread only. Constructed before the loop runs; lives as long as it.
class ActuatorNode {
 public:
  // Makes the sender, watcher and phased loop. Errors name the channel.
  // Setup; allocates.
  static absl::StatusOr<std::unique_ptr<ActuatorNode>> Create(
      loop::EventLoop* loop, const ActuatorOptions& options = {});
  ActuatorNode(const ActuatorNode&) = delete;
  ActuatorNode& operator=(const ActuatorNode&) = delete;

  // The true state (for tests and the demo summary). Loop thread (or after
  // the loop ended).
  const DiffDrivePlant& plant() const { return plant_; }
  // With malformed_commands from the watcher's own counters.
  ActuatorStats stats() const;

 private:
  ActuatorNode(loop::EventLoop* loop, const ActuatorOptions& options);
  absl::Status Init();
  // Watcher: keep the torques the command asks for. RT-safe.
  void OnCommand(JointCommand::Reader command,
                 const loop::MessageContext& context);
  // Phased loop: apply, integrate, publish. RT-safe.
  void Step(int cycles);

  loop::EventLoop* const loop_;
  const ActuatorOptions options_;
  DiffDrivePlant plant_;
  std::unique_ptr<loop::Sender<JointState>> plant_sender_;
  const loop::WatcherHandle* command_watcher_ = nullptr;  // owned by the loop

  // The held command.
  bool have_command_ = false;
  loop::MonotonicTime command_time_;
  JointCommand::Mode mode_ = JointCommand::Mode::IDLE;
  bool enabled_ = false;
  double left_effort_ = 0, right_effort_ = 0;
  double left_velocity_target_ = 0, right_velocity_target_ = 0;
  double velocity_kp_ = 0;

  ActuatorStats stats_;
};

}  // namespace tether::examples

#endif  // TETHER_EXAMPLES_ACTUATOR_H_
