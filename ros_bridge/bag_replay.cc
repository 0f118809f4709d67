#include "ros_bridge/bag_replay.h"

#include <poll.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ros_bridge/channel_watcher.h"
#include "ros_bridge/ros1msg/envelope.h"
#include "ros_bridge/ros1msg/typed.h"
#include "transport/channel_handle.h"
#include "transport/raw_endpoints.h"
#include "transport/schema_registry.h"

namespace tether::ros_bridge {
namespace {

using Clock = std::chrono::steady_clock;

uint32_t RoundUpPow2(uint64_t v) {
  uint64_t p = 4096;
  while (p < v) p <<= 1;
  return static_cast<uint32_t>(std::min<uint64_t>(p, 256u << 20));
}

struct Output {
  std::unique_ptr<transport::ChannelHandle> handle;
  std::unique_ptr<transport::RawPublisher> publisher;
  std::unique_ptr<transport::BuildArena> arena;
};

// Sleeps until `deadline` or the stop fd; true if stopped.
bool SleepUntil(Clock::time_point deadline, int stop_fd) {
  for (;;) {
    const auto now = Clock::now();
    if (now >= deadline) return false;
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        deadline - now).count();
    pollfd pfd{stop_fd, POLLIN, 0};
    const int n = ::poll(&pfd, stop_fd >= 0 ? 1 : 0,
                         static_cast<int>(std::min<int64_t>(ms + 1, 100)));
    if (n > 0) return true;
  }
}

}  // namespace

