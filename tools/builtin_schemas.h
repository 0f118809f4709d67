// tools: the message types compiled into the `tether` command, so that the
// launcher can create channels of those types (a channel stores its type's
// schema) without the node binaries. Other types come in as schema files
// (see LaunchOptions::schema_files in tools/launcher.h).
#ifndef TETHER_TOOLS_BUILTIN_SCHEMAS_H_
#define TETHER_TOOLS_BUILTIN_SCHEMAS_H_

#include "transport/schema_registry.h"

namespace tether::tools {

// Registers the demo stack's messages (examples/demo.capnp), the
// launcher's own status message (tools/launcher_status.capnp) and the ROS
// bridge's envelope and typed twins (ros_bridge/ros1msg) in `registry`.
// Setup only: allocates. Not thread-safe (mutates `registry`).
void RegisterBuiltinSchemas(transport::SchemaRegistry& registry);

}  // namespace tether::tools

#endif  // TETHER_TOOLS_BUILTIN_SCHEMAS_H_
