#include "loop/lost_wake_ticker.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>

#include <algorithm>
#include <mutex>
#include <thread>
#include <vector>

#include "loop/wake_port.h"

namespace tether::loop::internal {
namespace {

struct State {
  std::mutex mu;
  std::vector<LostWakeTicker::Target*> targets;  // guarded by mu
  bool running = false;                           // guarded by mu
};

// Never destroyed: the detached thread may outlive static destruction.
State& TheState() {
  static State* state = [] {
    State* s = new State;
    // The forking thread holds mu across fork(), so the child's copy is
    // consistent and owned by its only thread, which releases it.
    ::pthread_atfork([] { TheState().mu.lock(); },
                     [] { TheState().mu.unlock(); },
                     [] {
                       State& st = TheState();
                       st.targets.clear();
                       st.running = false;
                       st.mu.unlock();
                     });
    return s;
  }();
  return *state;
}

// Once started, ticks for the life of the process (with no targets left a
// tick costs one wakeup).
void Tick() {
  ::pthread_setname_np(::pthread_self(), "tether-tick");
  // Not the real-time policy of the thread that made the first port (a
  // node's loop thread, often SCHED_FIFO): a ticker must never preempt it.
  const sched_param other{.sched_priority = 0};
  ::pthread_setschedparam(::pthread_self(), SCHED_OTHER, &other);
  State& st = TheState();
  for (;;) {
    std::this_thread::sleep_for(kLostWakeCheck);
    std::lock_guard lock(st.mu);
    for (LostWakeTicker::Target* t : st.targets) t->Poke();
  }
}

// With every signal blocked, so that a process-directed signal never goes
// to it: a thread inherits its creator's mask, and an application that
// blocks SIGTERM for its signalfd after the ticker started would otherwise
// see SIGTERM taken by the ticker.
void StartThread() {
  sigset_t all, old;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  std::thread(Tick).detach();
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

}  // namespace

void LostWakeTicker::Register(Target* target) {
  State& st = TheState();
  std::lock_guard lock(st.mu);
  st.targets.push_back(target);
  if (!st.running) {
    st.running = true;
    StartThread();
  }
}

void LostWakeTicker::Unregister(Target* target) {
  State& st = TheState();
  std::lock_guard lock(st.mu);
  st.targets.erase(std::remove(st.targets.begin(), st.targets.end(), target),
                   st.targets.end());
}

}  // namespace tether::loop::internal
