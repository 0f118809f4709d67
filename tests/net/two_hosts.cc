#include "tests/net/two_hosts.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "capnp/serialize.h"
#include "transport/channel_handle.h"
#include "transport/framing.h"
#include "transport/raw_endpoints.h"

extern char** environ;

namespace tether::net::testing {
namespace {

constexpr char kPrefix[] = "tether-net-";

}  // namespace

int RunCommand(const std::vector<std::string>& argv, std::string* output) {
  char path[] = "/tmp/tether-net-cmd-XXXXXX";
  const int fd = ::mkstemp(path);
  if (fd < 0) return -1;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fd, 1);
  posix_spawn_file_actions_adddup2(&actions, fd, 2);
  std::vector<std::string> copy = argv;
  std::vector<char*> args;
  for (std::string& a : copy) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t pid = 0;
  int status = -1;
  if (posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ) ==
      0) {
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  posix_spawn_file_actions_destroy(&actions);
  ::close(fd);
  if (output != nullptr) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    *output = s.str();
  }
  ::unlink(path);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

absl::StatusOr<std::unique_ptr<TwoHosts>> TwoHosts::Create() {
  if (::geteuid() != 0) {
    return absl::PermissionDeniedError("network namespaces need root");
  }
  // Namespaces of earlier runs that were killed before their cleanup.
  std::string list;
  RunCommand({"ip", "netns", "list"}, &list);
  for (absl::string_view line : absl::StrSplit(list, '\n', absl::SkipEmpty())) {
    const std::string name(line.substr(0, line.find(' ')));
    if (name.rfind(kPrefix, 0) != 0) continue;
    const int owner = std::atoi(name.c_str() + sizeof(kPrefix) - 1);
    if (owner > 0 && ::kill(owner, 0) != 0 && errno == ESRCH) {
      RunCommand({"ip", "netns", "del", name}, nullptr);
    }
  }
  static std::atomic<int> counter{0};
  const int n = counter.fetch_add(1);
  const int pid = static_cast<int>(::getpid());
  std::unique_ptr<TwoHosts> h(new TwoHosts());
  const char* side[2] = {"a", "b"};
  std::string out;
  for (int i = 0; i < 2; ++i) {
    h->netns_[i] = absl::StrCat(kPrefix, pid, "-", n, "-", side[i]);
    // Interface names are at most 15 characters.
    h->veth_[i] = absl::StrCat("tn", side[i], pid % 10000000, "x", n % 10);
    if (RunCommand({"ip", "netns", "add", h->netns_[i]}, &out) != 0) {
      return absl::InternalError("ip netns add failed: " + out);
    }
  }
  auto ip = [&](std::vector<std::string> args) -> absl::Status {
    args.insert(args.begin(), "ip");
    if (RunCommand(args, &out) != 0) {
      std::string cmd;
      for (const std::string& a : args) absl::StrAppend(&cmd, a, " ");
      return absl::InternalError(absl::StrCat(cmd, "failed: ", out));
    }
    return absl::OkStatus();
  };
  if (absl::Status s = ip({"link", "add", h->veth_[0], "netns", h->netns_[0],
                           "type", "veth", "peer", "name", h->veth_[1],
                           "netns", h->netns_[1]});
      !s.ok()) {
    return s;
  }
  for (int i = 0; i < 2; ++i) {
    // Loopback up too: Cyclone wakes its receive threads at shutdown by
    // sending to its own address, which a namespace without lo cannot.
    if (absl::Status s = ip({"-n", h->netns_[i], "link", "set", "lo", "up"});
        !s.ok()) {
      return s;
    }
    if (absl::Status s = ip({"-n", h->netns_[i], "addr", "add",
                             h->address(i) + "/24", "dev", h->veth_[i]});
        !s.ok()) {
      return s;
    }
    if (absl::Status s =
            ip({"-n", h->netns_[i], "link", "set", h->veth_[i], "up"});
        !s.ok()) {
      return s;
    }
  }
  return h;
}

