#include "benchmarks/harness/supervisor.h"

#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "util/json_writer.h"

namespace tether::bench {
namespace {

struct Child {
  pid_t pid = -1;
  std::string role;
  bool running = false;
  int status = 0;
};

absl::Status Pin(int cpu) {
  if (cpu < 0) return absl::OkStatus();
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (::sched_setaffinity(0, sizeof(set), &set) != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "cannot pin to CPU %d (%s); this machine has %ld online", cpu,
        std::strerror(errno), ::sysconf(_SC_NPROCESSORS_ONLN)));
  }
  return absl::OkStatus();
}

std::string Describe(const Child& c) {
  if (WIFEXITED(c.status)) {
    return absl::StrCat(c.role, " exited with status ", WEXITSTATUS(c.status));
  }
  if (WIFSIGNALED(c.status)) {
    return absl::StrCat(c.role, " was killed by signal ", WTERMSIG(c.status),
                        " (", strsignal(WTERMSIG(c.status)), ")");
  }
  return c.role + " ended";
}

std::string Ints(const int64_t* v, int n) {
  std::string s = "[";
  for (int i = 0; i < n; ++i) {
    if (i) s += ',';
    absl::StrAppend(&s, v[i]);
  }
  s += ']';
  return s;
}

std::string SwitchesJson(const Switches& s) {
  return absl::StrCat("[", s.voluntary, ",", s.involuntary, "]");
}

std::string Prefix(const Session& s) {
  return absl::StrCat("{\"system\":", util::JsonQuote(s.name),
                      ",\"variant\":", util::JsonQuote(s.variant),
                      ",\"spin_us\":", s.spin_us,
                      ",\"test\":", util::JsonQuote(TestName(s.test)),
                      ",\"ping_cpu\":", s.ping_cpu,
                      ",\"pong_cpu\":", s.pong_cpu, ",\"pongs\":", s.pongs);
}

void PrintResults(const Session& s, Board* board, bool ok,
                  const std::string& error, FILE* out) {
  const std::string prefix = Prefix(s);
  const std::string info = util::JsonQuote(board->info);
  if (s.test == Test::kThroughput) {
    std::string line = prefix;
    absl::StrAppend(&line, ",\"payload\":", s.throughput_payload,
                    ",\"queue\":", board->queue_depth, ",\"info\":", info,
                    ",\"phases\":[");
    double best = 0;
    for (int p = 0; p < board->phase_count; ++p) {
      const PhaseResult& r = board->phases[p];
      if (r.ok) best = std::max(best, r.achieved_rate);
      absl::StrAppendFormat(
          &line,
          "%s{\"rate\":%.0f,\"achieved\":%.0f,\"sent\":%d,\"received\":%d,"
          "\"lost\":%d,\"send_failures\":%d,\"ok\":%s,\"retry\":%s,"
          "\"publisher\":%s,\"subscriber\":%s}",
          p ? "," : "", r.target_rate, r.achieved_rate, r.sent, r.received,
          r.lost, r.send_failures, r.ok ? "true" : "false",
          r.retry ? "true" : "false",
          SwitchesJson(r.publisher), SwitchesJson(r.subscriber));
    }
    absl::StrAppendFormat(&line, "],\"max_rate\":%.0f,\"ok\":%s}\n", best,
                          ok && board->phase_count > 0 ? "true" : "false");
    std::fputs(line.c_str(), out);
  } else {
    for (size_t c = 0; c < s.cases.size(); ++c) {
      CaseResult& r = board->cases[c];
      if (r.done.load(std::memory_order_acquire) == 0) continue;
      const Case& k = s.cases[c];
      std::string line = prefix;
      absl::StrAppend(&line, ",\"case\":", c, ",\"payload\":", k.payload,
                      ",\"mode\":", util::JsonQuote(WriteModeName(k.mode)),
                      ",\"warmup\":", k.warmup, ",\"samples\":", r.samples,
                      ",\"info\":", info, ",\"ok\":true");
      absl::StrAppend(&line, ",\"switches\":{\"ping\":", SwitchesJson(r.ping),
                      ",\"pong\":[");
      for (int i = 0; i < s.pongs; ++i) {
        absl::StrAppend(&line, i ? "," : "", SwitchesJson(r.pong[i]));
      }
      absl::StrAppend(&line, "]},\"rtt_ns\":", Ints(board->rtt(c), r.samples));
      if (s.test == Test::kFanout) {
        absl::StrAppend(&line, ",\"oneway_ns\":",
                        Ints(board->oneway(c), r.samples), ",\"send_ns\":",
                        Ints(board->send_cost(c), r.samples));
      }
      line += "}\n";
      std::fputs(line.c_str(), out);
    }
  }
  if (!ok) {
    std::fputs((Prefix(s) +
                ",\"ok\":false,\"error\":" + util::JsonQuote(error) + "}\n")
                   .c_str(),
               out);
  }
  std::fflush(out);
}

