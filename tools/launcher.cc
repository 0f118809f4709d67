#include "tools/launcher.h"

#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "capnp/message.h"
#include "capnp/schema.capnp.h"
#include "capnp/serialize.h"
#include "kj/exception.h"
#include "tools/capabilities.h"
#include "tools/json_writer.h"
#include "tools/launcher_status.capnp.h"
#include "tools/node_process.h"
#include "transport/channel_handle.h"
#include "transport/channel_set.h"
#include "transport/config.h"
#include "transport/node_environment.h"
#include "transport/typed_endpoints.h"

namespace tether::tools {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr const char* kSay = "launch: ";
// A line without a newline is passed on once it is this long.
constexpr size_t kMaxLine = 4096;
// Read at most this much of one node's output per wake, so a node that
// floods its stdout cannot starve the others or the supervision.
constexpr size_t kMaxReadPerWake = 256 * 1024;
// The status channel's shape: fixed, so every launcher of an instance
// agrees on it. 16 KiB holds the status of about 150 nodes.
constexpr uint32_t kStatusMaxSize = 16384;
constexpr uint32_t kStatusQueueDepth = 4;

std::string Seconds(Clock::duration d) {
  return absl::StrFormat("%.2f s", std::chrono::duration<double>(d).count());
}

std::string Millis(milliseconds d) { return absl::StrCat(d.count(), " ms"); }

ExitInfo ExitFromWaitStatus(int status) {
  ExitInfo exit;
  if (WIFEXITED(status)) {
    exit.kind = ExitInfo::Kind::kCode;
    exit.value = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    exit.kind = ExitInfo::Kind::kSignal;
    exit.value = WTERMSIG(status);
  }
  return exit;
}

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

const char* RestartPolicyName(transport::config::RestartPolicy policy) {
  switch (policy) {
    case transport::config::RestartPolicy::NEVER:
      return "never";
    case transport::config::RestartPolicy::ON_FAILURE:
      return "onFailure";
    case transport::config::RestartPolicy::ALWAYS:
      return "always";
  }
  return "?";
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

// Adds every struct of a CodeGeneratorRequest file to `schemas`.
absl::Status AddSchemaFile(const std::string& path,
                           transport::SchemaRegistry& schemas) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat(
        "schema file ", path, ": cannot read it: ", std::strerror(errno)));
  }
  const std::string bytes((std::istreambuf_iterator<char>(in)),
                          std::istreambuf_iterator<char>());
  if (bytes.empty() || bytes.size() % sizeof(capnp::word) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "schema file ", path,
        " is not a CodeGeneratorRequest (make one with `capnp compile -o- "
        "x.capnp > x.schema`)"));
  }
  std::vector<capnp::word> words(bytes.size() / sizeof(capnp::word));
  std::memcpy(words.data(), bytes.data(), bytes.size());
  const std::span<const std::byte> blob(
      reinterpret_cast<const std::byte*>(words.data()), bytes.size());
  std::vector<uint64_t> structs;
  try {
    capnp::ReaderOptions options;
    options.traversalLimitInWords = 64 * 1024 * 1024;
    capnp::FlatArrayMessageReader reader(
        kj::arrayPtr(words.data(), words.size()), options);
    auto request = reader.getRoot<capnp::schema::CodeGeneratorRequest>();
    for (capnp::schema::Node::Reader node : request.getNodes()) {
      if (node.isStruct() && !node.getStruct().getIsGroup() &&
          !node.getIsGeneric()) {
        structs.push_back(node.getId());
      }
    }
  } catch (const kj::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(
        "schema file ", path,
        " is not a CodeGeneratorRequest: ", e.getDescription().cStr()));
  }
  for (uint64_t id : structs) {
    absl::Status s = schemas.AddCodeGeneratorRequest(blob, id);
    if (!s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("schema file ", path, ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

wire::NodeState WireState(NodeState state) {
  switch (state) {
    case NodeState::kPending:
      return wire::NodeState::PENDING;
    case NodeState::kStarting:
      return wire::NodeState::STARTING;
    case NodeState::kRunning:
      return wire::NodeState::RUNNING;
    case NodeState::kBackoff:
      return wire::NodeState::BACKOFF;
    case NodeState::kStopping:
      return wire::NodeState::STOPPING;
    case NodeState::kExited:
      return wire::NodeState::EXITED;
    case NodeState::kFailed:
      return wire::NodeState::FAILED;
    case NodeState::kStopped:
      return wire::NodeState::STOPPED;
    case NodeState::kBlocked:
      return wire::NodeState::BLOCKED;
  }
  return wire::NodeState::PENDING;
}

}  // namespace

std::string_view NodeStateName(NodeState state) {
  switch (state) {
    case NodeState::kPending:
      return "pending";
    case NodeState::kStarting:
      return "starting";
    case NodeState::kRunning:
      return "running";
    case NodeState::kBackoff:
      return "backoff";
    case NodeState::kStopping:
      return "stopping";
    case NodeState::kExited:
      return "exited";
    case NodeState::kFailed:
      return "failed";
    case NodeState::kStopped:
      return "stopped";
    case NodeState::kBlocked:
      return "blocked";
  }
  return "?";
}

std::string_view PhaseName(StackStatus::Phase phase) {
  switch (phase) {
    case StackStatus::Phase::kRunning:
      return "running";
    case StackStatus::Phase::kStopping:
      return "stopping";
    case StackStatus::Phase::kStopped:
      return "stopped";
  }
  return "?";
}

std::string DescribeExit(const ExitInfo& exit) {
  switch (exit.kind) {
    case ExitInfo::Kind::kNone:
      return "none";
    case ExitInfo::Kind::kCode:
      return absl::StrCat("exit code ", exit.value);
    case ExitInfo::Kind::kSignal:
      return absl::StrCat("signal ", exit.value, " (", SignalName(exit.value),
                          ")");
    case ExitInfo::Kind::kStartFailed:
      return absl::StrCat("start failed: ", exit.message);
  }
  return "?";
}

std::string FormatStatusJson(const StackStatus& status) {
  JsonWriter json;
  json.BeginObject();
  json.Key("launcher_pid").Int(status.launcher_pid);
  json.Key("stack").String(status.stack_path);
  json.Key("root").String(status.root);
  json.Key("instance").String(status.instance);
  json.Key("phase").String(PhaseName(status.phase));
  json.Key("time_unix_ms")
      .Int(std::chrono::duration_cast<milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
               .count());
  json.Key("nodes").BeginArray();
  for (const NodeStatus& node : status.nodes) {
    json.BeginObject();
    json.Key("name").String(node.name);
    json.Key("state").String(NodeStateName(node.state));
    json.Key("pid");
    if (node.pid != 0) {
      json.Int(node.pid);
    } else {
      json.Null();
    }
    json.Key("restarts").Uint(node.restarts);
    json.Key("starts").Uint(node.starts);
    json.Key("last_exit");
    switch (node.last_exit.kind) {
      case ExitInfo::Kind::kNone:
        json.Null();
        break;
      case ExitInfo::Kind::kCode:
        json.BeginObject().Key("code").Int(node.last_exit.value).EndObject();
        break;
      case ExitInfo::Kind::kSignal:
        json.BeginObject()
            .Key("signal")
            .Int(node.last_exit.value)
            .Key("signal_name")
            .String(SignalName(node.last_exit.value))
            .EndObject();
        break;
      case ExitInfo::Kind::kStartFailed:
        json.BeginObject()
            .Key("start_error")
            .String(node.last_exit.message)
            .EndObject();
        break;
    }
    json.EndObject();
  }
  json.EndArray();
  json.EndObject();
  return json.str() + "\n";
}

std::string FormatSummary(const StackStatus& status) {
  struct Row {
    std::string name, state, pid, restarts, exit;
  };
  std::vector<Row> rows = {{"NODE", "STATE", "PID", "RESTARTS", "LAST EXIT"}};
  for (const NodeStatus& n : status.nodes) {
    std::string exit = DescribeExit(n.last_exit);
    if (n.last_exit.kind == ExitInfo::Kind::kStartFailed) {
      exit = "start failed (see above)";
    }
    rows.push_back({n.name, std::string(NodeStateName(n.state)),
                    n.pid != 0 ? absl::StrCat(n.pid) : "-",
                    absl::StrCat(n.restarts),
                    n.last_exit.kind == ExitInfo::Kind::kNone ? "-" : exit});
  }
  size_t w[4] = {0, 0, 0, 0};
  for (const Row& r : rows) {
    w[0] = std::max(w[0], r.name.size());
    w[1] = std::max(w[1], r.state.size());
    w[2] = std::max(w[2], r.pid.size());
    w[3] = std::max(w[3], r.restarts.size());
  }
  std::string out;
  for (const Row& r : rows) {
    absl::StrAppend(
        &out, absl::StrFormat(
                  "%-*s  %-*s  %*s  %*s  %s\n", static_cast<int>(w[0]), r.name,
                  static_cast<int>(w[1]), r.state, static_cast<int>(w[2]),
                  r.pid, static_cast<int>(w[3]), r.restarts, r.exit));
  }
  return out;
}

// ---------------------------------------------------------------------------

class Launcher::Impl {
 public:
  Impl(LaunchOptions options,
       std::unique_ptr<transport::SchemaRegistry> schemas, std::ostream& out,
       std::ostream& err)
      : options_(std::move(options)),
        schemas_(std::move(schemas)),
        out_(out),
        err_(err) {}
  ~Impl();

  absl::Status Prepare();
  Result Run();
  StackStatus status() const;
  std::function<void(const StackStatus&)> on_change;

 private:
  // One stream of a node's output being forwarded line by line.
  struct Output {
    Fd fd;
    std::string partial;
    bool is_stderr = false;
  };

  struct Node {
    std::string name;
    NodeProcessSpec spec;
    transport::config::RestartPolicy policy =
        transport::config::RestartPolicy::NEVER;
    uint32_t backoff_ms = 0;
    uint32_t max_backoff_ms = 0;
    uint32_t max_restarts = 0;
    std::vector<size_t> after;  // startAfter, as indices.

    NodeState state = NodeState::kPending;
    pid_t pid = 0;
    Fd pidfd;
    Fd start_report;          // While kStarting.
    std::string start_error;  // The child's report of a failed start.
    std::string applied;      // Real-time settings applied, for messages.
    bool in_start_order = false;
    Output output[2];
    uint32_t restarts = 0;
    uint32_t starts = 0;
    uint32_t backoff_doublings = 0;
    ExitInfo last_exit;
    Clock::time_point started_at;
    Clock::time_point restart_at;
    bool warned = false;
  };

  void Say(const std::string& line) {
    out_ << kSay << line << "\n" << std::flush;
  }
  void Warn(const std::string& line) {
    err_ << kSay << "warning: " << line << "\n" << std::flush;
  }

  absl::Status PrepareNodes(const std::string& workdir);
  absl::Status CreateStatusChannel();

  void StartReadyNodes();
  void Start(Node& node);
  // Reads a starting node's start report; on success it is running.
  void CheckStart(Node& node);
  void Ended(Node& node, const ExitInfo& exit, Clock::duration ran_for);
  void Reap(Node& node);
  void Shutdown(const std::string& reason);
  void Signal(Node& node, int sig);
  bool AllSettled() const;
  // Waits for output, exits or the stop fd until `until`, and handles them.
  void WaitOnce(Clock::time_point until);
  void Forward(Node& node, Output& output, bool final);
  void EmitLines(const Node& node, Output& output, bool final);

  void Changed();
  void Publish(const StackStatus& status);

  LaunchOptions options_;
  std::unique_ptr<transport::SchemaRegistry> schemas_;
  std::ostream& out_;
  std::ostream& err_;
  std::string stack_path_;
  std::optional<transport::StackConfig> stack_;
  std::unique_ptr<transport::ChannelSet> channels_;
  std::unique_ptr<transport::ChannelHandle> status_channel_;
  std::unique_ptr<transport::Publisher<wire::LauncherStatus>> status_pub_;
  std::vector<Node> nodes_;
  std::vector<size_t> start_order_;  // Indices, in order of first start.
  StackStatus::Phase phase_ = StackStatus::Phase::kRunning;
  bool stop_requested_ = false;
  bool status_json_warned_ = false;
};

Launcher::Impl::~Impl() {
  for (Node& node : nodes_) {
    if (node.pid == 0) continue;
    Signal(node, SIGKILL);
    int status = 0;
    while (::waitpid(node.pid, &status, 0) < 0 && errno == EINTR) {
    }
    node.pid = 0;
  }
}

absl::Status Launcher::Impl::Prepare() {
  for (const std::string& file : options_.schema_files) {
    absl::Status s = AddSchemaFile(file, *schemas_);
    if (!s.ok()) return s;
  }
  std::error_code ec;
  stack_path_ = fs::absolute(options_.stack_path, ec).lexically_normal();
  const transport::KnownTypes known = schemas_->known_types();
  absl::StatusOr<transport::StackConfig> stack =
      transport::LoadStackConfig(stack_path_, known);
  if (!stack.ok()) {
    std::string message(stack.status().message());
    if (absl::StrContains(message, ".type:")) {
      std::vector<std::string> names(known.names.begin(), known.names.end());
      std::sort(names.begin(), names.end());
      absl::StrAppend(&message, "\n(the launcher knows these types: ",
                      absl::StrJoin(names, ", "),
                      "; give others as --schemas FILE, made with `capnp "
                      "compile -o- x.capnp > x.schema`)");
    }
    return absl::Status(stack.status().code(), message);
  }
  stack_.emplace(std::move(*stack));
  if (stack_->FindChannel(kLauncherStatusChannel).has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        stack_path_, ": channel ", kLauncherStatusChannel,
        " is the launcher's own status channel; rename the stack's channel"));
  }
  for (const std::string& w : stack_->warnings()) Warn(w);

  std::string workdir = options_.working_directory;
  if (workdir.empty()) workdir = fs::current_path(ec).string();
  workdir = fs::absolute(workdir, ec).lexically_normal().string();
  if (!fs::is_directory(workdir, ec)) {
    return absl::NotFoundError(absl::StrCat(
        "working directory ", workdir, " is not a directory; pass --workdir"));
  }
  if (absl::Status s = PrepareNodes(workdir); !s.ok()) return s;

  // Only now, with every node checked, is anything created.
  absl::StatusOr<std::unique_ptr<transport::ChannelSet>> channels =
      transport::ChannelSet::Create(options_.channels, *stack_, *schemas_);
  if (!channels.ok()) {
    return absl::Status(channels.status().code(),
                        absl::StrCat("creating the stack's channels: ",
                                     channels.status().message()));
  }
  channels_ = std::move(*channels);
  if (options_.status_channel) {
    if (absl::Status s = CreateStatusChannel(); !s.ok()) return s;
  }
  Say(absl::StrCat(
      "created ", channels_->channels().size(), " channel",
      channels_->channels().size() == 1 ? "" : "s", " in ",
      (fs::path(options_.channels.root) / options_.channels.instance).string(),
      options_.status_channel
          ? absl::StrCat(" (and ", kLauncherStatusChannel, ")")
          : ""));
  return absl::OkStatus();
}

