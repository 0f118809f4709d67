#include "log/log_replayer.h"

#include <algorithm>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tether::log {

absl::StatusOr<std::unique_ptr<LogReplayer>> LogReplayer::Open(
    const std::string& path, const LogReplayerOptions& options) {
  std::unique_ptr<LogReplayer> r(new LogReplayer());
  r->options_ = options;
  absl::StatusOr<std::unique_ptr<LogReader>> reader = LogReader::Open(path);
  if (!reader.ok()) return reader.status();
  r->reader_ = std::move(*reader);

  std::vector<std::pair<std::string, std::string>> remaps = options.remaps;
  for (const std::string& name : options.taken_over) {
    if (r->reader_->FindChannel(name) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot take over ", name, ": the log has no such channel"));
    }
    // Its original is replayed beside it: it must be replayable.
    if (const std::string why = WhyNotReplayable(*r->reader_, name);
        !why.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot take over ", name, ": ", why));
    }
    remaps.emplace_back(name, options.original_prefix + name);
  }
  std::vector<std::string> select = options.channels;
  if (!select.empty()) {
    for (const std::string& name : options.taken_over) select.push_back(name);
  }
  absl::StatusOr<std::vector<ReplayChannel>> plan =
      PlanReplay(*r->reader_, select, remaps, &r->notes_);
  if (!plan.ok()) return plan.status();
  r->plan_ = std::move(*plan);
  if (absl::Status s = LoadReplaySchemas(r->plan_, &r->schemas_); !s.ok()) {
    return s;
  }
  r->taken_over_ = options.taken_over;
  const int64_t start = r->reader_->start_ns();
  r->range_start_ns_ =
      start + static_cast<int64_t>(options.start_s.value_or(0) * 1e9);
  r->range_end_ns_ =
      options.end_s.has_value()
          ? std::min(r->reader_->end_ns(),
                     start + static_cast<int64_t>(*options.end_s * 1e9))
          : r->reader_->end_ns();
  return r;
}

absl::StatusOr<const transport::StackConfig*> LogReplayer::stack() {
  if (stack_.has_value()) return &*stack_;
  std::vector<std::pair<std::string, ChannelDescription>> channels;
  for (const ReplayChannel& rc : plan_) {
    channels.emplace_back(rc.name, rc.description);
  }
  // A taken-over channel has the shape of its replayed original (every
  // incarnation's, ReplayChannel::description).
  for (const std::string& name : taken_over_) {
    for (const ReplayChannel& rc : plan_) {
      if (rc.logged->name == name) channels.emplace_back(name, rc.description);
    }
  }
  for (const auto& extra : options_.extra_channels) channels.push_back(extra);
  absl::StatusOr<transport::StackConfig> s =
      StackConfigFor(channels, schemas_.known_types());
  if (!s.ok()) return s.status();
  stack_ = std::move(*s);
  return &*stack_;
}

loop::SimulatedOptions LogReplayer::simulated_options() const {
  loop::SimulatedOptions o;
  // A millisecond early, so that what runs "at" the first message (a timer,
  // a phased loop's first point) is already scheduled.
  o.start = loop::FromMonotonicNs(
      static_cast<uint64_t>(std::max<int64_t>(range_start_ns_ - 1'000'000, 0)));
  // realtime = monotonic + the offset the recording measured (logs of other
  // writers keep the default).
  if (reader_->realtime_offset_ns() != 0) {
    o.realtime_offset_ns = reader_->realtime_offset_ns();
  }
  o.shm_root = options_.shm_root;
  return o;
}

absl::StatusOr<loop::SimulatedEventLoopFactory*> LogReplayer::MakeFactory() {
  if (factory_ != nullptr) {
    return absl::FailedPreconditionError("MakeFactory() was called already");
  }
  absl::StatusOr<const transport::StackConfig*> s = stack();
  if (!s.ok()) return s.status();
  absl::StatusOr<std::unique_ptr<loop::SimulatedEventLoopFactory>> factory =
      loop::SimulatedEventLoopFactory::Create(**s, schemas_, simulated_options());
  if (!factory.ok()) return factory.status();
  factory_ = std::move(*factory);
  if (absl::Status r = Register(factory_.get()); !r.ok()) return r;
  return factory_.get();
}

absl::Status LogReplayer::Register(loop::SimulatedEventLoopFactory* factory) {
  if (loop_ != nullptr) {
    return absl::FailedPreconditionError("the replay is registered already");
  }
  loop_ = factory->MakeEventLoop("log_replay");
  LogReadOptions read;
  for (const ReplayChannel& rc : plan_) {
    absl::StatusOr<std::unique_ptr<loop::RawSender>> sender =
        loop_->MakeRawSender(rc.name);
    if (!sender.ok()) {
      return absl::Status(sender.status().code(),
                          absl::StrCat("replaying ", rc.logged->name, " on ",
                                       rc.name, ": ", sender.status().message()));
    }
    for (uint16_t id : rc.ids) {
      sender_of_[id] = sender->get();
      names_[id] = rc.name;
      read.channels.insert(id);
    }
    senders_.push_back(std::move(*sender));
  }
  read.start_ns = range_start_ns_;
  read.end_ns = range_end_ns_;
  cursor_ = reader_->Read(read);
  has_next_ = cursor_->Next(&next_);
  timer_ = loop_->AddTimer([this] { PublishDue(); });
  if (has_next_) {
    timer_->Schedule(loop::FromMonotonicNs(
        static_cast<uint64_t>(std::max<int64_t>(next_.monotonic_send_ns, 0))));
  }
  return absl::OkStatus();
}

void LogReplayer::PublishDue() {
  const int64_t now = static_cast<int64_t>(loop::ToMonotonicNs(loop_->monotonic_now()));
  while (has_next_ && next_.monotonic_send_ns <= now) {
    loop::RawSender* sender = sender_of_[next_.channel->id];
    transport::SendTimes times;
    times.monotonic_ns = static_cast<uint64_t>(next_.monotonic_send_ns);
    times.realtime_ns = static_cast<uint64_t>(next_.realtime_send_ns);
    const transport::PublishResult r = sender->Publish(next_.data, &times);
    if (r.status == transport::PublishStatus::kOk) {
      ++stats_.messages;
      ++stats_.per_channel[names_[next_.channel->id]];
    } else {
      ++stats_.publish_failures;
      failures_.Add(names_[next_.channel->id], r.status);
    }
    has_next_ = cursor_->Next(&next_);
  }
  stats_.late = cursor_->late();
  if (has_next_) {
    // A message the reorder window released late is sent at once.
    timer_->Schedule(loop::FromMonotonicNs(
        static_cast<uint64_t>(std::max(next_.monotonic_send_ns, now))));
  }
}

loop::MonotonicTime LogReplayer::start_time() const {
  return loop::FromMonotonicNs(static_cast<uint64_t>(range_start_ns_));
}

loop::MonotonicTime LogReplayer::end_time() const {
  return loop::FromMonotonicNs(static_cast<uint64_t>(range_end_ns_));
}

std::string LogReplayer::ReplayedName(const std::string& logged) const {
  for (const ReplayChannel& rc : plan_) {
    if (rc.logged->name == logged) return rc.name;
  }
  return "";
}

std::vector<McapProblem> LogReplayer::problems() const {
  std::vector<McapProblem> all = reader_->open_problems();
  if (cursor_ != nullptr) {
    all.insert(all.end(), cursor_->problems().begin(), cursor_->problems().end());
  }
  SortProblems(&all);
  return all;
}

}  // namespace tether::log
