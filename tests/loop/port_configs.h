// tests: the wake port configurations every port test runs (each backend,
// each deadline timer, with and without a spin), the kernel's features
// probed once, the port a configuration makes (or why it cannot), and the
// WakePortTest fixture of the wake port tests over them. Test code only.
#ifndef TETHER_TESTS_LOOP_PORT_CONFIGS_H_
#define TETHER_TESTS_LOOP_PORT_CONFIGS_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

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

// The wake port tests' fixture (wake_port_test.cc, wake_port_watch_test.cc),
// instantiated over kPortConfigs: each test forces its config's backend.
class WakePortTest : public ::testing::TestWithParam<PortConfig> {
 protected:
  // False (with skip_ set) when this kernel lacks the backend.
  bool Supported() {
    skip_ = UnsupportedReason(GetParam());
    return skip_.empty();
  }

  // The forced backend (nullptr after a test failure).
  std::unique_ptr<WakePort> MakePort(int max_watches = 16) {
    absl::StatusOr<std::unique_ptr<WakePort>> port =
        MakeConfiguredPort(GetParam(), max_watches);
    if (!port.ok()) {
      ADD_FAILURE() << port.status();
      return nullptr;
    }
    EXPECT_EQ((*port)->backend(), GetParam().backend);
    EXPECT_NE((*port)->description().find(WakeBackendName(GetParam().backend)),
              std::string::npos)
        << (*port)->description();
    return std::move(*port);
  }

  // A publisher process against a loop on `channels` channels; defined in
  // wake_port_test.cc, the one file whose tests run it.
  void RunProcessTest(int channels, uint64_t count);

  std::string skip_;
};

// In a WakePortTest: skips the test when this kernel lacks the backend.
#define SKIP_UNLESS_SUPPORTED() \
  if (!Supported()) GTEST_SKIP() << skip_

}  // namespace tether::loop::testing

#endif  // TETHER_TESTS_LOOP_PORT_CONFIGS_H_