absl::Status Launcher::Impl::PrepareNodes(const std::string& workdir) {
  namespace config = transport::config;
  std::vector<std::string> problems;
  std::map<std::string, size_t> by_name;
  const auto config_nodes = stack_->nodes();
  for (size_t i = 0; i < config_nodes.size(); ++i) {
    by_name[config_nodes[i].getName().cStr()] = i;
  }
  const uid_t euid = ::geteuid();
  const uint64_t caps = ReadEffectiveCapabilities().value_or(0);
  const bool can_switch_users = euid == 0 || (HasCapability(caps, kCapSetgid) &&
                                              HasCapability(caps, kCapSetuid));

  nodes_.resize(config_nodes.size());
  for (size_t i = 0; i < config_nodes.size(); ++i) {
    const config::Node::Reader c = config_nodes[i];
    Node& node = nodes_[i];
    node.name = c.getName().cStr();
    const transport::ConfigOrigin& origin = stack_->node_origin(i);
    const std::string where = absl::StrCat(
        origin.file, ": nodes[", origin.index, "] (", node.name, "): ");
    NodeProcessSpec& spec = node.spec;
    spec.name = node.name;
    spec.working_directory = workdir;

    Environment env;
    for (const std::string& e : options_.base_env) env.Set(e);
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
    contract.node_name = node.name;
    contract.config_path = stack_path_;
    contract.channels = options_.channels;
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
    node.policy = restart.getPolicy();
    node.backoff_ms = restart.getBackoffMs();
    node.max_backoff_ms = restart.getMaxBackoffMs();
    node.max_restarts = restart.getMaxRestarts();
    for (const capnp::Text::Reader a : c.getStartAfter()) {
      // LoadStackConfig checked the names and that there is no cycle.
      node.after.push_back(by_name.at(a.cStr()));
    }
  }
  if (problems.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("cannot launch the stack (nothing was started):\n  ",
                   absl::StrJoin(problems, "\n  ")));
}

