#include "tools/node_process.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "tools/node_child.h"

namespace tether::tools {

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) {
    Reset();
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

void Fd::Reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

namespace {

using internal::ChildArgs;
using internal::ChildReport;
using internal::ChildStage;

// The first folder above `path` that `user` may not enter (by its mode
// bits: owner, group and supplementary groups, others; root enters all), or
// "" when every one may be. Parent side, after the child failed.
std::string FolderUserCannotEnter(const std::string& path,
                                  const UserAccount& user) {
  if (user.uid == 0) return "";
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  std::vector<std::filesystem::path> chain;
  for (; !dir.empty() && dir != dir.parent_path(); dir = dir.parent_path()) {
    chain.push_back(dir);
  }
  chain.push_back("/");
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    struct stat st;
    if (::stat(it->c_str(), &st) != 0) continue;
    mode_t bit = S_IXOTH;
    if (st.st_uid == user.uid) {
      bit = S_IXUSR;
    } else if (st.st_gid == user.gid ||
               std::find(user.groups.begin(), user.groups.end(), st.st_gid) !=
                   user.groups.end()) {
      bit = S_IXGRP;
    }
    if ((st.st_mode & bit) == 0) return it->string();
  }
  return "";
}

std::string UserSwitchHelp(const NodeProcessSpec& spec) {
  return absl::StrCat(
      ". Running node ", spec.name, " as user ", spec.user->name,
      " needs a launcher running as root (or with CAP_SETUID and "
      "CAP_SETGID); in a user namespace (a container, Bazel's sandbox) only "
      "mapped ids can be used. Fix: run `tether launch` as root, or remove "
      "the node's \"user\" to run it as the launcher's user");
}

absl::Status ChildFailure(const NodeProcessSpec& spec, const ChildReport& r) {
  const std::string err = std::strerror(r.error);
  const std::string node = absl::StrCat("node ", spec.name, ": ");
  switch (r.stage) {
    case ChildStage::kGo:
      return absl::InternalError(absl::StrCat(
          node, "the child lost its launcher before starting: ", err));
    case ChildStage::kStdio:
      return absl::InternalError(
          absl::StrCat(node, "cannot connect stdin/stdout/stderr: ", err));
    case ChildStage::kSetgroups:
      return absl::PermissionDeniedError(
          absl::StrCat(node, "setgroups for user ", spec.user->name,
                       " failed: ", err, UserSwitchHelp(spec)));
    case ChildStage::kSetgid:
      return absl::PermissionDeniedError(absl::StrCat(
          node, "setgid(", spec.user->gid, ") for user ", spec.user->name,
          " failed: ", err, UserSwitchHelp(spec)));
    case ChildStage::kSetuid:
      return absl::PermissionDeniedError(absl::StrCat(
          node, "setuid(", spec.user->uid, ") for user ", spec.user->name,
          " failed: ", err, UserSwitchHelp(spec)));
    case ChildStage::kDeathSignal:
      return absl::InternalError(
          absl::StrCat(node, "prctl(PR_SET_PDEATHSIG) failed: ", err));
    case ChildStage::kChdir:
      return absl::NotFoundError(absl::StrCat(
          node, "cannot enter working directory ", spec.working_directory, ": ",
          err,
          spec.user ? absl::StrCat(" (as user ", spec.user->name, ")") : "",
          "; create it or pass another --workdir"));
    case ChildStage::kExec: {
      std::string hint;
      if (r.error == ENOENT) {
        hint = "; for a script, check that its #! interpreter exists";
      } else if (r.error == EACCES && spec.user &&
                 !FolderUserCannotEnter(spec.path, *spec.user).empty()) {
        const std::string folder = FolderUserCannotEnter(spec.path, *spec.user);
        hint = absl::StrCat(
            "; user ", spec.user->name, " may not enter the folder ", folder,
            " above it (the node runs as that user): let them in (chmod o+x ",
            folder, "), or install the program where they can reach it");
      } else if (r.error == EACCES) {
        hint = absl::StrCat(
            "; make it executable (chmod +x ", spec.path, ")",
            spec.user ? absl::StrCat(" and readable by user ", spec.user->name)
                      : "");
      } else if (r.error == ENOEXEC) {
        hint = "; it is not a program: a script needs a #! line";
      }
      const std::string msg =
          absl::StrCat(node, "cannot execute ", spec.path, ": ", err, hint);
      if (r.error == ENOENT) return absl::NotFoundError(msg);
      if (r.error == EACCES || r.error == EPERM) {
        return absl::PermissionDeniedError(msg);
      }
      return absl::FailedPreconditionError(msg);
    }
  }
  return absl::InternalError(absl::StrCat(node, "unknown child failure"));
}

void ReapBlocking(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

// The CPUs `pid` (0: the calling thread) may run on.
std::vector<int> CpusOf(pid_t pid) {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(pid, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

// Applies the node's CPUs, policy/priority and nice value to the waiting
// child `pid`. Returns the settings that failed (each with its fix) and
// fills `applied`.
std::vector<std::string> ApplyRealtime(const NodeProcessSpec& spec, pid_t pid,
                                       std::vector<std::string>* applied) {
  std::vector<std::string> problems;
  if (!spec.cpus.empty()) {
    // The kernel pins to the requested CPUs it allows (online, in the
    // cpuset) and fails only if that leaves none; read back what it took.
    const absl::Status s = loop::SetThreadAffinity(spec.cpus, pid);
    std::vector<int> actual;
    if (s.ok()) {
      actual = CpusOf(pid);
    } else if (!absl::IsInvalidArgument(s)) {
      problems.push_back(std::string(s.message()));
    }
    if (s.ok() || absl::IsInvalidArgument(s)) {
      std::vector<int> missing;
      for (int cpu : spec.cpus) {
        if (std::find(actual.begin(), actual.end(), cpu) == actual.end()) {
          missing.push_back(cpu);
        }
      }
      if (!missing.empty()) {
        const std::vector<int> allowed = CpusOf(0);
        problems.push_back(absl::StrCat(
            "CPU", missing.size() > 1 ? "s " : " ", absl::StrJoin(missing, ","),
            missing.size() > 1 ? " are" : " is",
            " not available (offline, or outside the launcher's cpuset "
            "cgroup; the launcher runs on CPUs ",
            absl::StrJoin(allowed, ","),
            "); fix: choose CPUs from those, or "
            "bring CPU ",
            missing.front(), " online (echo 1 > /sys/devices/system/cpu/cpu",
            missing.front(), "/online)"));
      }
      if (!actual.empty()) {
        applied->push_back(absl::StrCat(actual.size() > 1 ? "CPUs " : "CPU ",
                                        absl::StrJoin(actual, ",")));
      }
    }
  }
  // Also for SCHED_OTHER: a launcher started under chrt must not hand its
  // real-time policy to every node.
  const absl::Status sched =
      loop::SetThreadScheduling(spec.policy, spec.priority, pid);
  if (!sched.ok()) {
    problems.push_back(std::string(sched.message()));
  } else if (spec.policy != loop::SchedPolicy::kOther) {
    applied->push_back(
        absl::StrCat(loop::SchedPolicyName(spec.policy), " ", spec.priority));
  }
  if (spec.policy == loop::SchedPolicy::kOther) {
    errno = 0;
    const int current = ::getpriority(PRIO_PROCESS, static_cast<id_t>(pid));
    if (!(current == -1 && errno != 0) && current != spec.nice) {
      if (::setpriority(PRIO_PROCESS, static_cast<id_t>(pid), spec.nice) != 0) {
        const int err = errno;
        problems.push_back(absl::StrCat(
            "setting nice ", spec.nice, " failed: ", std::strerror(err),
            ". A nice value below the launcher's (", current,
            ") needs CAP_SYS_NICE or an RLIMIT_NICE allowing it; fix: run as "
            "root, or `<user> - nice ",
            spec.nice, "` in /etc/security/limits.conf"));
      } else {
        applied->push_back(absl::StrCat("nice ", spec.nice));
      }
    }
  }
  return problems;
}

struct Pipe {
  Fd read;
  Fd write;
};

absl::StatusOr<Pipe> MakePipe(const char* what) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("pipe for ", what, ": ", std::strerror(errno)));
  }
  return Pipe{Fd(fds[0]), Fd(fds[1])};
}

}  // namespace

