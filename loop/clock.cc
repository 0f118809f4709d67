#include "loop/clock.h"

#include <time.h>

#include "loop/check.h"

namespace tether::loop {

MonotonicTime MonotonicNow() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return MonotonicTime(Duration(int64_t{ts.tv_sec} * 1'000'000'000 +
                                ts.tv_nsec));
}

void VirtualClock::AdvanceTo(MonotonicTime t) {
  TETHER_LOOP_CHECK(t >= now_, "virtual time cannot run backwards");
  now_ = t;
}

}  // namespace tether::loop