absl::Status Launcher::Impl::CreateStatusChannel() {
  if (!schemas_->Find(capnp::typeId<wire::LauncherStatus>()).has_value()) {
    schemas_->Register<wire::LauncherStatus>();
  }
  capnp::MallocMessageBuilder message;
  auto c = message.initRoot<transport::config::Channel>();
  c.setName(kLauncherStatusChannel);
  c.setType(schemas_->NameOf(capnp::typeId<wire::LauncherStatus>()));
  c.setMaxSize(kStatusMaxSize);
  c.setFrequencyHz(1);
  c.setQueueDepth(kStatusQueueDepth);
  // One publisher: a second launcher of the instance is refused.
  c.setMaxPublishers(1);
  c.setMaxPinned(4);
  c.setMode("0664");
  absl::StatusOr<std::unique_ptr<transport::ChannelHandle>> handle =
      transport::ChannelHandle::Create(options_.channels, c.asReader(),
                                       *schemas_);
  if (!handle.ok()) {
    return absl::Status(handle.status().code(),
                        absl::StrCat("creating the status channel: ",
                                     handle.status().message()));
  }
  absl::StatusOr<std::unique_ptr<transport::Publisher<wire::LauncherStatus>>>
      pub = transport::Publisher<wire::LauncherStatus>::Create(handle->get());
  if (!pub.ok()) {
    if (absl::IsResourceExhausted(pub.status())) {
      return absl::FailedPreconditionError(absl::StrCat(
          "another launcher is running stack instance \"",
          options_.channels.instance, "\" under ", options_.channels.root,
          " (it publishes ", kLauncherStatusChannel,
          "); stop it first, or pick another --instance"));
    }
    return pub.status();
  }
  status_channel_ = std::move(*handle);
  status_pub_ = std::move(*pub);
  return absl::OkStatus();
}

