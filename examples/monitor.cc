#include "examples/monitor.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tether::examples {

using std::chrono::duration;

absl::StatusOr<std::unique_ptr<MonitorNode>> MonitorNode::Create(
    loop::EventLoop* loop, const MonitorOptions& options) {
  std::unique_ptr<MonitorNode> node(new MonitorNode(loop, options));
  if (absl::Status s = node->Init(); !s.ok()) return s;
  return node;
}

MonitorNode::MonitorNode(loop::EventLoop* loop, const MonitorOptions& options)
    : loop_(loop), options_(options) {}

absl::Status MonitorNode::Init() {
  auto sender = loop_->MakeSender<MonitorStatus>(options_.status_channel);
  if (!sender.ok()) return sender.status();
  sender_ = std::move(*sender);
  for (const std::string& name : options_.channels) {
    if (name == options_.status_channel) continue;  // not our own output
    auto state = std::make_unique<ChannelState>();
    state->name = name;
    state->short_name = name.substr(name.starts_with('/') ? 1 : 0);
    ChannelState* c = state.get();
    channels_.push_back(std::move(state));
    absl::StatusOr<loop::WatcherHandle*> s;
    if (name == options_.command_channel) {
      s = loop_->MakeWatcher<JointCommand>(
          name, [this, c](JointCommand::Reader m,
                          const loop::MessageContext& context) {
            Count(c, context);
            OnCommand(m, context);
          });
    } else {
      s = loop_->MakeRawWatcher(name, [this, c](const loop::RawMessage& m) {
        Count(c, m.context);
      });
    }
    if (!s.ok()) return s.status();
    c->watcher = *s;
  }
  start_ = last_print_ = loop_->monotonic_now();
  loop_->OnRun([this] { start_ = last_print_ = loop_->monotonic_now(); });
  loop_->AddPhasedLoop([this](int) { PublishStatus(); },
                       options_.status_period);
  if (options_.print_to != nullptr) {
    loop_->AddPhasedLoop([this](int) { PrintLine(); }, options_.print_period);
  }
  return absl::OkStatus();
}

void MonitorNode::Count(ChannelState* c, const loop::MessageContext& context) {
  if (!c->seen) {
    c->seen = true;
    c->first_index = context.queue_index;
    c->missed_before_first = context.missed;
    c->first_send_ns = context.monotonic_send_ns;
  }
  c->last_index = context.queue_index;
  c->last_send_ns = context.monotonic_send_ns;
  c->last_receive_ns = context.monotonic_receive_ns;
  ++c->received;
  ++c->window_received;
  c->missed += context.missed;
  c->window_missed += context.missed;
  const int64_t latency =
      context.monotonic_receive_ns - context.monotonic_send_ns;
  c->latency.Record(latency);
  c->window_latency.Record(latency);
}

void MonitorNode::OnCommand(JointCommand::Reader command,
                            const loop::MessageContext& context) {
  const uint64_t cycle = command.getCycle();
  uint64_t missed = 0;
  // Cycle numbers restart with a restarted controller (another publisher).
  if (have_cycle_ && context.publisher_pid == last_publisher_pid_ &&
      cycle > last_cycle_) {
    missed = cycle - last_cycle_ - 1;
  }
  have_cycle_ = true;
  last_cycle_ = cycle;
  last_publisher_pid_ = context.publisher_pid;
  tracking_.AddCycles(1, missed);
  if (command.getEnabled()) {
    tracking_.AddTracked(command.getTrackingErrorX(),
                         command.getTrackingErrorY(),
                         command.getTrackingErrorHeading(),
                         command.getSaturated());
  } else {
    tracking_.AddUntracked(command.getSaturated());
  }
}

double MonitorNode::ElapsedS() const {
  return duration<double>(loop_->monotonic_now() - start_).count();
}

ChannelSummary MonitorNode::SummaryOf(const ChannelState& c) const {
  ChannelSummary s;
  s.name = c.name;
  s.received = c.received;
  s.missed = c.missed;
  if (c.watcher != nullptr) s.malformed = c.watcher->stats().malformed;
  if (c.seen) {
    // From where the watcher started to the last message it delivered:
    // the ones before that it missed or found malformed count too.
    s.sent = c.watcher != nullptr
                 ? c.last_index + 1 - c.watcher->start_index()
                 : c.last_index - c.first_index + 1 + c.missed_before_first;
  }
  if (c.received > 1 && c.last_send_ns > c.first_send_ns) {
    s.rate_hz = static_cast<double>(c.received - 1) /
                (1e-9 * static_cast<double>(c.last_send_ns - c.first_send_ns));
  }
  s.latency_p50_us = 1e-3 * static_cast<double>(c.latency.Quantile(0.5));
  s.latency_p99_us = 1e-3 * static_cast<double>(c.latency.Quantile(0.99));
  s.latency_max_us = 1e-3 * static_cast<double>(c.latency.max_ns());
  if (auto peers = loop_->Peers(c.name); peers.ok()) {
    s.send_failures = peers->send_failures;
  }
  return s;
}