[[noreturn]] void RunChild(const sigset_t& old_mask, pid_t parent, int cpu,
                           const std::string& role, Board* board,
                           absl::AnyInvocable<absl::Status()> body) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(1);
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
  ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  absl::Status s = Pin(cpu);
  if (s.ok()) s = body();
  if (!s.ok()) {
    board->Fail(absl::StrCat(role, ": ", s.message()));
    std::fflush(nullptr);
    ::_exit(1);
  }
  std::fflush(nullptr);
  std::exit(0);
}

void KillAll(std::vector<Child>& children) {
  for (Child& c : children) {
    if (c.running) ::kill(c.pid, SIGKILL);
  }
  for (Child& c : children) {
    if (c.running) {
      ::waitpid(c.pid, &c.status, 0);
      c.running = false;
    }
  }
}

// Reaps exited children; returns the first that failed, or -1.
int Reap(std::vector<Child>& children) {
  int failed = -1;
  for (size_t i = 0; i < children.size(); ++i) {
    Child& c = children[i];
    if (!c.running) continue;
    if (::waitpid(c.pid, &c.status, WNOHANG) == c.pid) {
      c.running = false;
      const bool clean = WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0;
      if (!clean && failed < 0) failed = static_cast<int>(i);
    }
  }
  return failed;
}

}  // namespace

void MarkPongReady(Board* board) {
  board->pongs_ready.fetch_add(1, std::memory_order_acq_rel);
}

absl::Status WaitUntil(absl::FunctionRef<bool()> ready,
                       std::chrono::milliseconds timeout,
                       const std::string& what) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!ready()) {
    if (std::chrono::steady_clock::now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "timed out after ", timeout.count(), " ms waiting for ", what));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return absl::OkStatus();
}

absl::Status WaitForPongs(Board* board, int pongs,
                          std::chrono::milliseconds timeout) {
  return WaitUntil(
      [&] {
        return board->pongs_ready.load(std::memory_order_acquire) >= pongs ||
               board->failed.load() != 0;
      },
      timeout, absl::StrCat(pongs, " subscriber(s) to connect"));
}