StackStatus Launcher::Impl::status() const {
  StackStatus status;
  status.phase = phase_;
  status.launcher_pid = ::getpid();
  status.stack_path = stack_path_;
  status.root = options_.channels.root;
  status.instance = options_.channels.instance;
  for (const Node& node : nodes_) {
    NodeStatus& n = status.nodes.emplace_back();
    n.name = node.name;
    n.state = node.state;
    n.pid = node.pid;
    n.restarts = node.restarts;
    n.starts = node.starts;
    n.last_exit = node.last_exit;
  }
  return status;
}

void Launcher::Impl::Publish(const StackStatus& status) {
  if (!options_.status_json_path.empty()) {
    const std::string tmp =
        absl::StrCat(options_.status_json_path, ".tmp.", ::getpid());
    {
      std::ofstream file(tmp, std::ios::trunc);
      file << FormatStatusJson(status);
    }
    std::error_code ec;
    fs::rename(tmp, options_.status_json_path, ec);
    if (ec && !status_json_warned_) {
      status_json_warned_ = true;
      Warn(absl::StrCat("cannot write the status file ",
                        options_.status_json_path, ": ", ec.message()));
    }
  }
  if (status_pub_ == nullptr) return;
  transport::Loan<wire::LauncherStatus> loan = status_pub_->MakeLoan();
  if (!loan.valid()) return;
  wire::LauncherStatus::Builder root = loan.root();
  root.setTimeNs(std::chrono::duration_cast<std::chrono::nanoseconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count());
  root.setLauncherPid(status.launcher_pid);
  root.setStackFile(status.stack_path);
  root.setPhase(status.phase == StackStatus::Phase::kRunning
                    ? wire::LauncherStatus::Phase::RUNNING
                : status.phase == StackStatus::Phase::kStopping
                    ? wire::LauncherStatus::Phase::STOPPING
                    : wire::LauncherStatus::Phase::STOPPED);
  auto list = root.initNodes(static_cast<unsigned>(status.nodes.size()));
  for (size_t i = 0; i < status.nodes.size(); ++i) {
    const NodeStatus& n = status.nodes[i];
    auto b = list[static_cast<unsigned>(i)];
    b.setName(n.name);
    b.setPid(n.pid);
    b.setState(WireState(n.state));
    b.setRestarts(n.restarts);
    b.setStarts(n.starts);
    b.setLastExitValue(n.last_exit.value);
    switch (n.last_exit.kind) {
      case ExitInfo::Kind::kNone:
        b.setLastExit(wire::NodeStatus::ExitKind::NONE);
        break;
      case ExitInfo::Kind::kCode:
        b.setLastExit(wire::NodeStatus::ExitKind::CODE);
        break;
      case ExitInfo::Kind::kSignal:
        b.setLastExit(wire::NodeStatus::ExitKind::SIGNAL);
        break;
      case ExitInfo::Kind::kStartFailed:
        b.setLastExit(wire::NodeStatus::ExitKind::START_FAILED);
        b.setLastError(n.last_exit.message);
        break;
    }
  }
  const transport::PublishResult sent = status_pub_->Send(std::move(loan));
  if (sent.status == transport::PublishStatus::kTooLarge) {
    Warn(absl::StrCat("the stack's status does not fit ",
                      kLauncherStatusChannel, " (",
                      status_pub_->last_finish().ErrorMessage(),
                      "); no longer publishing it there"));
    status_pub_.reset();
  }
}

