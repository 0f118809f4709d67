#include "loop/simulated_event_loop.h"

#include <ftw.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>

#include "absl/strings/str_cat.h"

namespace tether::loop {

class SimulatedEventLoop final : public EventLoop {
 public:
  SimulatedEventLoop(std::string name, SimulatedEventLoopFactory* factory)
      : EventLoop(std::move(name), factory->channels_.get(),
                  &factory->dispatcher_, &factory->clock_),
        factory_(factory) {}

  int64_t realtime_now_ns() const override {
    return static_cast<int64_t>(ToMonotonicNs(factory_->clock_.Now())) +
           factory_->options_.realtime_offset_ns;
  }

  // Called by the factory for a send on `channel`.
  void Schedule(transport::ChannelHandle* channel) {
    for (const auto& w : watchers()) {
      if (w->channel == channel &&
          !dispatcher()->ScheduledTime(w->delivery).has_value()) {
        dispatcher()->Schedule(w->delivery, factory_->clock_.Now());
      }
    }
  }

  void StartIfNew() {
    if (started_) return;
    started_ = true;
    RunOnRunCallbacks();
  }

 protected:
  absl::Status WatcherAdded(Watcher& w) override {
    Watcher* watcher = &w;
    // One delivery event per watcher: it drains everything sent so far (in
    // order), so each send needs at most one scheduled delivery.
    w.delivery = dispatcher()->AddEvent([this, watcher] {
      while (DeliverOne(*watcher)) {
      }
    });
    return absl::OkStatus();
  }

  void AfterSend(transport::ChannelHandle* channel) override {
    factory_->MessageSent(channel);
  }

 private:
  SimulatedEventLoopFactory* const factory_;
  bool started_ = false;
};

SimulatedEventLoopFactory::SimulatedEventLoopFactory(
    const SimulatedOptions& options)
    : options_(options), clock_(options.start), dispatcher_(&clock_) {}

absl::StatusOr<std::unique_ptr<SimulatedEventLoopFactory>>
SimulatedEventLoopFactory::Create(const transport::StackConfig& stack,
                                  const transport::SchemaRegistry& schemas,
                                  const SimulatedOptions& options) {
  std::unique_ptr<SimulatedEventLoopFactory> f(
      new SimulatedEventLoopFactory(options));
  static std::atomic<int> counter{0};
  f->root_ = absl::StrCat(options.shm_root, "/tether-sim-", ::getpid(), "-",
                          counter.fetch_add(1));
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
  return loops_.back().get();
}

void SimulatedEventLoopFactory::MessageSent(transport::ChannelHandle* channel) {
  for (const auto& loop : loops_) loop->Schedule(channel);
}

void SimulatedEventLoopFactory::RunUntil(MonotonicTime end) {
  exit_ = false;
  for (size_t i = 0; i < loops_.size() && !exit_; ++i) loops_[i]->StartIfNew();
  while (!exit_) {
    std::optional<MonotonicTime> next = dispatcher_.NextDeadline();
    if (!next.has_value() || *next > end) break;
    if (*next > clock_.Now()) clock_.AdvanceTo(*next);
    dispatcher_.RunDue(clock_.Now());
  }
  if (!exit_ && clock_.Now() < end) clock_.AdvanceTo(end);
}

}  // namespace tether::loop
