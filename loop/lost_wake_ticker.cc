#include "loop/lost_wake_ticker.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
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
void* Tick(void*) {
  ::pthread_setname_np(::pthread_self(), "tether-tick");
  State& st = TheState();
  for (;;) {
    std::this_thread::sleep_for(kLostWakeCheck);
    std::lock_guard lock(st.mu);
    for (LostWakeTicker::Target* t : st.targets) t->Poke();
  }
  return nullptr;
}

// pthread_create's result for a ticker with a `stack`-byte stack.
int StartThread(size_t stack) {
  pthread_attr_t attr;
  ::pthread_attr_init(&attr);
  ::pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  ::pthread_attr_setstacksize(&attr, stack);
  ::pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED);
  ::pthread_attr_setschedpolicy(&attr, SCHED_OTHER);
  const sched_param other{.sched_priority = 0};
  ::pthread_attr_setschedparam(&attr, &other);
  sigset_t all;
  ::sigfillset(&all);
  ::pthread_attr_setsigmask_np(&attr, &all);
  pthread_t thread;
  const int rc = ::pthread_create(&thread, &attr, Tick, nullptr);
  ::pthread_attr_destroy(&attr);
  return rc;
}

// Made to disturb nobody:
// - SCHED_OTHER, explicitly: a thread inherits its maker's policy, and the
//   first port is often made by a SCHED_FIFO loop thread, which a ticker
//   must never preempt;
// - a small stack: a real-time node has called mlockall(MCL_FUTURE), so
//   the default 8 MiB stack would be locked whole (or refused under
//   RLIMIT_MEMLOCK). 64 KiB, or more when glibc refuses it (EINVAL): the
//   executable's static thread-local storage is carved out of the stack,
//   and an application may have more of it than 64 KiB leaves room for;
// - every signal blocked: a thread inherits its maker's mask, and an
//   application that blocks SIGTERM for its signalfd after the ticker
//   started would otherwise see SIGTERM taken by the ticker.
// False (and errno) when the thread could not be made.
bool StartThread() {
  int rc = EINVAL;
  for (size_t stack = 64 * 1024; rc == EINVAL && stack <= 16 * 1024 * 1024;
       stack *= 2) {
    rc = StartThread(stack);
  }
  errno = rc;
  return rc == 0;
}

}  // namespace

void LostWakeTicker::Register(Target* target) {
  State& st = TheState();
  std::lock_guard lock(st.mu);
  st.targets.push_back(target);
  if (!st.running) {
    st.running = StartThread();
    if (!st.running) {
      // Setup path: said once per try; the port works, unchecked.
      std::fprintf(stderr,
                   "tether: could not start the lost-wake check thread (%s): "
                   "a wake that never comes is not caught in this process\n",
                   std::strerror(errno));
    }
  }
}

void LostWakeTicker::Unregister(Target* target) {
  State& st = TheState();
  std::lock_guard lock(st.mu);
  st.targets.erase(std::remove(st.targets.begin(), st.targets.end(), target),
                   st.targets.end());
}

}  // namespace tether::loop::internal