void Launcher::Impl::Changed() {
  const StackStatus s = status();
  Publish(s);
  if (on_change) on_change(s);
}

bool Launcher::Impl::AllSettled() const {
  for (const Node& node : nodes_) {
    switch (node.state) {
      case NodeState::kPending:
      case NodeState::kStarting:
      case NodeState::kRunning:
      case NodeState::kBackoff:
      case NodeState::kStopping:
        return false;
      default:
        break;
    }
  }
  return true;
}

void Launcher::Impl::StartReadyNodes() {
  bool progress = true;
  while (progress) {
    progress = false;
    const Clock::time_point now = Clock::now();
    for (Node& node : nodes_) {
      if (node.state == NodeState::kBackoff && now >= node.restart_at) {
        Start(node);
        progress = true;
        continue;
      }
      if (node.state != NodeState::kPending) continue;
      bool ready = true;
      const Node* blocker = nullptr;
      for (size_t d : node.after) {
        const Node& dep = nodes_[d];
        if (dep.starts > 0) continue;
        ready = false;
        if (dep.state == NodeState::kFailed ||
            dep.state == NodeState::kBlocked) {
          blocker = &dep;
        }
      }
      if (blocker != nullptr) {
        node.state = NodeState::kBlocked;
        Say(absl::StrCat("not starting ", node.name, ": it starts after ",
                         blocker->name, ", which never started"));
        Changed();
        progress = true;
      } else if (ready) {
        Start(node);
        progress = true;
      }
    }
  }
}