std::string SignalName(int signal) {
  const char* abbrev = ::sigabbrev_np(signal);
  if (abbrev == nullptr) return absl::StrCat("signal ", signal);
  return absl::StrCat("SIG", abbrev);
}

absl::StatusOr<NodeProcess> SpawnNodeProcess(const NodeProcessSpec& spec) {
  // Everything the child touches is prepared here: it may not allocate.
  std::vector<char*> argv;
  for (const std::string& a : spec.argv)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const std::string& e : spec.env)
    envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  absl::StatusOr<Pipe> out = MakePipe("stdout");
  if (!out.ok()) return out.status();
  absl::StatusOr<Pipe> err = MakePipe("stderr");
  if (!err.ok()) return err.status();
  absl::StatusOr<Pipe> report = MakePipe("the start report");
  if (!report.ok()) return report.status();
  int go[2];
  // A socket, not a pipe: send(MSG_NOSIGNAL) to a child that died cannot
  // raise SIGPIPE in the launcher.
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, go) != 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("socketpair: ", std::strerror(errno)));
  }
  Fd go_parent(go[0]);
  Fd go_child(go[1]);
  Fd null_fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!null_fd.valid()) {
    return absl::InternalError(
        absl::StrCat("/dev/null: ", std::strerror(errno)));
  }

  ChildArgs args;
  args.parent = ::getpid();
  args.null_fd = null_fd.get();
  args.stdout_w = out->write.get();
  args.stderr_w = err->write.get();
  args.report_w = report->write.get();
  args.go_child = go_child.get();
  args.go_parent = go_parent.get();
  args.path = spec.path.c_str();
  args.argv = argv.data();
  args.envp = envp.data();
  args.working_directory = spec.working_directory.c_str();
  if (spec.user.has_value()) {
    args.switch_user = true;
    args.uid = spec.user->uid;
    args.gid = spec.user->gid;
    args.groups = spec.user->groups.data();
    args.group_count = spec.user->groups.size();
  }

  // Signals stay blocked across fork so no handler of the launcher runs in
  // the child; the child restores defaults before unblocking.
  sigset_t all;
  sigset_t previous;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &previous);
  const pid_t pid = ::fork();
  if (pid == 0) internal::RunChild(args);
  const int fork_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  if (pid < 0) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "node ", spec.name, ": fork failed: ", std::strerror(fork_errno)));
  }
  out->write.Reset();
  err->write.Reset();
  report->write.Reset();
  go_child.Reset();
  ::setpgid(pid, pid);  // Also done by the child; whichever runs first.

  auto abandon = [&](absl::Status status) {
    ::kill(pid, SIGKILL);
    ReapBlocking(pid);
    return status;
  };
  NodeProcess process;
  process.pid = pid;
  process.pidfd = Fd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  if (!process.pidfd.valid()) {
    return abandon(absl::FailedPreconditionError(absl::StrCat(
        "node ", spec.name, ": pidfd_open failed: ", std::strerror(errno),
        " (the launcher needs Linux >= 5.3)")));
  }

  std::vector<std::string> applied;
  const std::vector<std::string> problems = ApplyRealtime(spec, pid, &applied);
  if (!problems.empty()) {
    if (spec.realtime_required) {
      return abandon(absl::FailedPreconditionError(absl::StrCat(
          "node ", spec.name, ": its scheduling.realtime is \"required\" and ",
          absl::StrJoin(problems, "; also "),
          " (or set scheduling.realtime to \"bestEffort\" to run it "
          "anyway)")));
    }
    for (const std::string& p : problems) {
      process.warnings.push_back(
          absl::StrCat("node ", spec.name,
                       " runs without a setting (realtime is "
                       "bestEffort): ",
                       p));
    }
  }
  process.applied = absl::StrJoin(applied, ", ");

  const char go_byte = 'g';
  if (::send(go_parent.get(), &go_byte, 1, MSG_NOSIGNAL) != 1) {
    return abandon(absl::InternalError(absl::StrCat(
        "node ", spec.name,
        ": the child died before it could start: ", std::strerror(errno))));
  }
  go_parent.Reset();

  for (Fd* fd : {&out->read, &err->read, &report->read}) {
    ::fcntl(fd->get(), F_SETFL, ::fcntl(fd->get(), F_GETFL) | O_NONBLOCK);
  }
  process.stdout_fd = std::move(out->read);
  process.stderr_fd = std::move(err->read);
  process.start_report = std::move(report->read);
  return process;
}

