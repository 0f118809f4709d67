// loop: clean shutdown on SIGINT/SIGTERM. main() installs StopSignals once;
// every loop watches its futex word (or its fd) and ends its run when the
// first stop signal arrives.
//
// Mechanism: a self-pipe (an eventfd). The handler writes to it and nobody
// reads it, so it stays readable and every loop of the process sees the
// stop. Not signalfd: a signalfd only receives signals that are blocked in
// *every* thread (a library cannot promise that for threads it does not
// create; an unblocked thread would get the default action and kill the
// process), and reading it consumes the signal for one reader only.
//
// Process-wide by nature (signal dispositions are): at most one StopSignals
// exists at a time; its handler reaches it through one atomic global.
#ifndef TETHER_LOOP_SIGNALS_H_
#define TETHER_LOOP_SIGNALS_H_

#include <signal.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tether::loop {

struct StopSignalOptions {
  std::vector<int> signals = {SIGINT, SIGTERM};
  // A second signal while the first stop is under way gets the signal's
  // default action (the process dies): a hung shutdown still yields to a
  // second Ctrl-C.
  bool second_signal_kills = true;
  // Written to stderr by the handler just before such a second signal kills
  // the process (e.g. what that left unfinished and how to repair it; end
  // it with a newline). Empty: nothing.
  std::string second_signal_note;
};

class StopSignals {
 public:
  // Installs handlers (sigaction, SA_RESTART) for options.signals.
  // FailedPrecondition when another StopSignals is alive; InvalidArgument for
  // a signal that cannot be caught. Any thread; not RT-safe; setup.
  static absl::StatusOr<std::unique_ptr<StopSignals>> Install(
      const StopSignalOptions& options = {});

  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  // Restores the previous handlers and closes the fd. Loops must have
  // stopped watching fd() first.
  ~StopSignals();

  // Readable once a stop signal arrived, and from then on. Any thread.
  int fd() const { return fd_; }
  // A 32-bit futex word the handler bumps (and FUTEX_WAKEs) at the first
  // stop signal: what loops wait on (every wake port can wait on a word,
  // not every one on an fd). Any thread.
  const std::atomic<uint32_t>* word() const;
  // The first stop signal received, or 0. Any thread; RT-safe.
  int received() const;
  bool stop_requested() const { return received() != 0; }

 private:
  StopSignals(int fd, std::vector<int> signals,
              std::vector<struct sigaction> previous,
              std::unique_ptr<std::string> note)
      : fd_(fd),
        signals_(std::move(signals)),
        previous_(std::move(previous)),
        note_(std::move(note)) {}

  const int fd_;
  const std::vector<int> signals_;
  const std::vector<struct sigaction> previous_;
  // The handler reads it (through a global) while this object lives.
  const std::unique_ptr<std::string> note_;
};

}  // namespace tether::loop

#endif  // TETHER_LOOP_SIGNALS_H_
