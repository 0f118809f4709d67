#include "examples/demo_schemas.h"

#include "examples/demo.capnp.h"

namespace tether::examples {

void RegisterDemoSchemas(transport::SchemaRegistry* registry) {
  registry->Register<ImuSample>();
  registry->Register<JointState>();
  registry->Register<StateEstimate>();
  registry->Register<JointCommand>();
  registry->Register<MonitorStatus>();
  registry->Register<VelocityCommand>();
}

}  // namespace tether::examples
