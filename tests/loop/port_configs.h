// tests: the wake port configurations every port test runs (each backend,
// each deadline timer, with and without a spin), the kernel's features
// probed once, and the port a configuration makes (or why it cannot).
// Test code only.
#ifndef TETHER_TESTS_LOOP_PORT_CONFIGS_H_
#define TETHER_TESTS_LOOP_PORT_CONFIGS_H_

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "loop/kernel_probe.h"
#include "loop/make_wake_port.h"
#include "loop/wake_port.h"

namespace tether::loop::testing {

inline const KernelFeatures& Features() {
  static const KernelFeatures* features = new KernelFeatures(ProbeKernel());
  return *features;
}

struct PortConfig {
  const char* name;
  WakeBackend backend;
  Duration spin;
  DeadlineTimer timer;
};

inline constexpr PortConfig kPortConfigs[] = {
    {"uring_futex", WakeBackend::kUringFutex, Duration::zero(),
     DeadlineTimer::kRingWait},
    {"uring_futex_hard_timer", WakeBackend::kUringFutex, Duration::zero(),
     DeadlineTimer::kHard},
    {"uring_futex_spin", WakeBackend::kUringFutex,
     std::chrono::microseconds(20), DeadlineTimer::kRingWait},
    {"futex_waitv", WakeBackend::kFutexWaitv, Duration::zero(),
     DeadlineTimer::kAuto},
    {"futex_waitv_spin", WakeBackend::kFutexWaitv,
     std::chrono::microseconds(20), DeadlineTimer::kAuto},
};

// For INSTANTIATE_TEST_SUITE_P: names the instance after its config.
inline std::string PortConfigName(
    const ::testing::TestParamInfo<PortConfig>& info) {
  return info.param.name;
}

// Empty when this kernel offers `config`'s backend, else why not.
inline std::string UnsupportedReason(const PortConfig& config) {
  const auto choice = ChooseWakeBackend(Features(), config.backend);
  return choice.ok() ? "" : std::string(choice.status().message());
}

// `config`'s port with `max_watches`, or the error.
inline absl::StatusOr<std::unique_ptr<WakePort>> MakeConfiguredPort(
    const PortConfig& config, int max_watches = 16) {
  WakePortOptions options;
  options.backend = config.backend;
  options.spin = config.spin;
  options.deadline_timer = config.timer;
  options.max_watches = max_watches;
  return MakeWakePort(options, Features());
}

}  // namespace tether::loop::testing

#endif  // TETHER_TESTS_LOOP_PORT_CONFIGS_H_
