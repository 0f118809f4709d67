// Test helper: two "hosts" on one machine — network namespaces joined by a
// veth pair that this helper creates and deletes — and processes started
// inside either of them. Shared memory is not namespaced: each host's tether
// channels live in their own instance of one ScopedRoot, so only the bridges
// (each in its namespace, pinned to its veth end) connect them. Needs root
// outside Bazel's sandbox (tests using it are tagged no-sandbox).
#ifndef TETHER_TESTS_NET_TWO_HOSTS_H_
#define TETHER_TESTS_NET_TWO_HOSTS_H_

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "net/bridge_status.capnp.h"
#include "shm/channel.h"

namespace tether::net::testing {

class TwoHosts {
 public:
  // Deletes namespaces left by earlier runs whose process is gone, then
  // makes namespaces tether-net-<pid>-<n>-{a,b} and the veth pair between
  // them (10.201.0.1/24 in a, .2 in b; nothing else is routed; loopback up). Error if not
  // root or `ip` fails.
  static absl::StatusOr<std::unique_ptr<TwoHosts>> Create();
  // Stops every process it started (SIGTERM, then SIGKILL) and deletes both
  // namespaces (the veth goes with them).
  ~TwoHosts();
  TwoHosts(const TwoHosts&) = delete;
  TwoHosts& operator=(const TwoHosts&) = delete;

  // host 0 = "a", 1 = "b".
  const std::string& netns(int host) const { return netns_[host]; }
  const std::string& interface(int host) const { return veth_[host]; }
  std::string address(int host) const {
    return host == 0 ? "10.201.0.1" : "10.201.0.2";
  }
  // `ip link set <veth of a> down|up` (cuts the link for both ends).
  absl::Status SetLink(bool up);

  // Starts argv[0] (a path) inside `host`'s namespace with stdout and
  // stderr to `log_path`; it dies with the test process. Returns its pid.
  pid_t Spawn(int host, const std::vector<std::string>& argv,
              const std::string& log_path);
  // SIGTERM, up to `grace` to exit, then SIGKILL. The exit status, or -1.
  int Stop(pid_t pid, std::chrono::milliseconds grace =
                          std::chrono::milliseconds(5000));
  // The process ended by itself: its exit status; nullopt while it runs.
  std::optional<int> Exited(pid_t pid);

 private:
  TwoHosts() = default;
  std::string netns_[2];
  std::string veth_[2];
  std::vector<pid_t> pids_;
};

// Runs a command (argv[0] looked up in PATH); its exit status, or -1.
int RunCommand(const std::vector<std::string>& argv, std::string* output);

// The newest status bridge `name` published in `options`' instance.
std::optional<std::vector<unsigned char>> ReadStatusBytes(
    const shm::ChannelOptions& options, const std::string& name);

// One channel's status line, copied out of the status message.
struct ChannelLine {
  std::string name;
  status::Direction direction = status::Direction::OUT;
  status::State state = status::State::WAITING;
  std::string detail;
  uint32_t peers = 0, reconnects = 0;
  uint64_t messages = 0, lost_network = 0, lost_at_sender = 0, dropped = 0,
           duplicates = 0;
};
// The line of `channel` in `direction`, from the newest status; nullopt if
// there is none yet.
std::optional<ChannelLine> ReadChannelStatus(const shm::ChannelOptions& options,
                                             const std::string& bridge,
                                             const std::string& channel,
                                             status::Direction direction);

// Polls `done` every 20 ms until it is true or `timeout` passes.
bool WaitFor(const std::function<bool()>& done,
             std::chrono::milliseconds timeout);

}  // namespace tether::net::testing

#endif  // TETHER_TESTS_NET_TWO_HOSTS_H_
