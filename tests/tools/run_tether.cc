#include "tests/tools/run_tether.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "gtest/gtest.h"

extern char** environ;

namespace tether::tools::test {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string OutputPath(const std::string& tag, const char* stream) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = tmp != nullptr ? tmp : "/tmp";
  return dir + "/" + tag + "." + stream;
}

// Reaps `pid`, or after `timeout_s` (> 0) sends SIGTERM and, 2 s later,
// SIGKILL. Returns the wait status.
int Reap(pid_t pid, double timeout_s, Outcome* outcome) {
  int status = 0;
  if (timeout_s <= 0) {
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return status;
  }
  using Clock = std::chrono::steady_clock;
  Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(timeout_s));
  for (;;) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0 && errno != EINTR) return status;
    if (Clock::now() >= deadline) {
      if (!outcome->timed_out) {
        outcome->timed_out = true;
        ::kill(pid, SIGTERM);
        deadline = Clock::now() + std::chrono::seconds(2);
      } else if (!outcome->killed) {
        outcome->killed = true;
        ::kill(pid, SIGKILL);
        deadline = Clock::time_point::max();
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

std::string TetherPath() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  if (srcdir == nullptr || workspace == nullptr) return "tools/tether";
  return std::string(srcdir) + "/" + workspace + "/tools/tether";
}

pid_t StartTether(std::vector<std::string> args, const std::string& tag,
                  const RunOptions& options) {
  const std::string out_path = OutputPath(tag, "out");
  const std::string err_path = OutputPath(tag, "err");
  const std::string path = TetherPath();
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(path.c_str()));
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  if (options.file_size_limit == 0) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, path.c_str(), &actions, nullptr,
                               argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
      ADD_FAILURE() << "cannot run " << path;
      return -1;
    }
    return pid;
  }
  // fork + exec for the resource limit; the child only makes
  // async-signal-safe calls.
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int out =
        ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err =
        ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out < 0 || err < 0 || ::dup2(out, 1) < 0 || ::dup2(err, 2) < 0) {
      ::_exit(127);
    }
    struct sigaction ignore = {};
    ignore.sa_handler = SIG_IGN;
    ::sigaction(SIGXFSZ, &ignore, nullptr);
    const rlimit limit{options.file_size_limit, options.file_size_limit};
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) ::_exit(127);
    ::execve(path.c_str(), argv.data(), environ);
    ::_exit(127);
  }
  if (pid < 0) ADD_FAILURE() << "cannot run " << path;
  return pid;
}

std::string StartedStderr(const std::string& tag) {
  return Slurp(OutputPath(tag, "err"));
}

Outcome WaitTether(pid_t pid, const std::string& tag,
                   const RunOptions& options) {
  Outcome outcome;
  if (pid < 0) return outcome;
  const int status = Reap(pid, options.timeout_s, &outcome);
  outcome.code =
      WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  outcome.out = Slurp(OutputPath(tag, "out"));
  outcome.err = Slurp(OutputPath(tag, "err"));
  return outcome;
}

Outcome RunTether(std::vector<std::string> args, const RunOptions& options) {
  return WaitTether(StartTether(std::move(args), "tether", options), "tether",
                    options);
}

}  // namespace tether::tools::test
