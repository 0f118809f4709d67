// examples: registers the demo stack's message types (examples/demo.capnp)
// with a SchemaRegistry, so a process can load the demo stack config and
// create or open its channels.
#ifndef TETHER_EXAMPLES_DEMO_SCHEMAS_H_
#define TETHER_EXAMPLES_DEMO_SCHEMAS_H_

#include "transport/schema_registry.h"

namespace tether::examples {

// Registers ImuSample, JointState, StateEstimate, JointCommand and
// MonitorStatus. Setup only; allocates; not thread-safe (mutates `registry`).
void RegisterDemoSchemas(transport::SchemaRegistry* registry);

}  // namespace tether::examples

#endif  // TETHER_EXAMPLES_DEMO_SCHEMAS_H_
