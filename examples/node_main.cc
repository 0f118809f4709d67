#include "examples/node_main.h"

#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "examples/demo_schemas.h"
#include "loop/realtime.h"

namespace tether::examples {
namespace {

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && v[0] != '\0' ? std::string(v) : fallback;
}

}  // namespace

NodeEnvironment ReadNodeEnvironment(const std::string& default_node_name,
                                    const std::string& config_flag) {
  NodeEnvironment env;
  env.node_name = EnvOr("TETHER_NODE", default_node_name);
  env.config_path = !config_flag.empty()
                        ? config_flag
                        : EnvOr("TETHER_STACK", kDefaultStackPath);
  env.channels.root = EnvOr("TETHER_ROOT", env.channels.root);
  env.channels.instance = EnvOr("TETHER_INSTANCE", env.channels.instance);
  return env;
}

int FailNode(const std::string& node_name, const absl::Status& status) {
  std::fprintf(stderr, "%s: %s\n", node_name.c_str(),
               std::string(status.message()).c_str());
  return 1;
}

absl::StatusOr<std::unique_ptr<NodeProcess>> NodeProcess::Start(
    const NodeEnvironment& environment) {
  std::unique_ptr<NodeProcess> p(new NodeProcess(environment));
  if (absl::Status s = p->Init(); !s.ok()) return s;
  return p;
}

NodeProcess::~NodeProcess() {
  loop_.reset();
  channels_.reset();
  signals_.reset();
}

absl::Status NodeProcess::Init() {
  absl::StatusOr<std::unique_ptr<loop::StopSignals>> signals =
      loop::StopSignals::Install();
  if (!signals.ok()) return signals.status();
  signals_ = std::move(*signals);

  RegisterDemoSchemas(&schemas_);
  absl::StatusOr<transport::StackConfig> stack = transport::LoadStackConfig(
      environment_.config_path, schemas_.known_types());
  if (!stack.ok()) {
    return absl::Status(
        stack.status().code(),
        absl::StrCat("loading the stack config ", environment_.config_path,
                     " (pass --config=FILE or set TETHER_STACK): ",
                     stack.status().message()));
  }
  stack_ = std::make_unique<transport::StackConfig>(std::move(*stack));

  // Real-time nodes: no page faults once running (mlockall does not survive
  // exec, so the launcher cannot do this for us).
  if (std::optional<transport::config::Node::Reader> node = node_config()) {
    const auto scheduling = node->getScheduling();
    if (scheduling.getPolicy() != transport::config::Policy::OTHER) {
      if (absl::Status s = loop::LockMemory(); !s.ok()) {
        if (scheduling.getRealtime() == transport::config::Realtime::REQUIRED) {
          return s;
        }
        std::fprintf(stderr, "%s: warning: %s\n",
                     environment_.node_name.c_str(),
                     std::string(s.message()).c_str());
      }
      loop::PrefaultStack();
    }
  }

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

  loop::UringEventLoopOptions options;
  options.stop_signals = signals_.get();
  absl::StatusOr<std::unique_ptr<loop::UringEventLoop>> loop =
      loop::UringEventLoop::Create(environment_.node_name, channels_.get(),
                                   options);
  if (!loop.ok()) return loop.status();
  loop_ = std::move(*loop);
  return absl::OkStatus();
}

int NodeProcess::Run() {
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

}  // namespace tether::examples
