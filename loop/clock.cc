#include "loop/clock.h"

#include "loop/check.h"
#include "shm/clock.h"
#include "util/hot_path.h"

namespace tether::loop {

TETHER_HOT_PATH MonotonicTime MonotonicNow() {
  return FromMonotonicNs(shm::MonotonicNs());
}

TETHER_HOT_PATH int64_t RealtimeNowNs() {
  return static_cast<int64_t>(shm::RealtimeNs());
}

void VirtualClock::AdvanceTo(MonotonicTime t) {
  TETHER_LOOP_CHECK(t >= now_, "virtual time cannot run backwards");
  now_ = t;
}

}  // namespace tether::loop