int RunnerMain(int argc, char** argv, const std::string& system,
               absl::FunctionRef<Roles(const Session&)> make_roles) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(UsageText(system).c_str(), stdout);
      return 0;
    }
  }
  absl::StatusOr<Session> parsed = ParseSession(argc, argv);
  if (!parsed.ok()) {
    std::fprintf(stderr, "%s: %s\n", system.c_str(),
                 std::string(parsed.status().message()).c_str());
    return 2;
  }
  Session session = std::move(*parsed);
  if (session.name == argv[0]) session.name = system;
  session.run_id = static_cast<int>(::getpid());
  // Results go to the original stdout (a pipe the driver reads, also
  // across mount namespaces); whatever the libraries print goes to stderr.
  FILE* out = nullptr;
  if (session.out.empty()) {
    const int fd = ::dup(STDOUT_FILENO);
    if (fd >= 0) out = ::fdopen(fd, "w");
    if (out == nullptr) {
      std::fprintf(stderr, "%s: cannot duplicate stdout\n", system.c_str());
      return 2;
    }
    std::fflush(stdout);
    ::dup2(STDERR_FILENO, STDOUT_FILENO);
  } else {
    out = std::fopen(session.out.c_str(), "a");
    if (out == nullptr) {
      std::fprintf(stderr, "%s: cannot open --out=%s: %s\n", system.c_str(),
                   session.out.c_str(), std::strerror(errno));
      return 2;
    }
  }
  absl::StatusOr<Board*> board_or = MapBoard(session);
  if (!board_or.ok()) {
    std::fprintf(stderr, "%s: %s\n", system.c_str(),
                 std::string(board_or.status().message()).c_str());
    return 1;
  }
  Board* board = *board_or;
  Roles roles = make_roles(session);

  // Signals are taken synchronously (sigtimedwait) so the supervisor sleeps
  // until something happens; children get the old mask back.
  // A shell may have started us with SIGINT ignored (a background job);
  // an ignored signal is discarded before sigtimedwait() could take it.
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
  ::signal(SIGHUP, SIG_DFL);
  sigset_t wait_set, old_mask;
  sigemptyset(&wait_set);
  sigaddset(&wait_set, SIGCHLD);
  sigaddset(&wait_set, SIGINT);
  sigaddset(&wait_set, SIGTERM);
  sigaddset(&wait_set, SIGHUP);
  ::sigprocmask(SIG_BLOCK, &wait_set, &old_mask);

  std::string error;
  bool interrupted = false;
  std::vector<Child> children;
  if (roles.prepare) {
    if (absl::Status s = roles.prepare(); !s.ok()) {
      error = absl::StrCat("setup: ", s.message());
    }
  }
  const pid_t self = ::getpid();
  auto spawn = [&](const std::string& role, int cpu,
                   absl::AnyInvocable<absl::Status()> body) {
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) RunChild(old_mask, self, cpu, role, board, std::move(body));
    if (pid < 0) {
      error = absl::StrCat("fork: ", std::strerror(errno));
      return;
    }
    children.push_back(Child{pid, role, true, 0});
  };
  if (error.empty()) {
    for (int i = 0; i < session.pongs && error.empty(); ++i) {
      spawn(session.pongs > 1 ? absl::StrCat("subscriber ", i) : "pong",
            session.pong_cpu, [&, i] { return roles.pong(board, i); });
    }
    if (error.empty()) {
      spawn("ping", session.ping_cpu, [&] { return roles.ping(board); });
    }
  }

  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::seconds(session.timeout_s);
  std::optional<std::chrono::steady_clock::time_point> ping_done_at;
  // Once rounds complete, a session whose progress stops for this long is
  // hung (a lost message or wakeup): say so instead of waiting for the
  // timeout. Checked once a second.
  constexpr auto kStall = std::chrono::seconds(30);
  uint64_t last_progress = 0;
  auto progress_at = std::chrono::steady_clock::now();
  while (error.empty()) {
    const int failed = Reap(children);
    if (failed >= 0) {
      error = board->failed.load() ? std::string(board->error)
                                   : Describe(children[failed]);
      break;
    }
    bool any = false;
    for (const Child& c : children) any |= c.running;
    if (!any) break;
    const auto now = std::chrono::steady_clock::now();
    if (!children.back().running && !ping_done_at.has_value()) {
      ping_done_at = now;  // the pongers have a few seconds to follow
    }
    if (now > deadline) {
      error = absl::StrCat("timed out after ", session.timeout_s, " s");
      break;
    }
    const uint64_t progress = board->progress.load(std::memory_order_relaxed);
    if (progress != last_progress) {
      last_progress = progress;
      progress_at = now;
    } else if (progress > 0 && now - progress_at > kStall) {
      error = absl::StrCat(
          "hung: no round trip completed for ", kStall.count(), " s after ",
          progress, " (a lost message or a lost wakeup)");
      break;
    }
    auto wake = std::min(deadline, now + std::chrono::seconds(1));
    if (ping_done_at.has_value()) {
      if (now > *ping_done_at + std::chrono::seconds(5)) {
        error = "a ponger did not exit within 5 s of the pinger";
        break;
      }
      wake = std::min(wake, *ping_done_at + std::chrono::seconds(5));
    }
    const auto left_ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(wake - now)
            .count();
    timespec ts{static_cast<time_t>(left_ns / 1000000000),
                static_cast<long>(left_ns % 1000000000)};
    siginfo_t info;
    const int sig = ::sigtimedwait(&wait_set, &info, &ts);
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
      error = absl::StrCat("interrupted by signal ", sig);
      interrupted = true;
      break;
    }
  }
  KillAll(children);
  if (roles.cleanup) roles.cleanup();
  if (error.empty() && board->failed.load()) error = board->error;
  PrintResults(session, board, error.empty(), error, out);
  std::fclose(out);
  if (interrupted) return 130;
  return error.empty() ? 0 : 1;
}

int PingPongMain(int argc, char** argv, const std::string& system,
                 SessionFn ping, IndexedFn pong, SessionFn publisher,
                 SessionFn subscriber) {
  return RunnerMain(argc, argv, system, [&](const Session& s) {
    Roles roles;
    if (s.test == Test::kThroughput) {
      roles.ping = [&s, publisher](Board* b) { return publisher(s, b); };
      roles.pong = [&s, subscriber](Board* b, int) { return subscriber(s, b); };
    } else {
      roles.ping = [&s, ping](Board* b) { return ping(s, b); };
      roles.pong = [&s, pong](Board* b, int i) { return pong(s, b, i); };
    }
    return roles;
  });
}

}  // namespace tether::bench
