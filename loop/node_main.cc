#include "loop/node_main.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "loop/realtime.h"
#include "transport/schema_file.h"

namespace tether::loop {

transport::NodeEnvironment NodeEnvironmentFromProcess(
    const std::string& default_node_name, const std::string& default_stack_path,
    const std::string& stack_flag) {
  transport::NodeEnvironment env = transport::ReadNodeEnvironment(
      [](const char* name) { return std::getenv(name); }, default_node_name,
      default_stack_path);
  if (!stack_flag.empty()) env.config_path = stack_flag;
  return env;
}

int FailNode(const std::string& node_name, const absl::Status& status) {
  std::fprintf(stderr, "%s: %s\n", node_name.c_str(),
               std::string(status.message()).c_str());
  return 1;
}

absl::StatusOr<std::unique_ptr<NodeMain>> NodeMain::Start(
    const transport::NodeEnvironment& environment,
    const RegisterSchemasFn& register_schemas) {
  std::unique_ptr<NodeMain> p(new NodeMain(environment));
  if (absl::Status s = p->Init(register_schemas); !s.ok()) return s;
  return p;
}

NodeMain::~NodeMain() {
  loop_.reset();
  channels_.reset();
  signals_.reset();
}

absl::Status NodeMain::Init(const RegisterSchemasFn& register_schemas) {
  absl::StatusOr<std::unique_ptr<StopSignals>> signals = StopSignals::Install();
  if (!signals.ok()) return signals.status();
  signals_ = std::move(*signals);

  // The node's own types first: they keep their compiled schema.
  if (register_schemas) register_schemas(&schemas_);
  auto stack_error = [&](const absl::Status& s) {
    return absl::Status(
        s.code(),
        absl::StrCat("loading the stack config ", environment_.config_path,
                     " (pass --config=FILE or set ", transport::kEnvStack,
                     "): ", s.message()));
  };
  // Then the stack's schema files, for the channels of types the node does
  // not link (a stack that cannot be listed fails to load just below).
  absl::StatusOr<std::vector<transport::StackSchemaFile>> schema_files =
      transport::ListStackSchemaFiles(environment_.config_path);
  if (schema_files.ok()) {
    std::error_code ec;
    transport::SchemaFileOptions import;
    import.import_path = {std::filesystem::current_path(ec)};
    if (absl::Status s =
            transport::AddStackSchemaFiles(*schema_files, import, &schemas_);
        !s.ok()) {
      return stack_error(s);
    }
  }
  absl::StatusOr<transport::StackConfig> stack = transport::LoadStackConfig(
      environment_.config_path, schemas_.known_types());
  if (!stack.ok()) return stack_error(stack.status());
  stack_ = std::make_unique<transport::StackConfig>(std::move(*stack));
  if (absl::Status s = ApplyRealtimeSettings(); !s.ok()) return s;

  absl::StatusOr<std::unique_ptr<transport::ChannelSet>> channels =
      transport::ChannelSet::Create(environment_.channels, *stack_, schemas_);
  if (!channels.ok()) {
    return absl::Status(
        channels.status().code(),
        absl::StrCat("opening the channels in ", environment_.channels.root,
                     "/", environment_.channels.instance, ": ",
                     channels.status().message()));
  }
  channels_ = std::move(*channels);

  UringEventLoopOptions options;
  options.stop_signals = signals_.get();
  if (std::optional<transport::config::Node::Reader> node = node_config()) {
    options.check_allocations |= node->getCheckAllocations();
  }
  absl::StatusOr<std::unique_ptr<UringEventLoop>> loop =
      UringEventLoop::Create(environment_.node_name, channels_.get(), options);
  if (!loop.ok()) return loop.status();
  loop_ = std::move(*loop);
  return absl::OkStatus();
}

absl::Status NodeMain::ApplyRealtimeSettings() {
  // Real-time nodes: no page faults once running.
  const std::optional<transport::config::Node::Reader> node = node_config();
  if (!node.has_value()) return absl::OkStatus();
  const auto scheduling = node->getScheduling();
  if (scheduling.getPolicy() == transport::config::Policy::OTHER) {
    return absl::OkStatus();
  }
  if (absl::Status s = LockMemory(); !s.ok()) {
    if (scheduling.getRealtime() == transport::config::Realtime::REQUIRED) {
      return s;
    }
    std::fprintf(stderr, "%s: warning: %s\n", environment_.node_name.c_str(),
                 std::string(s.message()).c_str());
  }
  PrefaultStack();
  return absl::OkStatus();
}

int NodeMain::Run() {
  std::fprintf(stderr, "%s: running (%s; channels in %s/%s)\n",
               environment_.node_name.c_str(),
               loop_->backend_description().c_str(),
               environment_.channels.root.c_str(),
               environment_.channels.instance.c_str());
  loop_->Run();
  std::fprintf(stderr, "%s: stopped%s\n", environment_.node_name.c_str(),
               signals_->stop_requested() ? " by signal" : "");
  return 0;
}

}  // namespace tether::loop
