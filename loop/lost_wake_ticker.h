// loop: the lost-wake check (wake_port.h) for ports that cannot keep a
// timer of their own for free. futex_waitv sleeps in one syscall, and a
// timeout on every sleep arms an hrtimer per sleep: measured 1.09x on the
// one-CPU ping-pong (docs/performance-history.md). So one thread per
// process, started by the first Register(), pokes every registered target
// every kLostWakeCheck, and a sleep costs nothing more.
//
// Contract:
// - Register()/Unregister(): any thread; not RT-safe (a mutex; Register
//   allocates and may start the thread). A target is never poked after
//   Unregister() returns: the thread pokes under the same mutex.
// - Poke() runs on the ticker thread, under that mutex: it must not block,
//   allocate or call Register()/Unregister().
// - The ticker thread ("tether-tick") is SCHED_OTHER whatever made it,
//   blocks every signal, has a 64 KiB stack (what mlockall locks of it;
//   more if the executable's static thread-local storage needs it) and
//   takes no lock a loop thread takes in Wait(), so a real-time loop never
//   waits for it. It keeps its maker's CPU affinity: on a CPU given to a
//   SCHED_FIFO loop it runs when that loop sleeps, and a Register() there
//   may wait for the poke it preempted (setup path, not RT-safe anyway).
//   If it cannot be made, Register() says so in one line on stderr and
//   the targets go unpoked (the next Register() tries again).
// - fork(): the child starts with no targets and no thread (an atfork
//   handler; the parent's ports are not usable there anyway); its first
//   Register() starts its own thread.
#ifndef TETHER_LOOP_LOST_WAKE_TICKER_H_
#define TETHER_LOOP_LOST_WAKE_TICKER_H_

namespace tether::loop::internal {

class LostWakeTicker {
 public:
  class Target {
   public:
    // Ticker thread, every kLostWakeCheck. See the contract above.
    virtual void Poke() = 0;

   protected:
    ~Target() = default;
  };

  static void Register(Target* target);
  static void Unregister(Target* target);
};

}  // namespace tether::loop::internal

#endif  // TETHER_LOOP_LOST_WAKE_TICKER_H_
