#include "benchmarks/rt_deadlines.h"

#include <sched.h>

#include <memory>
#include <optional>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "loop/kernel_probe.h"
#include "loop/make_wake_port.h"
#include "loop/realtime.h"
#include "loop/uring_event_loop.h"
#include "tests/shm/shm_test_util.h"
#include "tests/transport/framing_test.capnp.h"
#include "transport/channel_set.h"
#include "transport/config.h"
#include "transport/schema_registry.h"

namespace tether::bench {
namespace {

using loop::DeadlineRecorder;
using loop::DeadlineTimer;
using loop::Duration;
using loop::MonotonicNow;
using loop::MonotonicTime;
using loop::WakeBackend;

constexpr char kStack[] = R"({
  "channels": [
    {"name": "/rtbench/idle", "type": "tests/transport/framing_test.capnp:Scalars",
     "maxSize": 128, "queueDepth": 16, "maxPublishers": 1, "maxPinned": 8}
  ]
})";

struct Mode {
  const char* key;
  const char* label;
  bool floor;
  std::optional<WakeBackend> backend;
  DeadlineTimer timer;
};

// One round of one tether mode on the calling (real-time) thread: a loop
// with a watcher and a phased loop on the grid, for `length`.
absl::Status RunLoopRound(const Mode& mode, const transport::ChannelSet* set,
                          Duration period, Duration length,
                          DeadlineRecorder* recorder, std::string* detail,
                          bool* hard) {
  loop::UringEventLoopOptions options;
  options.port.backend = mode.backend;
  options.port.deadline_timer = mode.timer;
  options.check_allocations = false;
  auto loop = loop::UringEventLoop::Create("rt-deadlines", set, options);
  if (!loop.ok()) return loop.status();
  loop::UringEventLoop* l = loop->get();
  *detail = l->backend_description();
  const loop::DeadlineTimerChoice choice = loop::ChooseDeadlineTimer(
      mode.timer, loop::ProbeKernel());
  *hard = l->backend() == WakeBackend::kFutexWaitv || choice.hard;
  if (absl::StatusOr<loop::WatcherHandle*> s = l->MakeWatcher<Scalars>(
          "/rtbench/idle", [](Scalars::Reader, const loop::MessageContext&) {});
      !s.ok()) {
    return s.status();
  }
  // cycles - 1 grid points passed with no run: missed deadlines. The
  // context's event time is the latest of the points that passed; lateness
  // counts from the first (as RunDeadlineGrid's does).
  l->AddPhasedLoop(
      [&](int cycles) {
        recorder->Record(l->monotonic_now() - l->context().monotonic_event_time +
                             (cycles - 1) * period,
                         cycles - 1);
      },
      period);
  l->AddTimer([l] { l->Exit(); })->Schedule(l->monotonic_now() + length);
  l->Run();
  loop->reset();  // on this thread (the port binds to it)
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DeadlineReport> RunDeadlines(const DeadlineOptions& options) {
  if (options.rounds <= 0 || options.per_mode <= Duration::zero()) {
    return absl::InvalidArgumentError("rounds and per_mode must be positive");
  }
  DeadlineReport report;
  report.cpu = options.cpu >= 0 ? options.cpu : loop::HighestAllowedCpu();
  const loop::KernelFeatures features = loop::ProbeKernel();

  shm::testing::ScopedRoot root;
  transport::SchemaRegistry schemas;
  schemas.Register<Scalars>();
  auto stack = transport::ParseStackConfig(kStack, "<deadlines stack>",
                                           schemas.known_types());
  if (!stack.ok()) return stack.status();
  auto set = transport::ChannelSet::Create(root.options(), *stack, schemas);
  if (!set.ok()) return set.status();

  std::vector<Mode> modes;
  if (loop::ChooseWakeBackend(features, WakeBackend::kUringFutex).ok()) {
    modes.push_back({"ring_wait", "tether uring_futex, io_uring wait timeout",
                     false, WakeBackend::kUringFutex, DeadlineTimer::kRingWait});
    modes.push_back({"hard", "tether uring_futex, hard timer (ppoll)", false,
                     WakeBackend::kUringFutex, DeadlineTimer::kHard});
  }
  if (loop::ChooseWakeBackend(features, WakeBackend::kFutexWaitv).ok()) {
    modes.push_back({"futex_waitv", "tether futex_waitv (ppoll)", false,
                     WakeBackend::kFutexWaitv, DeadlineTimer::kAuto});
  }
  modes.push_back({"default", "tether default (what a loop picks here)", false,
                   std::nullopt, DeadlineTimer::kAuto});
  modes.push_back({"floor", "clock_nanosleep (floor)", true, std::nullopt,
                   DeadlineTimer::kAuto});

  const Duration slice = options.per_mode / options.rounds;
  const size_t capacity =
      static_cast<size_t>(options.per_mode / options.period) + 64;
  std::vector<std::unique_ptr<DeadlineRecorder>> recorders;
  report.rows.resize(modes.size());
  for (size_t i = 0; i < modes.size(); ++i) {
    recorders.push_back(std::make_unique<DeadlineRecorder>(capacity));
    report.rows[i].key = modes[i].key;
    report.rows[i].label = modes[i].label;
    report.rows[i].hard = modes[i].floor;
  }

  absl::Status status;
  std::thread waiter([&] {
    const int cpus[] = {report.cpu};
    if (absl::Status s = loop::SetThreadAffinity(cpus); !s.ok()) {
      status = s;
      return;
    }
    if (absl::Status s = loop::SetThreadScheduling(loop::SchedPolicy::kFifo,
                                                   options.waiter_priority);
        !s.ok()) {
      status = s;
      return;
    }
    loop::BurstLoadOptions load = options.load;
    load.cpu = report.cpu;
    auto burst = loop::BurstLoad::Start(load);
    if (!burst.ok()) {
      status = burst.status();
      return;
    }
    for (int round = 0; round < options.rounds && status.ok(); ++round) {
      for (size_t i = 0; i < modes.size() && status.ok(); ++i) {
        if (modes[i].floor) {
          const MonotonicTime start = MonotonicNow();
          loop::RunDeadlineGrid(start, options.period, start + slice,
                                loop::NanosleepUntil, recorders[i].get());
          continue;
        }
        status = RunLoopRound(modes[i], set->get(), options.period, slice,
                              recorders[i].get(), &report.rows[i].detail,
                              &report.rows[i].hard);
      }
    }
  });
  waiter.join();
  if (!status.ok()) return status;
  for (size_t i = 0; i < modes.size(); ++i) {
    report.rows[i].stats = recorders[i]->Stats();
  }
  return report;
}

}  // namespace tether::bench
