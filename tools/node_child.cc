#include "tools/node_child.h"

#include <grp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

namespace tether::tools::internal {
namespace {

[[noreturn]] void ChildFail(int report_w, ChildStage stage) {
  const ChildReport report{stage, errno};
  (void)!::write(report_w, &report, sizeof(report));
  ::_exit(kChildExitFailed);
}

}  // namespace

[[noreturn]] void RunChild(const ChildArgs& a) {
  auto fail = [&](ChildStage stage) { ChildFail(a.report_w, stage); };
  // Die with the launcher, also if it died before this line.
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) fail(ChildStage::kDeathSignal);
  if (::getppid() != a.parent) ::_exit(kChildExitParentGone);
  ::setpgid(0, 0);
  // Default dispositions and an empty mask for the program (the launcher's
  // handlers and the mask blocked around fork must not leak into it).
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    struct sigaction action;
    std::memset(&action, 0, sizeof(action));
    action.sa_handler = SIG_DFL;
    ::sigaction(sig, &action, nullptr);  // Fails for reserved signals: fine.
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);

  // Wait until the parent has applied scheduling and CPUs.
  ::close(a.go_parent);
  char go = 0;
  ssize_t n;
  do {
    n = ::read(a.go_child, &go, 1);
  } while (n < 0 && errno == EINTR);
  if (n != 1) {
    errno = n == 0 ? EPIPE : errno;
    fail(ChildStage::kGo);
  }

  if (::dup2(a.null_fd, 0) < 0 || ::dup2(a.stdout_w, 1) < 0 ||
      ::dup2(a.stderr_w, 2) < 0) {
    fail(ChildStage::kStdio);
  }
  // No other descriptor of the launcher reaches the program. (Marked
  // close-on-exec rather than closed: the report pipe must stay open until
  // the exec.) Linux >= 5.11; older kernels keep the launcher's own
  // close-on-exec flags, which cover every fd it opens.
  ::syscall(SYS_close_range, 3u, ~0u, CLOSE_RANGE_CLOEXEC);

  if (a.switch_user) {
    if (::setgroups(a.group_count, a.groups) != 0) fail(ChildStage::kSetgroups);
    if (::setgid(a.gid) != 0) fail(ChildStage::kSetgid);
    if (::setuid(a.uid) != 0) fail(ChildStage::kSetuid);
    // A credential change clears the parent-death signal: arm it again.
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) {
      fail(ChildStage::kDeathSignal);
    }
    if (::getppid() != a.parent) ::_exit(kChildExitParentGone);
  }
  if (a.working_directory[0] != '\0' && ::chdir(a.working_directory) != 0) {
    fail(ChildStage::kChdir);
  }
  ::execve(a.path, a.argv, a.envp);
  ChildFail(a.report_w, ChildStage::kExec);
}

}  // namespace tether::tools::internal
