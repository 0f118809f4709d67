#include "loop/simulated_event_loop.h"

#include <ftw.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <random>

#include "absl/strings/str_cat.h"

namespace tether::loop {

class SimulatedEventLoop final : public EventLoop {
 public:
  SimulatedEventLoop(std::string name, SimulatedEventLoopFactory* factory)
      : EventLoop(std::move(name), factory->channels_.get(),
                  &factory->dispatcher_, &factory->clock_, &factory->driver_),
        factory_(factory) {}
  ~SimulatedEventLoop() override { Detach(/*port_survives=*/true); }

  int64_t realtime_now_ns() const override {
    return static_cast<int64_t>(ToMonotonicNs(factory_->clock_.Now())) +
           factory_->options_.realtime_offset_ns;
  }

 private:
  SimulatedEventLoopFactory* const factory_;
};

SimulatedEventLoopFactory::SimulatedEventLoopFactory(
    const SimulatedOptions& options)
    : options_(options),
      clock_(options.start),
      dispatcher_(&clock_),
      port_(&clock_),
      driver_(&dispatcher_, &clock_, &port_) {}

absl::StatusOr<std::unique_ptr<SimulatedEventLoopFactory>>
SimulatedEventLoopFactory::Create(const transport::StackConfig& stack,
                                  const transport::SchemaRegistry& schemas,
                                  const SimulatedOptions& options) {
  std::unique_ptr<SimulatedEventLoopFactory> f(
      new SimulatedEventLoopFactory(options));
  // Unique across processes too: processes in other pid namespaces (e.g.
  // sandboxed tests) share /dev/shm and may have the same pid.
  static std::atomic<int> counter{0};
  std::random_device random;
  f->root_ = absl::StrCat(options.shm_root, "/tether-sim-", ::getpid(), "-",
                          counter.fetch_add(1), "-",
                          absl::Hex(random(), absl::kZeroPad8));
  shm::ChannelOptions shm_options;
  shm_options.root = f->root_;
  shm_options.instance = "sim";
  absl::StatusOr<std::unique_ptr<transport::ChannelSet>> channels =
      transport::ChannelSet::Create(shm_options, stack, schemas);
  if (!channels.ok()) return channels.status();
  f->channels_ = std::move(*channels);
  return f;
}

SimulatedEventLoopFactory::~SimulatedEventLoopFactory() {
  loops_.clear();
  channels_.reset();
  if (!root_.empty()) {
    ::nftw(
        root_.c_str(),
        [](const char* path, const struct stat*, int, struct FTW*) {
          return ::remove(path);
        },
        16, FTW_DEPTH | FTW_PHYS);
  }
}

EventLoop* SimulatedEventLoopFactory::MakeEventLoop(const std::string& name) {
  loops_.push_back(std::make_unique<SimulatedEventLoop>(name, this));
  loops_.back()->set_check_allocations(options_.check_allocations);
  return loops_.back().get();
}

void SimulatedEventLoopFactory::RunUntil(MonotonicTime end) {
  driver_.ClearExit();
  port_.set_limit(std::max(end, clock_.Now()));
  driver_.Run();
}

}  // namespace tether::loop
