// examples: what every demo node's main() does besides building its node --
// find the stack (flag, $TETHER_STACK or the default file), open its
// channels where the launcher put them ($TETHER_ROOT, $TETHER_INSTANCE),
// build a UringEventLoop that stops on SIGINT/SIGTERM, lock memory for
// real-time nodes, and run. For main() functions only: it reads the
// environment, which libraries must not.
#ifndef TETHER_EXAMPLES_NODE_MAIN_H_
#define TETHER_EXAMPLES_NODE_MAIN_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "loop/event_loop.h"
#include "loop/signals.h"
#include "loop/uring_event_loop.h"
#include "shm/channel.h"
#include "transport/channel_set.h"
#include "transport/config.h"
#include "transport/schema_registry.h"

namespace tether::examples {

inline constexpr char kDefaultStackPath[] =
    "examples/config/example_stack.json";

// Where a node process finds its stack and channels.
struct NodeEnvironment {
  std::string node_name;    // $TETHER_NODE, else the binary's default
  std::string config_path;  // --config, else $TETHER_STACK, else default
  shm::ChannelOptions channels;  // root/instance from $TETHER_ROOT/INSTANCE
};

// Reads TETHER_NODE, TETHER_STACK, TETHER_ROOT and TETHER_INSTANCE (the
// launcher sets them; defaults: `default_node_name`, kDefaultStackPath,
// /dev/shm/tether, default). A non-empty `config_flag` wins over
// TETHER_STACK. main() only; not thread-safe (getenv).
NodeEnvironment ReadNodeEnvironment(const std::string& default_node_name,
                                    const std::string& config_flag);

// One node process: stop signals, the stack, its channels and the loop.
// main() thread only.
class NodeProcess {
 public:
  // Installs StopSignals, loads the stack (demo schemas), opens (or
  // creates) its channels and builds the loop named after the node. For a
  // node the stack schedules as fifo/rr it also locks memory and prefaults
  // the stack (a warning if that fails, an error if the node's realtime is
  // "required"). Errors say what to fix. Setup; allocates.
  static absl::StatusOr<std::unique_ptr<NodeProcess>> Start(
      const NodeEnvironment& environment);
  NodeProcess(const NodeProcess&) = delete;
  NodeProcess& operator=(const NodeProcess&) = delete;
  ~NodeProcess();

  loop::EventLoop* loop() const { return loop_.get(); }
  const transport::StackConfig& stack() const { return *stack_; }
  // This node's entry in the stack (by NodeEnvironment::node_name), if any.
  std::optional<transport::config::Node::Reader> node_config() const {
    return stack_->FindNode(environment_.node_name);
  }
  const NodeEnvironment& environment() const { return environment_; }

  // Runs the loop until SIGINT/SIGTERM. Returns the exit code for main().
  int Run();

 private:
  explicit NodeProcess(const NodeEnvironment& environment)
      : environment_(environment) {}
  absl::Status Init();

  const NodeEnvironment environment_;
  // Declared first: destroyed last, after the loop stopped watching its fd.
  std::unique_ptr<loop::StopSignals> signals_;
  transport::SchemaRegistry schemas_;
  std::unique_ptr<transport::StackConfig> stack_;
  std::unique_ptr<transport::ChannelSet> channels_;
  std::unique_ptr<loop::UringEventLoop> loop_;
};

// Prints "<node>: <status>" to stderr and returns 1 (for main's returns).
int FailNode(const std::string& node_name, const absl::Status& status);

}  // namespace tether::examples

#endif  // TETHER_EXAMPLES_NODE_MAIN_H_
