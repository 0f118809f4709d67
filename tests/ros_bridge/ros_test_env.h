// tests/ros_bridge: a private ROS graph for a test — roscore on a free port
// (never 11311), ROS_IP=127.0.0.1, ROS_HOME/ROS_LOG_DIR in the test's tmp
// dir — and child processes (bridge, ROS peers, rostopic) started in their
// own process groups, stopped with SIGINT, killed by pid (whole group) in
// teardown, every wait bounded.
#ifndef TETHER_TESTS_ROS_BRIDGE_ROS_TEST_ENV_H_
#define TETHER_TESTS_ROS_BRIDGE_ROS_TEST_ENV_H_

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace tether::ros_bridge::testing {

// A TCP port nobody listens on now (bound and released; not 11311).
int FreePort();

std::string TmpDir();
std::string ReadFile(const std::string& path);
// A path under the test's runfiles ("ros_bridge/ros_bridge").
std::string Runfile(const std::string& path);

// Lowercase hex of bytes, and back (pairs of hex digits).
std::string Hex(std::span<const uint8_t> bytes);
std::vector<uint8_t> FromHex(const std::string& hex);

// Polls `done` every 20 ms for up to `timeout`.
bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds timeout);

class Process {
 public:
  // Starts argv with the current environment plus `env`, stdout and stderr
  // to `log` (appended). Own process group.
  Process(std::vector<std::string> argv, std::map<std::string, std::string> env,
          std::string log);
  ~Process();  // SIGKILL to the group if still running, then reaped
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& log() const { return log_; }
  std::string Output() const { return ReadFile(log_); }
  // Sends `sig` to the process group.
  void Signal(int sig);
  // True (and the exit code) if it exited within `timeout`.
  bool Wait(std::chrono::milliseconds timeout, int* code = nullptr);
  // SIGINT, then SIGKILL after `grace`. Returns the exit code (or 128+sig).
  int Stop(std::chrono::milliseconds grace = std::chrono::milliseconds(5000));
  bool running();

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  int code_ = -1;
  std::string log_;
};

// How long a query by a ROS command-line tool (rostopic info, rosparam get)
// may take before it is killed: see RosGraph::RunTool.
inline constexpr std::chrono::seconds kToolTimeout{15};

class RosGraph {
 public:
  // Picks a port; Start() runs roscore there.
  RosGraph();
  // A graph at `port` whose roscore and children run in network namespace
  // `netns` (a name under /run/netns, e.g. net::testing::TwoHosts's): two
  // such graphs can have one address, 127.0.0.1:port, as two robots do.
  RosGraph(int port, std::string netns);
  ~RosGraph();

  // Starts roscore and waits (bounded) until it answers. False on timeout.
  bool Start();
  // Stops roscore (and its rosmaster, rosout).
  void StopMaster();

  int port() const { return port_; }
  std::string uri() const;
  // ROS_MASTER_URI, ROS_IP, ROS_HOME, ROS_LOG_DIR for children.
  std::map<std::string, std::string> env() const;

  // Runs a ROS command-line tool (rostopic ...) to completion, bounded by
  // `timeout` (kToolTimeout for a query: a tool's Python start-up takes
  // about a second here and several on a loaded machine, and a query that
  // is killed before it answers can only be retried into the same wall);
  // returns its output.
  std::string RunTool(std::vector<std::string> argv,
                      std::chrono::milliseconds timeout, int* code = nullptr);
  // A string parameter's value (`rosparam get`, YAML quotes taken off);
  // empty if it is not set or the tool failed.
  std::string Param(const std::string& name);
  // Starts a child in this graph's environment.
  std::unique_ptr<Process> Spawn(std::vector<std::string> argv,
                                 const std::string& log_name);

 private:
  // argv, run in netns_ when there is one.
  std::vector<std::string> InNetns(std::vector<std::string> argv) const;

  int port_;
  std::string netns_;
  std::string home_;
  std::unique_ptr<Process> roscore_;
  int serial_ = 0;
};

}  // namespace tether::ros_bridge::testing

#endif  // TETHER_TESTS_ROS_BRIDGE_ROS_TEST_ENV_H_