void Launcher::Impl::Start(Node& node) {
  absl::StatusOr<NodeProcess> process = SpawnNodeProcess(node.spec);
  if (!process.ok()) {
    ExitInfo exit;
    exit.kind = ExitInfo::Kind::kStartFailed;
    exit.message = std::string(process.status().message());
    err_ << kSay << "cannot start " << exit.message << "\n" << std::flush;
    Ended(node, exit, Clock::duration::zero());
    return;
  }
  if (!node.warned) {
    for (const std::string& w : process->warnings) Warn(w);
    node.warned = true;
  }
  node.pid = process->pid;
  node.pidfd = std::move(process->pidfd);
  node.start_report = std::move(process->start_report);
  node.output[0] = Output{std::move(process->stdout_fd), "", false};
  node.output[1] = Output{std::move(process->stderr_fd), "", true};
  node.applied = process->applied;
  node.state = NodeState::kStarting;
  node.started_at = Clock::now();
  if (!node.in_start_order) {
    node.in_start_order = true;
    start_order_.push_back(static_cast<size_t>(&node - nodes_.data()));
  }
  Changed();
  CheckStart(node);
}

void Launcher::Impl::CheckStart(Node& node) {
  // Decided already: running, or a failure report waiting for the exit.
  if (node.state != NodeState::kStarting || !node.start_report.valid()) return;
  absl::Status error;
  switch (ReadStartReport(node.spec, node.start_report, &error)) {
    case StartOutcome::kPending:
      return;
    case StartOutcome::kFailed:
      // The child exits next; Reap() reports it as a failed start.
      node.start_error = std::string(error.message());
      return;
    case StartOutcome::kExecuted:
      break;
  }
  node.state = NodeState::kRunning;
  ++node.starts;
  Say(absl::StrCat(node.starts == 1 ? "started " : "restarted ", node.name,
                   " (pid ", node.pid,
                   node.applied.empty() ? "" : ", " + node.applied, ")"));
  Changed();
}

void Launcher::Impl::Ended(Node& node, const ExitInfo& exit,
                           Clock::duration ran_for) {
  namespace config = transport::config;
  node.last_exit = exit;
  const bool failed = !exit.success();
  const bool restart =
      node.policy == config::RestartPolicy::ALWAYS ||
      (node.policy == config::RestartPolicy::ON_FAILURE && failed);
  const std::string what =
      exit.kind == ExitInfo::Kind::kStartFailed
          ? absl::StrCat(node.name, " could not start")
          : absl::StrCat(node.name, " exited with ", DescribeExit(exit),
                         " after ", Seconds(ran_for));
  if (!restart) {
    node.state = failed ? NodeState::kFailed : NodeState::kExited;
    Say(absl::StrCat(what, "; not restarted (restart policy ",
                     RestartPolicyName(node.policy), ")"));
    Changed();
    return;
  }
  if (node.max_restarts != 0 && node.restarts >= node.max_restarts) {
    node.state = NodeState::kFailed;
    Say(what);
    const std::string give_up = absl::StrCat(
        "giving up on node ", node.name, " after ", node.restarts, " restart",
        node.restarts == 1 ? "" : "s", ": last ", DescribeExit(exit),
        " (restart.maxRestarts is ", node.max_restarts, ")");
    err_ << kSay << give_up << "\n" << std::flush;
    Changed();
    return;
  }
  if (exit.kind != ExitInfo::Kind::kStartFailed &&
      ran_for >= options_.stable_run) {
    node.backoff_doublings = 0;
  }
  uint64_t delay = node.backoff_ms;
  for (uint32_t i = 0;
       i < node.backoff_doublings && delay < node.max_backoff_ms; ++i) {
    delay *= 2;
  }
  delay = std::min<uint64_t>(delay, node.max_backoff_ms);
  ++node.backoff_doublings;
  ++node.restarts;
  node.restart_at = Clock::now() + milliseconds(delay);
  node.state = NodeState::kBackoff;
  Say(absl::StrCat(
      what, "; restarting in ", Millis(milliseconds(delay)), " (restart ",
      node.restarts,
      node.max_restarts == 0 ? "" : absl::StrCat(" of ", node.max_restarts),
      ")"));
  Changed();
}

void Launcher::Impl::Signal(Node& node, int sig) {
  // The node's whole process group; the node alone if it left its group.
  if (::kill(-node.pid, sig) != 0) ::kill(node.pid, sig);
}

