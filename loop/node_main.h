// loop: what a node process's main() does besides building its node. It
// reads the launcher's environment (transport/node_environment.h), installs
// the stop signals, loads the stack with the node's message types, applies
// the real-time settings the stack gives the node (locked memory and a
// prefaulted stack for fifo/rr nodes: mlockall does not survive exec, so the
// launcher cannot do it), opens the stack's channels where the launcher put
// them, and builds a UringEventLoop that stops on SIGINT/SIGTERM; Run() runs
// it. For main() only: it reads the environment and installs signal
// handlers, which libraries must not. Knows no message types: the caller
// registers its own, the stack's schema files give the rest.
//
//   int main() {
//     const transport::NodeEnvironment env =
//         loop::NodeEnvironmentFromProcess("my_node", "config/stack.json");
//     auto main = loop::NodeMain::Start(
//         env, [](transport::SchemaRegistry* r) { r->Register<MyMsg>(); });
//     if (!main.ok()) return loop::FailNode(env.node_name, main.status());
//     MyNode node((*main)->loop());
//     return (*main)->Run();
//   }
#ifndef TETHER_LOOP_NODE_MAIN_H_
#define TETHER_LOOP_NODE_MAIN_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "loop/event_loop.h"
#include "loop/signals.h"
#include "loop/uring_event_loop.h"
#include "transport/channel_set.h"
#include "transport/config.h"
#include "transport/node_environment.h"
#include "transport/schema_registry.h"

namespace tether::loop {

// Registers the message types the node's code uses (compiled in), e.g.
// [](transport::SchemaRegistry* r) { r->Register<JointCommand>(); }.
using RegisterSchemasFn = std::function<void(transport::SchemaRegistry*)>;

// This process's node environment (transport::ReadNodeEnvironment over
// ::getenv): the defaults apply when the launcher did not set a variable,
// and a non-empty `stack_flag` (a --config flag) wins over TETHER_STACK.
// main() only: reads the environment; allocates.
transport::NodeEnvironment NodeEnvironmentFromProcess(
    const std::string& default_node_name, const std::string& default_stack_path,
    const std::string& stack_flag = "");

// One node process: its stop signals, stack, channels and loop. main()
// thread only; not copyable or movable.
class NodeMain {
 public:
  // Installs StopSignals (SIGINT, SIGTERM), registers the node's types
  // (`register_schemas`, may be empty; they keep their compiled schema),
  // adds the types of the stack's schema files (its "schemas", parsed with
  // the current directory as the workspace root, as the launcher does with
  // the same directory: transport/schema_file.h), loads the stack at
  // environment.config_path, locks memory and prefaults the stack when the
  // stack schedules this node as fifo/rr (a warning on stderr if that fails,
  // an error if the node's realtime is "required"), opens (or creates) the
  // stack's channels and builds the loop named after the node. Errors say
  // what to fix (the stack file, the channel directory). Setup; blocks on
  // file and shm I/O; allocates.
  static absl::StatusOr<std::unique_ptr<NodeMain>> Start(
      const transport::NodeEnvironment& environment,
      const RegisterSchemasFn& register_schemas);
  NodeMain(const NodeMain&) = delete;
  NodeMain& operator=(const NodeMain&) = delete;
  // Destroys the loop, then the channels, then restores the signals.
  ~NodeMain();

  // The loop to build the node on. Owned by this object.
  EventLoop* loop() const { return loop_.get(); }
  const transport::StackConfig& stack() const { return *stack_; }
  const transport::SchemaRegistry& schemas() const { return schemas_; }
  // This node's entry in the stack (by environment().node_name), if any.
  std::optional<transport::config::Node::Reader> node_config() const {
    return stack_->FindNode(environment_.node_name);
  }
  const transport::NodeEnvironment& environment() const { return environment_; }

  // Runs the loop until SIGINT/SIGTERM, printing "<node>: running (...)"
  // and "<node>: stopped ..." on stderr. Returns the exit code for main()
  // (0). Blocks.
  int Run();

 private:
  explicit NodeMain(const transport::NodeEnvironment& environment)
      : environment_(environment) {}
  absl::Status Init(const RegisterSchemasFn& register_schemas);
  absl::Status ApplyRealtimeSettings();

  const transport::NodeEnvironment environment_;
  // Declared first: destroyed last, after the loop stopped watching its fd.
  std::unique_ptr<StopSignals> signals_;
  transport::SchemaRegistry schemas_;
  std::unique_ptr<transport::StackConfig> stack_;
  std::unique_ptr<transport::ChannelSet> channels_;
  std::unique_ptr<UringEventLoop> loop_;
};

// Prints "<node>: <status message>" on stderr and returns 1, for main()'s
// error returns. Any thread; allocates.
int FailNode(const std::string& node_name, const absl::Status& status);

}  // namespace tether::loop

#endif  // TETHER_LOOP_NODE_MAIN_H_
