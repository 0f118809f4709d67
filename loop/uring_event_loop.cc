#include "loop/uring_event_loop.h"

#include <utility>

#include "loop/make_wake_port.h"
#include "util/hot_path.h"

namespace tether::loop {

UringEventLoop::UringEventLoop(const std::string& name,
                               const transport::ChannelSet* channels,
                               std::unique_ptr<WakePort> wake_port)
    : internal::UringLoopParts(std::move(wake_port)),
      EventLoop(name, channels, &loop_dispatcher, &real_clock, &loop_driver) {}

absl::StatusOr<std::unique_ptr<UringEventLoop>> UringEventLoop::Create(
    const std::string& name, const transport::ChannelSet* channels,
    const UringEventLoopOptions& options) {
  absl::StatusOr<std::unique_ptr<WakePort>> port =
      MakeWakePort(options.port, ProbeKernel());
  if (!port.ok()) return port.status();
  std::unique_ptr<UringEventLoop> loop(
      new UringEventLoop(name, channels, std::move(*port)));
  loop->set_check_allocations(options.check_allocations);
  if (options.stop_fd >= 0 && options.stop_signals != nullptr) {
    return absl::InvalidArgumentError(
        "UringEventLoopOptions: give stop_signals or stop_fd, not both");
  }
  if (absl::Status s =
          loop->loop_driver.WatchStop(options.stop_fd, options.stop_signals);
      !s.ok()) {
    return s;
  }
  return loop;
}

UringEventLoop::~UringEventLoop() { Detach(/*port_survives=*/false); }

TETHER_HOT_PATH int64_t UringEventLoop::realtime_now_ns() const {
  return RealtimeNowNs();
}

void UringEventLoop::Exit() { loop_driver.Exit(); }

bool UringEventLoop::Run() { return loop_driver.Run() == Driver::RunEnd::kStopped; }

}  // namespace tether::loop