void Launcher::Impl::Reap(Node& node) {
  // The node has exited but is not reaped yet, so its pid (= its process
  // group id) cannot be reused: clear out what it left in its group.
  ::kill(-node.pid, SIGKILL);
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(node.pid, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == 0) return;  // Not exited after all.
  ExitInfo exit = r > 0 ? ExitFromWaitStatus(status) : ExitInfo{};
  // It exited while starting: its report (complete now) says whether it
  // ran its program (and exited at once) or failed before.
  CheckStart(node);
  node.start_report.Reset();
  if (!node.start_error.empty()) {
    err_ << kSay << "cannot start " << node.start_error << "\n" << std::flush;
    exit = ExitInfo{ExitInfo::Kind::kStartFailed, 0,
                    std::exchange(node.start_error, "")};
  }
  const pid_t pid = node.pid;
  node.pid = 0;
  node.pidfd.Reset();
  for (Output& output : node.output) Forward(node, output, /*final=*/true);
  const Clock::duration ran_for = Clock::now() - node.started_at;
  if (phase_ != StackStatus::Phase::kRunning) {
    node.last_exit = exit;
    node.state = NodeState::kStopped;
    Say(absl::StrCat("stopped ", node.name, " (pid ", pid, ") after ",
                     Seconds(ran_for), ": ", DescribeExit(exit)));
    Changed();
    return;
  }
  Ended(node, exit, ran_for);
}

void Launcher::Impl::EmitLines(const Node& node, Output& output, bool final) {
  std::ostream& sink = output.is_stderr ? err_ : out_;
  size_t begin = 0;
  bool wrote = false;
  while (true) {
    const size_t nl = output.partial.find('\n', begin);
    if (nl == std::string::npos) break;
    sink << '[' << node.name << "] "
         << std::string_view(output.partial).substr(begin, nl - begin) << '\n';
    wrote = true;
    begin = nl + 1;
  }
  output.partial.erase(0, begin);
  if (!output.partial.empty() && (final || output.partial.size() >= kMaxLine)) {
    sink << '[' << node.name << "] " << output.partial << '\n';
    output.partial.clear();
    wrote = true;
  }
  if (wrote) sink.flush();
}

void Launcher::Impl::Forward(Node& node, Output& output, bool final) {
  char buffer[16384];
  size_t total = 0;
  while (output.fd.valid()) {
    const ssize_t n = ::read(output.fd.get(), buffer, sizeof(buffer));
    if (n > 0) {
      output.partial.append(buffer, static_cast<size_t>(n));
      EmitLines(node, output, false);
      total += static_cast<size_t>(n);
      if (!final && total >= kMaxReadPerWake) return;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN && !final) return;
    // EOF, an error, or (final) all that was written before the exit.
    EmitLines(node, output, true);
    output.fd.Reset();
  }
}

void Launcher::Impl::WaitOnce(Clock::time_point until) {
  struct Source {
    Node* node;
    int what;  // 0/1: output, 2: pidfd, 3: start report, -1: stop fd.
  };
  std::vector<pollfd> fds;
  std::vector<Source> sources;
  if (options_.stop_fd >= 0 && !stop_requested_) {
    fds.push_back({options_.stop_fd, POLLIN, 0});
    sources.push_back({nullptr, -1});
  }
  for (Node& node : nodes_) {
    for (int k = 0; k < 2; ++k) {
      if (node.output[k].fd.valid()) {
        fds.push_back({node.output[k].fd.get(), POLLIN, 0});
        sources.push_back({&node, k});
      }
    }
    if (node.pidfd.valid()) {
      fds.push_back({node.pidfd.get(), POLLIN, 0});
      sources.push_back({&node, 2});
    }
    if (node.start_report.valid()) {
      fds.push_back({node.start_report.get(), POLLIN, 0});
      sources.push_back({&node, 3});
    }
  }
  const auto left = std::chrono::ceil<milliseconds>(until - Clock::now());
  const int timeout =
      static_cast<int>(std::clamp<int64_t>(left.count(), 0, INT_MAX));
  const int n = ::poll(fds.data(), fds.size(), timeout);
  if (n <= 0) return;
  // Starts and output first, so a node's last lines come before its exit.
  for (size_t i = 0; i < fds.size(); ++i) {
    if (fds[i].revents == 0) continue;
    const Source& s = sources[i];
    if (s.what == 0 || s.what == 1) {
      Forward(*s.node, s.node->output[s.what], false);
    } else if (s.what == 3) {
      CheckStart(*s.node);
    } else if (s.what == -1) {
      stop_requested_ = true;
    }
  }
  for (size_t i = 0; i < fds.size(); ++i) {
    if (fds[i].revents != 0 && sources[i].what == 2 &&
        sources[i].node->pid != 0) {
      Reap(*sources[i].node);
    }
  }
}