TwoHosts::~TwoHosts() {
  for (pid_t pid : pids_) Stop(pid, std::chrono::milliseconds(3000));
  for (const std::string& ns : netns_) {
    if (!ns.empty()) RunCommand({"ip", "netns", "del", ns}, nullptr);
  }
}

absl::Status TwoHosts::SetLink(bool up) {
  std::string out;
  if (RunCommand({"ip", "-n", netns_[0], "link", "set", veth_[0],
                  up ? "up" : "down"},
                 &out) != 0) {
    return absl::InternalError("ip link set failed: " + out);
  }
  return absl::OkStatus();
}

pid_t TwoHosts::Spawn(int host, const std::vector<std::string>& argv,
                      const std::string& log_path) {
  const std::string ns_path = "/run/netns/" + netns_[host];
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    const int ns = ::open(ns_path.c_str(), O_RDONLY | O_CLOEXEC);
    if (ns < 0 || ::setns(ns, CLONE_NEWNET) != 0) ::_exit(126);
    const int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (log >= 0) {
      ::dup2(log, 1);
      ::dup2(log, 2);
    }
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  if (pid > 0) pids_.push_back(pid);
  return pid;
}

std::optional<int> TwoHosts::Exited(pid_t pid) {
  int status = 0;
  if (::waitpid(pid, &status, WNOHANG) != pid) return std::nullopt;
  std::erase(pids_, pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int TwoHosts::Stop(pid_t pid, std::chrono::milliseconds grace) {
  if (std::find(pids_.begin(), pids_.end(), pid) == pids_.end()) return -1;
  ::kill(pid, SIGTERM);
  const auto end = std::chrono::steady_clock::now() + grace;
  int status = 0;
  for (;;) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0) {
      status = -1;
      break;
    }
    if (std::chrono::steady_clock::now() > end) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::erase(pids_, pid);
  if (status == -1) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::optional<std::vector<unsigned char>> ReadStatusBytes(
    const shm::ChannelOptions& options, const std::string& name) {
  auto h = transport::ChannelHandle::Open(options,
                                          "/tether/net/" + name + "/status");
  if (!h.ok()) return std::nullopt;
  auto sub = transport::RawSubscriber::Create(h->get(), {.pin = true,
                                                         .from_oldest = true});
  if (!sub.ok()) return std::nullopt;
  transport::RawMessage m;
  if ((*sub)->Latest(&m) != transport::ReceiveStatus::kOk) return std::nullopt;
  std::vector<unsigned char> bytes(
      reinterpret_cast<const unsigned char*>(m.bytes.data()),
      reinterpret_cast<const unsigned char*>(m.bytes.data()) + m.bytes.size());
  return bytes;
}

std::optional<ChannelLine> ReadChannelStatus(const shm::ChannelOptions& options,
                                             const std::string& bridge,
                                             const std::string& channel,
                                             status::Direction direction) {
  std::optional<std::vector<unsigned char>> bytes =
      ReadStatusBytes(options, bridge);
  if (!bytes) return std::nullopt;
  std::vector<capnp::word> words((bytes->size() + 7) / 8);
  std::memcpy(words.data(), bytes->data(), bytes->size());
  capnp::FlatArrayMessageReader reader(
      kj::arrayPtr(words.data(), words.size()));
  auto root = reader.getRoot<status::BridgeStatus>();
  for (auto c : root.getChannels()) {
    if (c.getName() != channel || c.getDirection() != direction) continue;
    ChannelLine l;
    l.name = c.getName().cStr();
    l.direction = c.getDirection();
    l.state = c.getState();
    l.detail = c.getDetail().cStr();
    l.peers = c.getPeers();
    l.reconnects = c.getReconnects();
    l.messages = c.getMessages();
    l.lost_network = c.getLostNetwork();
    l.lost_at_sender = c.getLostAtSender();
    l.dropped = c.getDropped();
    l.duplicates = c.getDuplicates();
    return l;
  }
  return std::nullopt;
}

bool WaitFor(const std::function<bool()>& done,
             std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

}  // namespace tether::net::testing
