#include "loop/dispatch.h"

#include <utility>

#include "loop/check.h"
#include "util/hot_path.h"

namespace tether::loop {
namespace {

// floor(a / b) for b > 0.
int64_t FloorDiv(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

Duration NormalizeOffset(Duration offset, Duration period) {
  int64_t o = offset.count() % period.count();
  if (o < 0) o += period.count();
  return Duration(o);
}

}  // namespace

Dispatcher::Dispatcher(const Clock* clock) : clock_(clock) {
  TETHER_LOOP_CHECK(clock != nullptr, "a Dispatcher needs a clock");
}

Dispatcher::~Dispatcher() = default;

Dispatcher::Event& Dispatcher::At(uint32_t index) {
  TETHER_LOOP_CHECK(index < events_.size(), "unknown event id");
  return events_[index];
}

const Dispatcher::Event& Dispatcher::At(uint32_t index) const {
  TETHER_LOOP_CHECK(index < events_.size(), "unknown event id");
  return events_[index];
}

uint32_t Dispatcher::NewEvent(Kind kind) {
  TETHER_LOOP_CHECK(events_.size() < (uint32_t{1} << 31), "too many events");
  events_.emplace_back();
  events_.back().kind = kind;
  // Every event can be in the heap at once: firing never grows it.
  heap_.reserve(events_.size());
  return static_cast<uint32_t>(events_.size() - 1);
}

EventId Dispatcher::AddEvent(absl::AnyInvocable<void()> fn) {
  TETHER_LOOP_CHECK(fn != nullptr, "an event needs a callback");
  const uint32_t index = NewEvent(Kind::kPlain);
  events_[index].fn = std::move(fn);
  return EventId{index};
}

void Dispatcher::Schedule(EventId event, MonotonicTime when) {
  const uint32_t index = static_cast<uint32_t>(event);
  TETHER_LOOP_CHECK(At(index).kind == Kind::kPlain, "not a plain event");
  ScheduleIndex(index, when);
}

void Dispatcher::Cancel(EventId event) {
  const uint32_t index = static_cast<uint32_t>(event);
  TETHER_LOOP_CHECK(At(index).kind == Kind::kPlain, "not a plain event");
  CancelIndex(index);
}

std::optional<MonotonicTime> Dispatcher::ScheduledTime(EventId event) const {
  const Event& e = At(static_cast<uint32_t>(event));
  if (e.heap_index < 0) return std::nullopt;
  return e.when;
}

TimerId Dispatcher::AddTimer(absl::AnyInvocable<void()> fn) {
  TETHER_LOOP_CHECK(fn != nullptr, "a timer needs a callback");
  const uint32_t index = NewEvent(Kind::kTimer);
  events_[index].fn = std::move(fn);
  return TimerId{index};
}

void Dispatcher::ScheduleTimer(TimerId timer, MonotonicTime base,
                               Duration period) {
  const uint32_t index = static_cast<uint32_t>(timer);
  Event& e = At(index);
  TETHER_LOOP_CHECK(e.kind == Kind::kTimer, "not a timer");
  TETHER_LOOP_CHECK(period >= Duration::zero(), "negative timer period");
  e.period = period;
  ScheduleIndex(index, base);
}

void Dispatcher::DisableTimer(TimerId timer) {
  const uint32_t index = static_cast<uint32_t>(timer);
  TETHER_LOOP_CHECK(At(index).kind == Kind::kTimer, "not a timer");
  CancelIndex(index);
}

RunStats Dispatcher::timer_stats(TimerId timer) const {
  const Event& e = At(static_cast<uint32_t>(timer));
  TETHER_LOOP_CHECK(e.kind == Kind::kTimer, "not a timer");
  return e.stats;
}

MonotonicTime Dispatcher::NextPhasePoint(const Event& e, MonotonicTime t) {
  const int64_t p = e.period.count();
  const int64_t since = t.time_since_epoch().count() - e.offset.count();
  const int64_t k = FloorDiv(since, p) + 1;
  return MonotonicTime(Duration(e.offset.count() + k * p));
}

PhasedLoopId Dispatcher::AddPhasedLoop(absl::AnyInvocable<void(int)> fn,
                                       Duration period, Duration offset) {
  TETHER_LOOP_CHECK(fn != nullptr, "a phased loop needs a callback");
  TETHER_LOOP_CHECK(period > Duration::zero(),
                    "a phased loop needs a positive period");
  const uint32_t index = NewEvent(Kind::kPhased);
  Event& e = events_[index];
  e.phased_fn = std::move(fn);
  e.period = period;
  e.offset = NormalizeOffset(offset, period);
  ScheduleIndex(index, NextPhasePoint(e, clock_->Now()));
  return PhasedLoopId{index};
}

void Dispatcher::ResetPhasedLoop(PhasedLoopId loop, Duration period,
                                 Duration offset) {
  const uint32_t index = static_cast<uint32_t>(loop);
  Event& e = At(index);
  TETHER_LOOP_CHECK(e.kind == Kind::kPhased, "not a phased loop");
  TETHER_LOOP_CHECK(period > Duration::zero(),
                    "a phased loop needs a positive period");
  e.period = period;
  e.offset = NormalizeOffset(offset, period);
  ScheduleIndex(index, NextPhasePoint(e, clock_->Now()));
}

void Dispatcher::DisablePhasedLoop(PhasedLoopId loop) {
  const uint32_t index = static_cast<uint32_t>(loop);
  TETHER_LOOP_CHECK(At(index).kind == Kind::kPhased, "not a phased loop");
  CancelIndex(index);
}

void Dispatcher::EnablePhasedLoop(PhasedLoopId loop) {
  const uint32_t index = static_cast<uint32_t>(loop);
  Event& e = At(index);
  TETHER_LOOP_CHECK(e.kind == Kind::kPhased, "not a phased loop");
  ScheduleIndex(index, NextPhasePoint(e, clock_->Now()));
}

RunStats Dispatcher::phased_loop_stats(PhasedLoopId loop) const {
  const Event& e = At(static_cast<uint32_t>(loop));
  TETHER_LOOP_CHECK(e.kind == Kind::kPhased, "not a phased loop");
  return e.stats;
}

TETHER_HOT_PATH std::optional<MonotonicTime> Dispatcher::NextDeadline() const {
  if (heap_.empty()) return std::nullopt;
  return events_[heap_.front()].when;
}

TETHER_HOT_PATH int Dispatcher::RunDue(MonotonicTime now) {
  // Tickets taken from here on belong to the next call.
  const uint64_t first_later_ticket = next_ticket_;
  int ran = 0;
  while (!heap_.empty()) {
    const uint32_t index = heap_.front();
    Event& e = events_[index];
    if (e.when > now || e.ticket >= first_later_ticket) break;
    RemoveAt(0);
    ++ran;
    switch (e.kind) {
      case Kind::kPlain:
        e.fn();
        break;
      case Kind::kTimer: {
        if (e.period > Duration::zero()) {
          const int64_t late = (now - e.when) / e.period;  // whole periods
          e.stats.missed += static_cast<uint64_t>(late);
          ScheduleIndex(index, e.when + (late + 1) * e.period);
        }
        ++e.stats.runs;
        e.fn();
        break;
      }
      case Kind::kPhased: {
        // Phase points e.when, e.when + p, ... <= now all passed.
        const int64_t passed = (now - e.when) / e.period + 1;
        e.stats.missed += static_cast<uint64_t>(passed - 1);
        ++e.stats.runs;
        ScheduleIndex(index, e.when + passed * e.period);
        const int cycles =
            passed > INT32_MAX ? INT32_MAX : static_cast<int>(passed);
        e.phased_fn(cycles);
        break;
      }
    }
  }
  return ran;
}

// --- the heap -------------------------------------------------------------------

bool Dispatcher::Before(uint32_t a, uint32_t b) const {
  const Event& x = events_[a];
  const Event& y = events_[b];
  if (x.when != y.when) return x.when < y.when;
  return x.ticket < y.ticket;
}

void Dispatcher::Place(size_t pos, uint32_t index) {
  heap_[pos] = index;
  events_[index].heap_index = static_cast<int32_t>(pos);
}

void Dispatcher::SiftUp(size_t pos) {
  const uint32_t index = heap_[pos];
  while (pos > 0) {
    const size_t parent = (pos - 1) / 2;
    if (!Before(index, heap_[parent])) break;
    Place(pos, heap_[parent]);
    pos = parent;
  }
  Place(pos, index);
}

void Dispatcher::SiftDown(size_t pos) {
  const uint32_t index = heap_[pos];
  const size_t n = heap_.size();
  for (;;) {
    size_t child = 2 * pos + 1;
    if (child >= n) break;
    if (child + 1 < n && Before(heap_[child + 1], heap_[child])) ++child;
    if (!Before(heap_[child], index)) break;
    Place(pos, heap_[child]);
    pos = child;
  }
  Place(pos, index);
}

void Dispatcher::RemoveAt(size_t pos) {
  const uint32_t removed = heap_[pos];
  const uint32_t last = heap_.back();
  heap_.pop_back();
  events_[removed].heap_index = -1;
  if (pos == heap_.size()) return;
  Place(pos, last);
  SiftDown(pos);
  SiftUp(static_cast<size_t>(events_[last].heap_index));
}

void Dispatcher::ScheduleIndex(uint32_t index, MonotonicTime when) {
  Event& e = events_[index];
  e.when = when;
  e.ticket = next_ticket_++;
  if (e.heap_index >= 0) {
    // Moved within the heap: restore order both ways.
    const size_t pos = static_cast<size_t>(e.heap_index);
    SiftDown(pos);
    SiftUp(static_cast<size_t>(e.heap_index));
    return;
  }
  heap_.push_back(index);  // capacity reserved in NewEvent: no allocation
  SiftUp(heap_.size() - 1);
}

void Dispatcher::CancelIndex(uint32_t index) {
  const int32_t pos = events_[index].heap_index;
  if (pos >= 0) RemoveAt(static_cast<size_t>(pos));
}

}  // namespace tether::loop
