// benchmarks: runs one bench session as processes. The runner's main()
// hands RunnerMain() the roles of its system; the supervisor (the runner
// process itself) maps the shared Board, prepares (e.g. creates channels),
// forks the pongers and the pinger, each pinned to its CPU and killed if the
// supervisor dies (PR_SET_PDEATHSIG), waits for them with a timeout while
// asleep (no polling that would disturb the measurement), kills them all by
// pid on failure, timeout, SIGINT or SIGTERM, cleans up, and prints what the
// children left in the board as JSON lines (one per case, or one for a
// throughput test, then {"ok": false, "error": ...} if something failed).
#ifndef TETHER_BENCHMARKS_HARNESS_SUPERVISOR_H_
#define TETHER_BENCHMARKS_HARNESS_SUPERVISOR_H_

#include <chrono>
#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "benchmarks/harness/protocol.h"
#include "benchmarks/harness/session.h"

namespace tether::bench {

struct Roles {
  // In the supervisor before any fork (create channels, files); optional.
  absl::AnyInvocable<absl::Status()> prepare;
  // In a forked child pinned to ping_cpu / pong_cpu. An error fails the
  // session (its message ends up in the results).
  absl::AnyInvocable<absl::Status(Board*)> ping;
  absl::AnyInvocable<absl::Status(Board*, int index)> pong;
  // In the supervisor once every child is gone, also after a failure or a
  // signal; optional.
  absl::AnyInvocable<void()> cleanup;
};

// Parses the flags (--help prints UsageText), builds the roles with
// `make_roles` and runs the session. Returns main()'s exit code: 0 when every
// case completed, 1 on a failure (reported in the results), 2 on bad flags,
// 130 after SIGINT/SIGTERM.
int RunnerMain(int argc, char** argv, const std::string& system,
               absl::FunctionRef<Roles(const Session&)> make_roles);

// The usual main() of a runner whose roles need only the session: ping and
// pong for latency and fanout, publisher and subscriber for throughput.
using SessionFn = absl::Status (*)(const Session&, Board*);
using IndexedFn = absl::Status (*)(const Session&, Board*, int index);
int PingPongMain(int argc, char** argv, const std::string& system,
                 SessionFn ping, IndexedFn pong, SessionFn publisher,
                 SessionFn subscriber);

// For the roles: a ponger says it can receive (its subscription exists and
// its reply path is connected); the pinger waits for all of them.
void MarkPongReady(Board* board);
absl::Status WaitForPongs(Board* board, int pongs,
                          std::chrono::milliseconds timeout);
// Polls `ready` every millisecond until it is true or `timeout` passes
// (DeadlineExceeded naming `what`). For setup handshakes only.
absl::Status WaitUntil(absl::FunctionRef<bool()> ready,
                       std::chrono::milliseconds timeout,
                       const std::string& what);

}  // namespace tether::bench

#endif  // TETHER_BENCHMARKS_HARNESS_SUPERVISOR_H_
