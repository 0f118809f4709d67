#include "tests/ros_bridge/ros_test_env.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace tether::ros_bridge::testing {

int FreePort() {
  for (;;) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    socklen_t len = sizeof(a);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    ::close(fd);
    const int port = ntohs(a.sin_port);
    if (port != 11311 && port > 1024) return port;
  }
}

std::string TmpDir() {
  const char* t = std::getenv("TEST_TMPDIR");
  return t != nullptr ? t : "/tmp";
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string Runfile(const std::string& path) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  if (srcdir == nullptr || workspace == nullptr) return path;
  return std::string(srcdir) + "/" + workspace + "/" + path;
}

std::string Hex(std::span<const uint8_t> bytes) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (uint8_t v : bytes) {
    s.push_back(digits[v >> 4]);
    s.push_back(digits[v & 15]);
  }
  return s;
}

std::vector<uint8_t> FromHex(const std::string& hex) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

bool WaitFor(const std::function<bool()>& done,
             std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return done();
}

Process::Process(std::vector<std::string> argv,
                 std::map<std::string, std::string> env, std::string log)
    : log_(std::move(log)) {
  std::vector<std::string> envs;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    if (env.count(kv.substr(0, kv.find('='))) == 0) envs.push_back(kv);
  }
  for (const auto& [k, v] : env) envs.push_back(k + "=" + v);
  pid_ = ::fork();
  if (pid_ == 0) {
    ::setpgid(0, 0);
    const int fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::close(fd);
    std::vector<char*> a, e;
    for (std::string& s : argv) a.push_back(s.data());
    a.push_back(nullptr);
    for (std::string& s : envs) e.push_back(s.data());
    e.push_back(nullptr);
    ::execvpe(a[0], a.data(), e.data());
    std::fprintf(stderr, "exec %s: %s\n", a[0], std::strerror(errno));
    ::_exit(127);
  }
  ::setpgid(pid_, pid_);
}

Process::~Process() {
  if (running()) {
    Signal(SIGKILL);
    Wait(std::chrono::milliseconds(5000));
  }
  // Children of the group (roscore's rosmaster) too.
  if (pid_ > 0) ::kill(-pid_, SIGKILL);
}

void Process::Signal(int sig) {
  if (pid_ > 0) ::kill(-pid_, sig);
}

bool Process::running() {
  if (reaped_) return false;
  int status = 0;
  const pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    reaped_ = true;
    code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return false;
  }
  return r == 0;
}

bool Process::Wait(std::chrono::milliseconds timeout, int* code) {
  const bool done = WaitFor([&] { return !running(); }, timeout);
  if (done && code != nullptr) *code = code_;
  return done;
}

int Process::Stop(std::chrono::milliseconds grace) {
  if (running()) {
    Signal(SIGINT);
    if (!Wait(grace)) {
      Signal(SIGKILL);
      Wait(std::chrono::milliseconds(5000));
    }
  }
  return code_;
}

RosGraph::RosGraph() : RosGraph(FreePort(), "") {}

RosGraph::RosGraph(int port, std::string netns)
    : port_(port), netns_(std::move(netns)) {
  home_ = TmpDir() + "/ros_home_" + std::to_string(port_) +
          (netns_.empty() ? "" : "_" + netns_);
  ::mkdir(home_.c_str(), 0755);
}

std::vector<std::string> RosGraph::InNetns(std::vector<std::string> argv) const {
  if (netns_.empty()) return argv;
  std::vector<std::string> in = {"/usr/sbin/ip", "netns", "exec", netns_};
  in.insert(in.end(), argv.begin(), argv.end());
  return in;
}

RosGraph::~RosGraph() { StopMaster(); }

std::string RosGraph::uri() const {
  return "http://127.0.0.1:" + std::to_string(port_);
}

std::map<std::string, std::string> RosGraph::env() const {
  return {{"ROS_MASTER_URI", uri()},
          {"ROS_IP", "127.0.0.1"},
          {"ROS_HOME", home_},
          {"ROS_LOG_DIR", home_ + "/log"},
          {"PATH", "/usr/bin:/bin"}};
}

bool RosGraph::Start() {
  roscore_ = std::make_unique<Process>(
      InNetns({"roscore", "-p", std::to_string(port_)}), env(),
      home_ + "/roscore.log");
  return WaitFor(
      [&] {
        int code = -1;
        RunTool({"rosparam", "get", "/run_id"}, kToolTimeout,
                &code);
        return code == 0;
      },
      std::chrono::seconds(90));
}

void RosGraph::StopMaster() {
  if (roscore_ != nullptr) {
    roscore_->Stop();
    roscore_.reset();
  }
}

std::string RosGraph::RunTool(std::vector<std::string> argv,
                              std::chrono::milliseconds timeout, int* code) {
  const std::string log = home_ + "/tool" + std::to_string(serial_++) + ".log";
  Process p(InNetns(std::move(argv)), env(), log);
  int c = -1;
  if (!p.Wait(timeout, &c)) c = p.Stop(std::chrono::milliseconds(1000));
  if (code != nullptr) *code = c;
  return p.Output();
}

std::string RosGraph::Param(const std::string& name) {
  int code = -1;
  std::string out = RunTool({"rosparam", "get", name}, kToolTimeout, &code);
  if (code != 0) return "";
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  if (out.size() >= 2 && (out.front() == '\'' || out.front() == '"') &&
      out.back() == out.front()) {
    out = out.substr(1, out.size() - 2);
  }
  return out;
}

std::unique_ptr<Process> RosGraph::Spawn(std::vector<std::string> argv,
                                         const std::string& log_name) {
  return std::make_unique<Process>(
      InNetns(std::move(argv)), env(),
      home_ + "/" + log_name + std::to_string(serial_++) + ".log");
}

}  // namespace tether::ros_bridge::testing