void Launcher::Impl::Shutdown(const std::string& reason) {
  phase_ = StackStatus::Phase::kStopping;
  for (Node& node : nodes_) {
    if (node.state == NodeState::kPending ||
        node.state == NodeState::kBackoff) {
      node.state = NodeState::kStopped;
    }
  }
  size_t running = 0;
  for (const Node& node : nodes_) running += node.pid != 0 ? 1 : 0;
  Say(absl::StrCat(reason, ": stopping ", running, " node",
                   running == 1 ? "" : "s",
                   " in reverse start order (SIGTERM, then SIGKILL after ",
                   Seconds(options_.kill_timeout), ")"));
  Changed();
  for (auto it = start_order_.rbegin(); it != start_order_.rend(); ++it) {
    Node& node = nodes_[*it];
    if (node.pid == 0) continue;
    const pid_t pid = node.pid;
    Signal(node, SIGTERM);
    node.state = NodeState::kStopping;
    Changed();
    const Clock::time_point term_deadline =
        Clock::now() + options_.kill_timeout;
    while (node.pid == pid && Clock::now() < term_deadline) {
      WaitOnce(term_deadline);
    }
    if (node.pid != pid) continue;
    Say(absl::StrCat(node.name, " (pid ", pid, ") did not stop within ",
                     Seconds(options_.kill_timeout), ": sending SIGKILL"));
    Signal(node, SIGKILL);
    const Clock::time_point kill_deadline =
        Clock::now() + std::max<Clock::duration>(options_.kill_timeout,
                                                 std::chrono::seconds(5));
    while (node.pid == pid && Clock::now() < kill_deadline) {
      WaitOnce(kill_deadline);
    }
    if (node.pid == pid) {
      Warn(absl::StrCat(node.name, " (pid ", pid,
                        ") is still there after SIGKILL (stuck in the "
                        "kernel?); leaving it"));
    }
  }
}

Launcher::Result Launcher::Impl::Run() {
  const Clock::time_point begin = Clock::now();
  const Clock::time_point deadline =
      options_.duration ? begin + *options_.duration : Clock::time_point::max();
  Clock::time_point next_tick = begin + options_.status_period;
  Changed();
  WaitOnce(begin);  // A stop that came during Create() starts nothing.
  std::string reason;
  while (true) {
    if (stop_requested_) {
      reason = "stop requested";
      break;
    }
    if (Clock::now() >= deadline) {
      reason =
          absl::StrCat("--duration ", Seconds(*options_.duration), " is over");
      break;
    }
    StartReadyNodes();
    if (AllSettled()) {
      Say("every node has ended");
      break;
    }
    Clock::time_point until = std::min(deadline, next_tick);
    for (const Node& node : nodes_) {
      if (node.state == NodeState::kBackoff) {
        until = std::min(until, node.restart_at);
      }
    }
    WaitOnce(until);
    const Clock::time_point now = Clock::now();
    if (now >= next_tick) {
      Publish(status());
      next_tick += options_.status_period;
      if (next_tick <= now) next_tick = now + options_.status_period;
    }
  }
  Result result;
  if (!reason.empty()) {
    result.stop_requested = true;
    Shutdown(reason);
  }
  phase_ = StackStatus::Phase::kStopped;
  Changed();
  result.status = status();
  for (const NodeStatus& node : result.status.nodes) {
    if (node.state == NodeState::kFailed || node.state == NodeState::kBlocked) {
      result.exit_code = 1;
    }
  }
  out_ << kSay << "summary after " << Seconds(Clock::now() - begin) << "\n"
       << FormatSummary(result.status) << std::flush;
  return result;
}

// ---------------------------------------------------------------------------

Launcher::Launcher(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Launcher::~Launcher() = default;

absl::StatusOr<std::unique_ptr<Launcher>> Launcher::Create(
    LaunchOptions options, std::unique_ptr<transport::SchemaRegistry> schemas,
    std::ostream& out, std::ostream& err) {
  if (schemas == nullptr) {
    schemas = std::make_unique<transport::SchemaRegistry>();
  }
  auto impl =
      std::make_unique<Impl>(std::move(options), std::move(schemas), out, err);
  if (absl::Status s = impl->Prepare(); !s.ok()) return s;
  return std::unique_ptr<Launcher>(new Launcher(std::move(impl)));
}

Launcher::Result Launcher::Run() { return impl_->Run(); }

StackStatus Launcher::status() const { return impl_->status(); }

void Launcher::set_on_change(
    std::function<void(const StackStatus&)> on_change) {
  impl_->on_change = std::move(on_change);
}

}  // namespace tether::tools
