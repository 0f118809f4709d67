// examples: registers the demo stack's message types (examples/demo.capnp)
// with a SchemaRegistry, so a process can load the demo stack config and
// create or open its channels.
#ifndef TETHER_EXAMPLES_DEMO_SCHEMAS_H_
#define TETHER_EXAMPLES_DEMO_SCHEMAS_H_

#include "transport/schema_registry.h"

namespace tether::examples {

// The demo stack's config, relative to the repository root (where
// `./tether demo` runs): the stack a demo node loads when it is started by
// hand, without the launcher's TETHER_STACK or a --config flag.
inline constexpr char kDemoStackPath[] = "examples/config/example_stack.json";

// Registers ImuSample, JointState, StateEstimate, JointCommand and
// MonitorStatus. Setup only; allocates; not thread-safe (mutates `registry`).
void RegisterDemoSchemas(transport::SchemaRegistry* registry);

}  // namespace tether::examples

#endif  // TETHER_EXAMPLES_DEMO_SCHEMAS_H_
