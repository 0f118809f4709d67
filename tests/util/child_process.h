// tests: a forked peer process for tests that need one (a reader in
// another process, a process to kill), with a pipe on which the child says
// how far it got, so the parent waits for "set up" instead of sleeping.
//
// The child runs `body` and _exits with what it returns (an exit code that
// says which step failed); it never returns into the test framework. The
// parent hears the child's bytes (Heard), reaps it (Wait), and the
// destructor kills (SIGKILL) and reaps a child still running, so a failed
// ASSERT in the parent leaves no process behind. Test code only: forks,
// blocks, allocates.
#ifndef TETHER_TESTS_UTIL_CHILD_PROCESS_H_
#define TETHER_TESTS_UTIL_CHILD_PROCESS_H_

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <functional>
#include <optional>

namespace tether::testing {

class ChildProcess {
 public:
  // The child's end of the pipe.
  class Voice {
   public:
    explicit Voice(int fd) : fd_(fd) {}
    // Tells the parent one byte ("ready", or how far it got). False when
    // the parent is gone.
    bool Say(char c = 'r') const { return ::write(fd_, &c, 1) == 1; }

   private:
    int fd_;
  };

  // Forks (stdio flushed first, so that nothing buffered is written twice).
  // started() is false if the pipe or the fork failed.
  explicit ChildProcess(const std::function<int(const Voice&)>& body) {
    int fds[2];
    if (::pipe(fds) != 0) return;
    std::fflush(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(fds[0]);
      ::_exit(body(Voice(fds[1])));
    }
    ::close(fds[1]);
    if (pid_ < 0) {
      ::close(fds[0]);
      return;
    }
    heard_ = fds[0];
  }

  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  ~ChildProcess() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      (void)Wait();
    }
    if (heard_ >= 0) ::close(heard_);
  }

  bool started() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }

  // The next byte the child said; nullopt if it ended (or closed its end)
  // without saying more.
  std::optional<char> Heard() {
    char c;
    ssize_t n;
    do {
      n = ::read(heard_, &c, 1);
    } while (n < 0 && errno == EINTR);
    if (n != 1) return std::nullopt;
    return c;
  }

  // Sends `sig` to the child (false once it was reaped).
  bool Kill(int sig) { return !reaped_ && ::kill(pid_, sig) == 0; }

  // Reaps the child: its wait status (-1 if it could not be had).
  int Wait() {
    if (reaped_) return status_;
    pid_t got;
    do {
      got = ::waitpid(pid_, &status_, 0);
    } while (got < 0 && errno == EINTR);
    reaped_ = true;
    if (got != pid_) status_ = -1;
    return status_;
  }

  // Wait(), as an exit code: the child's, or -1 if it did not exit (killed
  // by a signal).
  int ExitCode() {
    const int status = Wait();
    return status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  pid_t pid_ = -1;
  int heard_ = -1;
  bool reaped_ = false;
  int status_ = -1;
};

}  // namespace tether::testing

#endif  // TETHER_TESTS_UTIL_CHILD_PROCESS_H_
