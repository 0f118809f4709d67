// examples: the demo stack's monitor node. It watches every channel it is
// given (raw watchers: any type) and keeps, per channel, messages received
// and missed, messages sent while it watched (from queue indices), the rate,
// and the send -> receive latency (its own receive) as a histogram. From
// /robot/joint_command it also decodes the controller's tracking error and
// cycle numbers (gaps = missed controller cycles). At 10 Hz it publishes the
// totals on /monitor/status; once a second it prints one line to
// `print_to` (per channel: rate, messages missed and latency p50/p99 over
// that second). summary() gives the same numbers as a struct.
#ifndef TETHER_EXAMPLES_MONITOR_H_
#define TETHER_EXAMPLES_MONITOR_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "examples/demo.capnp.h"
#include "examples/latency_histogram.h"
#include "examples/summary.h"
#include "loop/event_loop.h"

namespace tether::examples {

struct MonitorOptions {
  // Channels to watch (for the demo: its `reads` in the stack config).
  std::vector<std::string> channels;
  // If watched, also decoded for the controller's tracking.
  std::string command_channel = "/robot/joint_command";
  std::string status_channel = "/monitor/status";
  loop::Duration status_period = std::chrono::milliseconds(100);
  loop::Duration print_period = std::chrono::seconds(1);
  // Where the per-second line goes; null: nowhere.
  std::FILE* print_to = nullptr;
  // A channel with no message for this long is reported as silent.
  loop::Duration silent_after = std::chrono::milliseconds(500);
};

// Loop thread only. Lives as long as its loop runs.
class MonitorNode {
 public:
  // Makes a watcher per channel (pins one reader slot of each), the status
  // sender and the timers. Errors name the channel. Setup; allocates.
  static absl::StatusOr<std::unique_ptr<MonitorNode>> Create(
      loop::EventLoop* loop, const MonitorOptions& options);
  MonitorNode(const MonitorNode&) = delete;
  MonitorNode& operator=(const MonitorNode&) = delete;

  // Totals since the loop started. Loop thread (or after the loop ended);
  // allocates.
  MonitorSummary summary() const;
  uint64_t status_published() const { return status_published_; }

 private:
  struct ChannelState {
    std::string name;
    std::string short_name;  // without the leading '/', for the printed line
    bool seen = false;
    uint64_t first_index = 0;  // queue index of the first message seen
    uint64_t last_index = 0;
    uint64_t missed_before_first = 0;
    uint64_t received = 0;
    uint64_t missed = 0;
    int64_t first_send_ns = 0;
    int64_t last_send_ns = 0;
    int64_t last_receive_ns = 0;
    LatencyHistogram latency;
    LatencyHistogram window_latency;  // since the last printed line
    uint64_t window_received = 0;
    uint64_t window_missed = 0;
    // Its watcher (owned by the loop): a typed one counts messages whose
    // bytes failed the check; a raw one never finds any.
    const loop::WatcherHandle* watcher = nullptr;
  };

  MonitorNode(loop::EventLoop* loop, const MonitorOptions& options);
  absl::Status Init();
  // Watchers. RT-safe.
  void Count(ChannelState* channel, const loop::MessageContext& context);
  void OnCommand(JointCommand::Reader command,
                 const loop::MessageContext& context);
  // Timers. Not RT-safe (the printed line allocates).
  void PublishStatus();
  void PrintLine();
  ChannelSummary SummaryOf(const ChannelState& c) const;
  double ElapsedS() const;

  loop::EventLoop* const loop_;
  const MonitorOptions options_;
  std::unique_ptr<loop::Sender<MonitorStatus>> sender_;
  std::vector<std::unique_ptr<ChannelState>> channels_;
  loop::MonotonicTime start_;
  loop::MonotonicTime last_print_;

  // From JointCommands.
  TrackingAccumulator tracking_;
  bool have_cycle_ = false;
  uint64_t last_cycle_ = 0;
  uint32_t last_publisher_pid_ = 0;
  uint64_t status_published_ = 0;
};

}  // namespace tether::examples

#endif  // TETHER_EXAMPLES_MONITOR_H_
