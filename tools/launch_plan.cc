#include "tools/launch_plan.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "shm/channel.h"
#include "tools/capabilities.h"
#include "transport/channel_handle.h"
#include "transport/node_environment.h"
#include "transport/schema_file.h"

namespace tether::tools {
namespace {

namespace fs = std::filesystem;

loop::SchedPolicy PolicyFor(transport::config::Policy policy) {
  switch (policy) {
    case transport::config::Policy::FIFO:
      return loop::SchedPolicy::kFifo;
    case transport::config::Policy::RR:
      return loop::SchedPolicy::kRoundRobin;
    case transport::config::Policy::OTHER:
      break;
  }
  return loop::SchedPolicy::kOther;
}

// An environment as an ordered list with override-by-name.
class Environment {
 public:
  void Set(const std::string& entry) {
    const size_t eq = entry.find('=');
    const std::string name = entry.substr(0, eq);
    auto it = index_.find(name);
    if (it != index_.end()) {
      entries_[it->second] = entry;
    } else {
      index_[name] = entries_.size();
      entries_.push_back(entry);
    }
  }
  void Set(const std::string& name, const std::string& value) {
    Set(absl::StrCat(name, "=", value));
  }
  std::string Get(const std::string& name) const {
    auto it = index_.find(name);
    if (it == index_.end()) return "";
    return entries_[it->second].substr(name.size() + 1);
  }
  const std::vector<std::string>& entries() const { return entries_; }