StartOutcome ReadStartReport(const NodeProcessSpec& spec, Fd& start_report,
                             absl::Status* error) {
  if (!start_report.valid()) {
    *error = absl::FailedPreconditionError(
        absl::StrCat("node ", spec.name, ": start report already read"));
    return StartOutcome::kFailed;
  }
  // The child writes its report in one write of a few bytes (atomic on a
  // pipe) and only then exits: it is all there or not at all.
  ChildReport report;
  ssize_t n;
  do {
    n = ::read(start_report.get(), &report, sizeof(report));
  } while (n < 0 && errno == EINTR);
  if (n < 0 && errno == EAGAIN) return StartOutcome::kPending;
  start_report.Reset();
  if (n == 0) return StartOutcome::kExecuted;  // Close-on-exec: it ran.
  *error = n == static_cast<ssize_t>(sizeof(report))
               ? ChildFailure(spec, report)
               : absl::InternalError(absl::StrCat("node ", spec.name,
                                                  ": garbled start report"));
  return StartOutcome::kFailed;
}

absl::StatusOr<UserAccount> LookUpUser(const std::string& name) {
  long size = ::sysconf(_SC_GETPW_R_SIZE_MAX);
  std::vector<char> buffer(size > 0 ? static_cast<size_t>(size) : 16384);
  struct passwd pw;
  struct passwd* found = nullptr;
  int rc;
  while ((rc = ::getpwnam_r(name.c_str(), &pw, buffer.data(), buffer.size(),
                            &found)) == ERANGE) {
    buffer.resize(buffer.size() * 2);
  }
  if (rc != 0) {
    return absl::InternalError(
        absl::StrCat("looking up user ", name, ": ", std::strerror(rc)));
  }
  if (found == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("there is no user named \"", name,
                     "\" on this machine; create it (useradd --system ", name,
                     ") or fix the node's \"user\""));
  }
  UserAccount account;
  account.name = name;
  account.uid = pw.pw_uid;
  account.gid = pw.pw_gid;
  account.home = pw.pw_dir != nullptr ? pw.pw_dir : "/";
  int count = 32;
  std::vector<gid_t> groups(static_cast<size_t>(count));
  while (::getgrouplist(name.c_str(), pw.pw_gid, groups.data(), &count) < 0) {
    groups.resize(static_cast<size_t>(count) + 32);
    count = static_cast<int>(groups.size());
  }
  groups.resize(static_cast<size_t>(count));
  account.groups = std::move(groups);
  return account;
}

