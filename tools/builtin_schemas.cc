#include "tools/builtin_schemas.h"

#include "examples/demo.capnp.h"
#include "ros_bridge/ros1msg/typed.h"
#include "tools/launcher_status.capnp.h"

namespace tether::tools {

void RegisterBuiltinSchemas(transport::SchemaRegistry& registry) {
  registry.Register<ImuSample>();
  registry.Register<JointState>();
  registry.Register<StateEstimate>();
  registry.Register<JointCommand>();
  registry.Register<MonitorStatus>();
  registry.Register<VelocityCommand>();
  registry.Register<wire::LauncherStatus>();
  // Bridged ROS messages: envelopes and the typed twins of common types.
  ros1msg::RegisterRosSchemas(&registry);
}

}  // namespace tether::tools