MonitorSummary MonitorNode::summary() const {
  MonitorSummary s;
  s.elapsed_s = ElapsedS();
  for (const auto& c : channels_) s.channels.push_back(SummaryOf(*c));
  s.tracking = tracking_.summary();
  return s;
}

void MonitorNode::PublishStatus() {
  const int64_t now_ns =
      static_cast<int64_t>(loop::ToMonotonicNs(loop_->monotonic_now()));
  transport::Loan<MonitorStatus> loan = sender_->MakeLoan();
  if (!loan.valid()) return;
  MonitorStatus::Builder m = loan.root();
  m.setTimeNs(loop_->realtime_now_ns());
  m.setElapsedS(ElapsedS());
  auto list = m.initChannels(static_cast<unsigned>(channels_.size()));
  // The note: what is unhealthy, in a fixed buffer (no allocation).
  char note[256] = "";
  size_t note_len = 0;
  auto add_note = [&](const char* what, const std::string& name) {
    if (note_len >= sizeof(note) - 1) return;
    const int n = std::snprintf(note + note_len, sizeof(note) - note_len,
                                "%s%s %s", note_len > 0 ? "; " : "", what,
                                name.c_str());
    if (n > 0) note_len = std::min(sizeof(note) - 1, note_len + size_t(n));
  };
  for (size_t i = 0; i < channels_.size(); ++i) {
    const ChannelState& c = *channels_[i];
    const ChannelSummary s = SummaryOf(c);
    auto h = list[static_cast<unsigned>(i)];
    h.setName(capnp::Text::Reader(c.name.data(), c.name.size()));
    h.setReceived(s.received);
    h.setMissed(s.missed);
    h.setMalformed(s.malformed);
    h.setSent(s.sent);
    h.setRateHz(s.rate_hz);
    h.setLatencyP50Us(s.latency_p50_us);
    h.setLatencyP99Us(s.latency_p99_us);
    h.setLatencyMaxUs(s.latency_max_us);
    if (c.missed > 0) add_note("missed messages on", c.name);
    if (s.malformed > 0) add_note("malformed messages on", c.name);
    if (c.seen && now_ns - c.last_receive_ns >
                      std::chrono::nanoseconds(options_.silent_after).count()) {
      add_note("silent:", c.name);
    }
  }
  m.setNote(capnp::Text::Reader(note, note_len));
  const TrackingSummary t = tracking_.summary();
  MonitorStatus::TrackingHealth::Builder th = m.initTracking();
  th.setCycles(t.cycles);
  th.setMissedCycles(t.missed_cycles);
  th.setTrackedCycles(t.tracked_cycles);
  th.setRmsErrorM(t.rms_error_m);
  th.setMaxErrorM(t.max_error_m);
  th.setRmsHeadingErrorRad(t.rms_heading_error_rad);
  th.setSaturatedCycles(t.saturated_cycles);
  if (sender_->Send(std::move(loan)).status == transport::PublishStatus::kOk) {
    ++status_published_;
  }
}

void MonitorNode::PrintLine() {
  const loop::MonotonicTime now = loop_->monotonic_now();
  const double window_s = duration<double>(now - last_print_).count();
  last_print_ = now;
  std::string line = absl::StrFormat("monitor %6.1fs", ElapsedS());
  for (const auto& cp : channels_) {
    ChannelState& c = *cp;
    absl::StrAppendFormat(
        &line, " | %s %.0fHz miss %d %.0f/%.0fus", c.short_name,
        window_s > 0 ? static_cast<double>(c.window_received) / window_s : 0.0,
        c.window_missed, 1e-3 * static_cast<double>(c.window_latency.Quantile(0.5)),
        1e-3 * static_cast<double>(c.window_latency.Quantile(0.99)));
    c.window_received = 0;
    c.window_missed = 0;
    c.window_latency.Clear();
  }
  const TrackingSummary t = tracking_.summary();
  absl::StrAppendFormat(&line, " | track rms %.1fmm max %.1fmm missed %d\n",
                        t.rms_error_m * 1e3, t.max_error_m * 1e3,
                        t.missed_cycles);
  std::fputs(line.c_str(), options_.print_to);
  std::fflush(options_.print_to);
}

}  // namespace tether::examples
