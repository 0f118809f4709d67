// examples: main() of the monitor node. Watches the channels its stack
// entry `reads`, publishes /monitor/status at 10 Hz, prints a line a second
// and a summary table at exit.
// Usage: monitor [--config=FILE] [--quiet]
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "examples/demo_schemas.h"
#include "examples/monitor.h"
#include "examples/summary.h"
#include "loop/node_main.h"

ABSL_FLAG(std::string, config, "",
          "stack config (default: the stack the launcher started this node "
          "from, else examples/config/example_stack.json)");
ABSL_FLAG(bool, quiet, false, "no line per second (the summary only)");

int main(int argc, char** argv) {
  using namespace tether::examples;
  using tether::loop::FailNode;
  absl::ParseCommandLine(argc, argv);
  const tether::transport::NodeEnvironment env =
      tether::loop::NodeEnvironmentFromProcess("monitor", kDemoStackPath,
                                               absl::GetFlag(FLAGS_config));
  auto process = tether::loop::NodeMain::Start(env, &RegisterDemoSchemas);
  if (!process.ok()) return FailNode(env.node_name, process.status());

  MonitorOptions options;
  auto node_config = (*process)->node_config();
  if (!node_config.has_value()) {
    return FailNode(env.node_name,
                    absl::NotFoundError(absl::StrCat(
                        "no node \"", env.node_name, "\" in ", env.config_path,
                        ": the monitor watches the channels its entry reads")));
  }
  for (capnp::Text::Reader r : node_config->getReads()) {
    options.channels.emplace_back(r.cStr());
  }
  if (!absl::GetFlag(FLAGS_quiet)) options.print_to = stdout;
  auto node = MonitorNode::Create((*process)->loop(), options);
  if (!node.ok()) return FailNode(env.node_name, node.status());
  const int code = (*process)->Run();
  std::printf("%s", FormatSummaryTable((*node)->summary()).c_str());
  std::fflush(stdout);
  return code;
}