absl::StatusOr<BagReplayResult> ReplayBag(ros1msg::BagReader& bag,
                                          const BagReplayOptions& options) {
  transport::SchemaRegistry schemas;
  ros1msg::RegisterRosSchemas(&schemas);
  const ros1msg::BagSummary summary = bag.summary();
  // One channel per topic, big enough for the topic's largest envelope.
  std::map<std::string, uint32_t> largest;  // channel -> bytes
  std::vector<std::string> channel_of(bag.connections().size());
  for (const ros1msg::BagConnection& c : bag.connections()) {
    if (!options.topics.empty() && options.topics.count(c.topic) == 0) continue;
    auto r = options.remap.find(c.topic);
    const std::string channel =
        options.prefix + (r != options.remap.end() ? r->second : c.topic);
    channel_of[c.id] = channel;
    const uint64_t need = uint64_t{c.max_data_size} + c.definition.size() +
                          c.type.size() + c.md5sum.size() + c.callerid.size() +
                          c.topic.size() + 512;
    largest[channel] = std::max(largest[channel], RoundUpPow2(need));
  }
  std::map<std::string, Output> outputs;
  for (const auto& [channel, size] : largest) {
    ChannelShape shape;
    absl::StatusOr<ChannelShape> existing = ShapeOf(options.channels, channel);
    if (existing.ok()) {
      if (existing->type_id != ros1msg::EnvelopeTypeId()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "channel ", channel, " exists and carries ",
            schemas.NameOf(existing->type_id),
            ", not ROS envelopes; replay elsewhere (--instance, --prefix) or "
            "remap the topic (/topic:=/other)"));
      }
      if (existing->max_size < size) {
        return absl::FailedPreconditionError(absl::StrCat(
            "channel ", channel, " holds messages of up to ",
            existing->max_size, " bytes, but the bag needs ", size,
            "; remove it (tether clean) or replay into another instance"));
      }
      shape = *existing;
    } else {
      shape.name = channel;
      shape.type_id = ros1msg::EnvelopeTypeId();
      shape.max_size = size;
      shape.queue_depth = options.queue_depth;
    }
    absl::StatusOr<transport::StackConfig> stack = OneChannelStack(shape, schemas);
    if (!stack.ok()) return stack.status();
    Output out;
    absl::StatusOr<std::unique_ptr<transport::ChannelHandle>> h =
        transport::ChannelHandle::Create(options.channels, stack->channels()[0],
                                         schemas);
    if (!h.ok()) return h.status();
    out.handle = std::move(*h);
    absl::StatusOr<std::unique_ptr<transport::RawPublisher>> p =
        transport::RawPublisher::Create(out.handle.get());
    if (!p.ok()) return p.status();
    out.publisher = std::move(*p);
    out.arena = std::make_unique<transport::BuildArena>(out.handle->params().slot_size);
    outputs.emplace(channel, std::move(out));
  }

  BagReplayResult result;
  result.channels = static_cast<uint32_t>(outputs.size());
  const int64_t begin_ns =
      summary.start_time_ns + static_cast<int64_t>(options.start_s * 1e9);
  const int64_t end_ns =
      options.end_s < 0 ? INT64_MAX
                        : summary.start_time_ns + static_cast<int64_t>(options.end_s * 1e9);
  const double length_s = (std::min(end_ns, summary.end_time_ns) - begin_ns) / 1e9;
  const auto wall_start = Clock::now();
  auto next_progress = wall_start;
  ros1msg::BagMessage m;
  for (;;) {
    absl::StatusOr<bool> more = bag.Next(&m);
    if (!more.ok()) return more.status();
    if (!*more) break;
    if (m.time_ns < begin_ns) continue;
    if (m.time_ns > end_ns) break;
    if (m.connection >= channel_of.size() || channel_of[m.connection].empty()) continue;
    if (options.rate > 0) {
      const auto due = wall_start + std::chrono::nanoseconds(static_cast<int64_t>(
                                        (m.time_ns - begin_ns) / options.rate));
      if (SleepUntil(due, options.stop_fd)) {
        result.stopped = true;
        break;
      }
    } else if (options.stop_fd >= 0) {
      pollfd pfd{options.stop_fd, POLLIN, 0};
      if (::poll(&pfd, 1, 0) > 0) {
        result.stopped = true;
        break;
      }
    }
    const ros1msg::BagConnection& c = bag.connections()[m.connection];
    Output& out = outputs.at(channel_of[m.connection]);
    ros1msg::EnvelopeHeader h;
    h.type = c.type;
    h.md5sum = c.md5sum;
    h.definition = c.definition;
    h.latching = c.latching;
    h.callerid = c.callerid;
    h.topic = c.topic;
    h.receive_time_ns = m.time_ns;
    // No graph: made in tether as far as bridges go, so a bridge publishes
    // the replay into its ROS graph.
    h.origin_bridge = "rosbag replay";
    std::span<std::byte> loan = out.publisher->Loan();
    if (loan.empty()) {
      // Counted in the channel's send_failures too, as a failed Send() is.
      (void)out.publisher->CountFailure(transport::PublishStatus::kNoLoan);
      ++result.dropped;
      continue;
    }
    transport::FinishResult f = ros1msg::BuildEnvelope(
        out.arena.get(), loan, out.handle->name(), h, m.data.size(),
        [&](std::span<uint8_t> dst) {
          std::memcpy(dst.data(), m.data.data(), m.data.size());
        });
    if (!f.ok()) return absl::InternalError(f.ErrorMessage());
    if (out.publisher->Send(f.size, nullptr, f.offset).status !=
        transport::PublishStatus::kOk) {
      ++result.dropped;
      continue;
    }
    ++result.messages;
    if (options.progress != nullptr && Clock::now() >= next_progress) {
      next_progress = Clock::now() + std::chrono::seconds(1);
      *options.progress << absl::StrFormat(
          "replay: %7.1f / %.1f s of the bag, %llu messages\n",
          (m.time_ns - begin_ns) / 1e9, length_s,
          static_cast<unsigned long long>(result.messages));
      options.progress->flush();
    }
  }
  result.seconds =
      std::chrono::duration<double>(Clock::now() - wall_start).count();
  return result;
}

}  // namespace tether::ros_bridge
