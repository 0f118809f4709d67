#include "ros_bridge/channel_watcher.h"

#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tether::ros_bridge {

absl::StatusOr<transport::StackConfig> OneChannelStack(
    const ChannelShape& shape, const transport::SchemaRegistry& schemas) {
  const std::string json = absl::StrFormat(
      "{\"channels\": [{\"name\": \"%s\", \"type\": \"0x%016x\", "
      "\"maxSize\": %u, \"queueDepth\": %u, \"maxPublishers\": %u, "
      "\"maxPinned\": %u, \"frequencyHz\": %.17g}]}\n",
      shape.name, shape.type_id, shape.max_size, shape.queue_depth,
      shape.max_publishers, shape.max_pinned, shape.frequency_hz);
  absl::StatusOr<transport::StackConfig> stack = transport::ParseStackConfig(
      json, "<ros_bridge channel>", schemas.known_types());
  if (!stack.ok()) {
    return absl::Status(stack.status().code(),
                        absl::StrCat("channel ", shape.name, ": ",
                                     stack.status().message()));
  }
  return stack;
}

absl::StatusOr<ChannelShape> ShapeOf(const shm::ChannelOptions& options,
                                     const std::string& name) {
  absl::StatusOr<std::unique_ptr<transport::ChannelHandle>> h =
      transport::ChannelHandle::Open(options, name);
  if (!h.ok()) return h.status();
  ChannelShape shape;
  shape.name = (*h)->name();
  shape.type_id = (*h)->type_id();
  shape.max_size = (*h)->max_size();
  shape.queue_depth = (*h)->params().queue_depth;
  shape.max_publishers = (*h)->params().max_publishers;
  shape.max_pinned = (*h)->params().max_pinned;
  shape.frequency_hz = (*h)->frequency_hz();
  return shape;
}

absl::StatusOr<std::unique_ptr<ChannelWatcher>> ChannelWatcher::Start(
    const shm::ChannelOptions& options, const ChannelShape& shape,
    const transport::SchemaRegistry& schemas, Callbacks callbacks) {
  std::unique_ptr<ChannelWatcher> w(new ChannelWatcher());
  w->shape_ = shape;
  w->callbacks_ = std::move(callbacks);
  absl::StatusOr<transport::StackConfig> stack = OneChannelStack(shape, schemas);
  if (!stack.ok()) return stack.status();
  w->stack_ = std::make_unique<transport::StackConfig>(std::move(*stack));
  absl::StatusOr<std::unique_ptr<transport::ChannelSet>> set =
      transport::ChannelSet::Create(options, *w->stack_, schemas);
  if (!set.ok()) return set.status();
  w->channels_ = std::move(*set);
  absl::StatusOr<std::unique_ptr<loop::UringEventLoop>> loop =
      loop::UringEventLoop::Create(absl::StrCat("ros_bridge ", shape.name),
                                   w->channels_.get());
  if (!loop.ok()) return loop.status();
  w->loop_ = std::move(*loop);
  // The fetcher and the watcher are made now, on this thread, before the
  // loop runs (setup may happen on any thread before Run()): nothing sent
  // from here on is missed.
  // A cursor at the oldest message, so Latest() finds what was sent before
  // we came (a latched message).
  absl::StatusOr<transport::ChannelHandle*> handle =
      w->channels_->Find(shape.name);
  if (!handle.ok()) return handle.status();
  absl::StatusOr<std::unique_ptr<transport::RawSubscriber>> fetcher =
      transport::RawSubscriber::Create(*handle, {.from_oldest = true});
  if (!fetcher.ok()) return fetcher.status();
  w->fetcher_ = std::move(*fetcher);
  ChannelWatcher* self = w.get();
  if (auto s = w->loop_->MakeRawWatcher(
          shape.name,
          [self](const transport::RawMessage& m) {
            // Sent between the watcher's start and the Latest() below:
            // already handed to latest_at_start.
            if (self->has_latest_ &&
                m.context.queue_index <= self->latest_index_) {
              return;
            }
            if (m.context.missed > 0) {
              self->missed_.fetch_add(m.context.missed,
                                      std::memory_order_relaxed);
            }
            self->callbacks_.on_message(m);
          });
      !s.ok()) {
    return s.status();
  }
  // The newest message from before now; the watcher starts after it.
  transport::RawMessage latest;
  const bool has_latest =
      w->fetcher_->Latest(&latest) == transport::ReceiveStatus::kOk;
  w->has_latest_ = has_latest;
  w->latest_index_ = has_latest ? latest.context.queue_index : 0;
  w->loop_->OnRun([self, has_latest, latest]() {
    if (has_latest && self->callbacks_.latest_at_start) {
      self->callbacks_.latest_at_start(latest);
    }
    // Done with it: its pin goes back to the channel.
    self->fetcher_.reset();
  });
  w->thread_ = std::thread([self] { self->loop_->Run(); });
  return w;
}

ChannelWatcher::~ChannelWatcher() {
  if (loop_ != nullptr) loop_->Exit();
  if (thread_.joinable()) thread_.join();
  fetcher_.reset();
  loop_.reset();
  channels_.reset();
}

}  // namespace tether::ros_bridge
