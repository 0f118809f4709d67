// tools: preparing a launch, before anything is created or started. Learns
// the stack's message types, loads and validates the stack config, and
// turns each node into the process to start (program found, user looked
// up, environment with the node contract of transport/node_environment.h,
// scheduling and CPUs) and its restart policy. The launcher
// (tools/launcher.h) then creates the channels and supervises the plan.
//
// Where message types come from, in this order (a type known from an
// earlier source keeps that schema):
//   1. the registry the caller passes (types compiled into the program);
//   2. LaunchOptions::schema_files (`tether launch --schemas`);
//   3. the stack's own "schemas" (transport/config.capnp);
//   4. the channels that already exist in the instance (each carries its
//      type's schema), e.g. from an earlier run of the stack.
// Schema files are parsed with the working directory as the import root
// (see transport/schema_file.h), so "examples/demo.capnp" types are named
// as their compiled code names them.
#ifndef TETHER_TOOLS_LAUNCH_PLAN_H_
#define TETHER_TOOLS_LAUNCH_PLAN_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/launch_options.h"
#include "tools/node_process.h"
#include "tools/restart_policy.h"
#include "transport/config.h"
#include "transport/schema_registry.h"

namespace tether::tools {

// One node as the launcher will run it.
struct PlannedNode {
  NodeProcessSpec spec;  // spec.name is the node's name.
  RestartRule restart;
  std::vector<size_t> start_after;  // Indices into LaunchPlan::nodes.
};

struct LaunchPlan {
  std::string stack_path;         // Absolute, lexically normal.
  std::string working_directory;  // Absolute, lexically normal.
  std::unique_ptr<transport::StackConfig> stack;
  std::vector<PlannedNode> nodes;  // In config order.
};

// Adds the stack's message types to `schemas` (see above), loads and
// validates the stack at options.stack_path and checks every node: its
// command found and executable, its user known (and switchable to), its
// startAfter. Nothing is created or started. Errors name the file and field
// or the node and what to fix, every node problem at once; a channel of an
// unknown type gets a list of the types known and where others come from.
// Config warnings are appended to `warnings`, also when an error follows.
// Setup; reads files and the instance's channels; allocates.
absl::StatusOr<LaunchPlan> PrepareLaunch(const LaunchOptions& options,
                                         transport::SchemaRegistry* schemas,
                                         std::vector<std::string>* warnings);

}  // namespace tether::tools

#endif  // TETHER_TOOLS_LAUNCH_PLAN_H_