 private:
  std::vector<std::string> entries_;
  std::map<std::string, size_t> index_;
};

// Types of the channels already in the instance that `schemas` lacks, from
// the schema each channel carries. A channel that cannot be opened (corrupt,
// not ours) is left to the channel creation to report, if the stack has it.
void AddChannelSchemas(const shm::ChannelOptions& channels,
                       transport::SchemaRegistry* schemas) {
  absl::StatusOr<std::vector<std::string>> names = shm::Channel::List(channels);
  if (!names.ok()) return;
  for (const std::string& name : *names) {
    absl::StatusOr<std::unique_ptr<transport::ChannelHandle>> channel =
        transport::ChannelHandle::Open(channels, name);
    if (!channel.ok() || schemas->Find((*channel)->type_id()).has_value()) {
      continue;
    }
    (void)schemas->AddCodeGeneratorRequest((*channel)->schema(),
                                           (*channel)->type_id());
  }
}

// Sources 2 to 4 of the message types (see launch_plan.h).
absl::Status LearnSchemas(const LaunchOptions& options, const LaunchPlan& plan,
                          transport::SchemaRegistry* schemas) {
  transport::SchemaFileOptions import;
  import.import_path = {plan.working_directory};
  for (const std::string& file : options.schema_files) {
    absl::StatusOr<std::vector<std::string>> added =
        transport::AddSchemaFile(file, import, schemas);
    if (!added.ok()) {
      return absl::Status(
          added.status().code(),
          absl::StrCat("--schemas: ", added.status().message()));
    }
  }
  // A stack that cannot be listed is reported in full by LoadStackConfig().
  absl::StatusOr<std::vector<transport::StackSchemaFile>> files =
      transport::ListStackSchemaFiles(plan.stack_path);
  if (files.ok()) {
    if (absl::Status s =
            transport::AddStackSchemaFiles(*files, import, schemas);
        !s.ok()) {
      return s;
    }
  }
  AddChannelSchemas(options.channels, schemas);
  return absl::OkStatus();
}

// Appended to a stack error naming a type the launcher does not know.
std::string KnownTypesHint(const transport::KnownTypes& known,
                           const std::string& workdir) {
  std::vector<std::string> names(known.names.begin(), known.names.end());
  std::sort(names.begin(), names.end());
  return absl::StrCat(
      "\n(the launcher knows these types: ",
      names.empty() ? "none" : absl::StrJoin(names, ", "),
      "; name the .capnp file declaring a type in the stack's \"schemas\", "
      "or give --schemas FILE: a .capnp file, or one made with `capnp "
      "compile -o- x.capnp > x.schema`. A .capnp file's types are named by "
      "its path below the working directory, ",
      workdir, " (--workdir): run from the workspace root)");
}

absl::Status PlanNodes(const LaunchOptions& options, LaunchPlan* plan) {
  const std::string& workdir = plan->working_directory;
  namespace config = transport::config;
  std::vector<std::string> problems;
  std::map<std::string, size_t> by_name;
  const auto config_nodes = plan->stack->nodes();
  for (size_t i = 0; i < config_nodes.size(); ++i) {
    by_name[config_nodes[i].getName().cStr()] = i;
  }
  const uid_t euid = ::geteuid();
  const uint64_t caps = ReadEffectiveCapabilities().value_or(0);
  const bool can_switch_users = euid == 0 || (HasCapability(caps, kCapSetgid) &&
                                              HasCapability(caps, kCapSetuid));

  plan->nodes.resize(config_nodes.size());
  for (size_t i = 0; i < config_nodes.size(); ++i) {
    const config::Node::Reader c = config_nodes[i];
    PlannedNode& node = plan->nodes[i];
    NodeProcessSpec& spec = node.spec;
    spec.name = c.getName().cStr();
    const transport::ConfigOrigin& origin = plan->stack->node_origin(i);
    const std::string where = absl::StrCat(
        origin.file, ": nodes[", origin.index, "] (", spec.name, "): ");
    spec.working_directory = workdir;

    Environment env;
    for (const std::string& e : options.base_env) env.Set(e);
    const std::string user = c.getUser().cStr();
    if (!user.empty()) {
      absl::StatusOr<UserAccount> account = LookUpUser(user);
      if (!account.ok()) {
        problems.push_back(
            absl::StrCat(where, "user: ", account.status().message()));
      } else if (account->uid != euid || account->gid != ::getegid()) {
        if (!can_switch_users) {
          problems.push_back(absl::StrCat(
              where, "runs as user ", user, " (uid ", account->uid,
              ") but the launcher runs as uid ", euid,
              " without CAP_SETUID/CAP_SETGID; run `tether launch` as root, "
              "or remove the node's \"user\""));
        }
        env.Set("HOME", account->home);
        env.Set("USER", user);
        env.Set("LOGNAME", user);
        spec.user = std::move(*account);
      }
    }
    for (const config::EnvVar::Reader v : c.getEnv()) {
      env.Set(v.getName().cStr(), v.getValue().cStr());
    }
    transport::NodeEnvironment contract;
    contract.node_name = spec.name;
    contract.config_path = plan->stack_path;
    contract.channels = options.channels;
    for (const transport::EnvVariable& v :
         transport::NodeEnvironmentVariables(contract)) {
      env.Set(v.name, v.value);
    }
    spec.env = env.entries();

    const std::string command = c.getCommand().cStr();
    absl::StatusOr<std::string> path =
        ResolveCommand(command, workdir, env.Get("PATH"));
    if (!path.ok()) {
      problems.push_back(absl::StrCat(where, path.status().message()));
    } else {
      spec.path = *path;
    }
    spec.argv.push_back(command);
    for (const capnp::Text::Reader a : c.getArgs())
      spec.argv.push_back(a.cStr());

    const config::Scheduling::Reader sched = c.getScheduling();
    spec.policy = PolicyFor(sched.getPolicy());
    spec.priority = sched.getPriority();
    spec.nice = sched.getNice();
    spec.realtime_required = sched.getRealtime() == config::Realtime::REQUIRED;
    for (int32_t cpu : c.getCpus()) spec.cpus.push_back(cpu);

    const config::Restart::Reader restart = c.getRestart();
    node.restart = {restart.getPolicy(), restart.getBackoffMs(),
                    restart.getMaxBackoffMs(), restart.getMaxRestarts()};
    for (const capnp::Text::Reader a : c.getStartAfter()) {
      // LoadStackConfig checked the names and that there is no cycle.
      node.start_after.push_back(by_name.at(a.cStr()));
    }
  }
  if (problems.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("cannot launch the stack (nothing was started):\n  ",
                   absl::StrJoin(problems, "\n  ")));
}

}  // namespace

absl::StatusOr<LaunchPlan> PrepareLaunch(const LaunchOptions& options,
                                         transport::SchemaRegistry* schemas,
                                         std::vector<std::string>* warnings) {
  LaunchPlan plan;
  std::error_code ec;
  plan.stack_path =
      fs::absolute(options.stack_path, ec).lexically_normal().string();
  std::string workdir = options.working_directory;
  if (workdir.empty()) workdir = fs::current_path(ec).string();
  plan.working_directory =
      fs::absolute(workdir, ec).lexically_normal().string();
  if (!fs::is_directory(plan.working_directory, ec)) {
    return absl::NotFoundError(
        absl::StrCat("working directory ", plan.working_directory,
                     " is not a directory; pass --workdir"));
  }
  if (absl::Status s = LearnSchemas(options, plan, schemas); !s.ok()) return s;

  const transport::KnownTypes known = schemas->known_types();
  std::vector<transport::ConfigProblem> problems;
  absl::StatusOr<transport::StackConfig> stack =
      transport::LoadStackConfig(plan.stack_path, known, &problems);
  if (!stack.ok()) {
    const bool unknown_type = std::any_of(
        problems.begin(), problems.end(),
        [](const transport::ConfigProblem& p) {
          return p.kind == transport::ConfigProblem::Kind::kUnknownType;
        });
    return absl::Status(
        stack.status().code(),
        absl::StrCat(
            stack.status().message(),
            unknown_type ? KnownTypesHint(known, plan.working_directory) : ""));
  }
  plan.stack = std::make_unique<transport::StackConfig>(std::move(*stack));
  for (const std::string& w : plan.stack->warnings()) warnings->push_back(w);
  if (absl::Status s = PlanNodes(options, &plan); !s.ok()) return s;
  return plan;
}

}  // namespace tether::tools