absl::StatusOr<std::string> ResolveCommand(const std::string& command,
                                           const std::string& working_directory,
                                           const std::string& path_variable) {
  namespace fs = std::filesystem;
  auto check = [](const fs::path& p) -> absl::Status {
    struct stat st;
    if (::stat(p.c_str(), &st) != 0) {
      return absl::NotFoundError(std::strerror(errno));
    }
    if (!S_ISREG(st.st_mode)) {
      return absl::FailedPreconditionError("not a regular file");
    }
    if (::access(p.c_str(), X_OK) != 0) {
      return absl::PermissionDeniedError(
          absl::StrCat("not executable (chmod +x ", p.string(), ")"));
    }
    return absl::OkStatus();
  };
  if (command.empty()) {
    return absl::InvalidArgumentError("the command is empty");
  }
  if (command.find('/') != std::string::npos) {
    fs::path p(command);
    if (p.is_relative()) p = fs::path(working_directory) / p;
    p = p.lexically_normal();
    const absl::Status s = check(p);
    if (s.ok()) return p.string();
    const std::string where =
        fs::path(command).is_relative()
            ? absl::StrCat(" (relative to the working directory ",
                           working_directory, ")")
            : "";
    std::string msg = absl::StrCat("command \"", command, "\": ", p.string(),
                                   where, ": ", s.message());
    if (absl::IsNotFound(s)) {
      absl::StrAppend(&msg, "; build it, or fix the path",
                      fs::path(command).is_relative()
                          ? " or the launcher's --workdir"
                          : "");
      return absl::NotFoundError(msg);
    }
    return absl::Status(s.code(), msg);
  }
  const std::string path =
      path_variable.empty() ? "/usr/local/bin:/usr/bin:/bin" : path_variable;
  for (absl::string_view dir : absl::StrSplit(path, ':')) {
    const fs::path base =
        dir.empty() ? fs::path(working_directory) : fs::path(std::string(dir));
    const fs::path candidate = base / command;
    if (check(candidate).ok()) return candidate.lexically_normal().string();
  }
  return absl::NotFoundError(absl::StrCat(
      "command \"", command, "\" is not in PATH (", path,
      "); install it, give its path, or set PATH in the node's env"));
}

}  // namespace tether::tools
