#include "tools/builtin_schemas.h"

#include "examples/demo.capnp.h"
#include "tools/launcher_status.capnp.h"

namespace tether::tools {

void RegisterBuiltinSchemas(transport::SchemaRegistry& registry) {
  registry.Register<ImuSample>();
  registry.Register<JointState>();
  registry.Register<StateEstimate>();
  registry.Register<JointCommand>();
  registry.Register<MonitorStatus>();
  registry.Register<wire::LauncherStatus>();
}

}  // namespace tether::tools
