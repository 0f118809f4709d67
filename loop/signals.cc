#include "loop/signals.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "shm/futex.h"
#include "util/hot_path.h"

namespace tether::loop {
namespace {

// The one process-wide state a signal handler can reach.
std::atomic<int> g_fd{-1};
// Bumped and FUTEX_WAKEd by the handler: loops whose port waits on futex
// words only (futex_waitv) stop through it.
std::atomic<uint32_t> g_word{0};
std::atomic<int> g_received{0};
std::atomic<bool> g_second_kills{true};
std::atomic<bool> g_installed{false};
// The second-signal note (owned by the StopSignals), or null.
std::atomic<const std::string*> g_note{nullptr};

static_assert(std::atomic<int>::is_always_lock_free);

void OnStopSignal(int sig) {
  const int saved_errno = errno;
  int expected = 0;
  if (!g_received.compare_exchange_strong(expected, sig)) {
    if (g_second_kills.load()) {
      if (const std::string* note = g_note.load(); note != nullptr) {
        (void)!::write(STDERR_FILENO, note->data(), note->size());
      }
      ::signal(sig, SIG_DFL);
      ::raise(sig);
    }
    errno = saved_errno;
    return;
  }
  const uint64_t one = 1;
  const int fd = g_fd.load();
  if (fd >= 0) (void)!::write(fd, &one, sizeof(one));
  g_word.fetch_add(1, std::memory_order_seq_cst);
  (void)shm::FutexWake(&g_word);
  errno = saved_errno;
}

}  // namespace

absl::StatusOr<std::unique_ptr<StopSignals>> StopSignals::Install(
    const StopSignalOptions& options) {
  bool expected = false;
  if (!g_installed.compare_exchange_strong(expected, true)) {
    return absl::FailedPreconditionError(
        "StopSignals is already installed in this process (one at a time: "
        "main() installs it and hands fd() to every loop)");
  }
  const int fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd < 0) {
    g_installed.store(false);
    return absl::ResourceExhaustedError(
        absl::StrCat("eventfd for stop signals: ", std::strerror(errno)));
  }
  g_received.store(0);
  g_second_kills.store(options.second_signal_kills);
  g_fd.store(fd);
  std::vector<struct sigaction> previous;
  for (int sig : options.signals) {
    struct sigaction action;
    std::memset(&action, 0, sizeof(action));
    action.sa_handler = &OnStopSignal;
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    struct sigaction old;
    if (::sigaction(sig, &action, &old) != 0) {
      const int err = errno;
      for (size_t i = 0; i < previous.size(); ++i) {
        ::sigaction(options.signals[i], &previous[i], nullptr);
      }
      g_fd.store(-1);
      ::close(fd);
      g_installed.store(false);
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot handle signal ", sig, ": ", std::strerror(err)));
    }
    previous.push_back(old);
  }
  std::unique_ptr<std::string> note;
  if (!options.second_signal_note.empty()) {
    note = std::make_unique<std::string>(options.second_signal_note);
    g_note.store(note.get());
  }
  return std::unique_ptr<StopSignals>(new StopSignals(
      fd, options.signals, std::move(previous), std::move(note)));
}

StopSignals::~StopSignals() {
  for (size_t i = 0; i < signals_.size(); ++i) {
    ::sigaction(signals_[i], &previous_[i], nullptr);
  }
  g_note.store(nullptr);
  g_fd.store(-1);
  ::close(fd_);
  g_installed.store(false);
}

TETHER_HOT_PATH int StopSignals::received() const { return g_received.load(); }

const std::atomic<uint32_t>* StopSignals::word() const { return &g_word; }

}  // namespace tether::loop
