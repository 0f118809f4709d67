#include "log/realtime_replay.h"

#include <sys/prctl.h>
#include <time.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "capnp/any.h"
#include "transport/framing.h"

namespace tether::log {
namespace {

int64_t MonotonicNow() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// Time arithmetic that saturates instead of wrapping: a slow rate over a
// long stretch of log (or a log's wild send times) must put a message far
// in the future, never wrap it into the past (due at once).
int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t r;
  if (!__builtin_add_overflow(a, b, &r)) return r;
  return b > 0 ? std::numeric_limits<int64_t>::max()
               : std::numeric_limits<int64_t>::min();
}
int64_t SaturatingSub(int64_t a, int64_t b) {
  int64_t r;
  if (!__builtin_sub_overflow(a, b, &r)) return r;
  return b < 0 ? std::numeric_limits<int64_t>::max()
               : std::numeric_limits<int64_t>::min();
}
int64_t SaturatingMul(int64_t a, int64_t b) {
  int64_t r;
  if (!__builtin_mul_overflow(a, b, &r)) return r;
  return (a < 0) == (b < 0) ? std::numeric_limits<int64_t>::max()
                            : std::numeric_limits<int64_t>::min();
}
int64_t Saturate(double v) {
  // 2^63 is exact as a double; anything at or past it does not fit.
  if (v >= 9223372036854775808.0) return std::numeric_limits<int64_t>::max();
  if (v <= -9223372036854775808.0) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

}  // namespace

absl::StatusOr<std::unique_ptr<RealtimeReplay>> RealtimeReplay::Create(
    const std::string& path, const RealtimeReplayOptions& options) {
  if (!(options.rate >= kMinReplayRate && options.rate <= kMaxReplayRate)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the rate ", options.rate, " is out of range: it must be from ",
        kMinReplayRate, " to ", kMaxReplayRate));
  }
  std::unique_ptr<RealtimeReplay> r(new RealtimeReplay());
  r->options_ = options;
  r->rate_ = options.rate;
  r->paused_ = options.start_paused;
  if (absl::Status s = r->Prepare(path); !s.ok()) return s;
  return r;
}

RealtimeReplay::~RealtimeReplay() {
  publishers_.clear();
  handles_.clear();
}

absl::Status RealtimeReplay::Prepare(const std::string& path) {
  absl::StatusOr<std::unique_ptr<LogReader>> reader = LogReader::Open(path);
  if (!reader.ok()) return reader.status();
  reader_ = std::move(*reader);
  // Damage found on opening (a cut file, a missing or broken summary): Run's
  // cursor reports only what it meets itself.
  for (const McapProblem& p : reader_->mcap().problems()) {
    notes_.push_back(absl::StrCat("damaged log: ", p.ToString()));
  }
  if (!reader_->mcap().footer().has_value()) {
    notes_.push_back(absl::StrCat(
        path,
        " is truncated (its recorder was killed or the copy is cut "
        "short): what comes before the cut is replayed, every intact "
        "chunk; `tether log recover ",
        path, " FIXED.mcap` rewrites it complete"));
  }
  absl::StatusOr<std::vector<ReplayChannel>> plan =
      PlanReplay(*reader_, options_.select, options_.remaps, &notes_);
  if (!plan.ok()) return plan.status();
  plan_ = std::move(*plan);
  if (absl::Status s = LoadReplaySchemas(plan_, &schemas_); !s.ok()) return s;

  // Which exist (and must hold the logged shape), which must be created.
  std::vector<std::pair<std::string, ChannelDescription>> to_create;
  std::vector<std::unique_ptr<transport::ChannelHandle>> opened(plan_.size());
  for (size_t i = 0; i < plan_.size(); ++i) {
    const ReplayChannel& rc = plan_[i];
    const ChannelDescription& logged = rc.description;
    absl::StatusOr<std::unique_ptr<transport::ChannelHandle>> h =
        transport::ChannelHandle::Open(options_.channels, rc.name);
    if (h.ok()) {
      const ChannelDescription live = DescribeChannel(**h);
      if (!live.Holds(logged)) {
        return absl::FailedPreconditionError(absl::StrCat(
            "channel ", rc.name, " exists in ", options_.channels.root, "/",
            options_.channels.instance, " as ", live.ShapeText(),
            ", which cannot carry the log's ", rc.logged->name, " (",
            logged.ShapeText(),
            "): a replay into a channel needs the logged type and each "
            "dimension at least the logged one. Stop what uses it and remove "
            "it (tether clean), replay into another --instance, or remap it (",
            rc.logged->name, ":=/other/name)"));
      }
      opened[i] = std::move(*h);
    } else if (absl::IsNotFound(h.status())) {
      to_create.emplace_back(rc.name, logged);
    } else {
      return absl::Status(h.status().code(),
                          absl::StrCat("channel ", rc.name, ": ",
                                       h.status().message()));
    }
  }
  std::optional<transport::StackConfig> stack;
  if (!to_create.empty()) {
    absl::StatusOr<transport::StackConfig> s =
        StackConfigFor(to_create, schemas_.known_types());
    if (!s.ok()) return s.status();
    stack = std::move(*s);
  }
  for (size_t i = 0; i < plan_.size(); ++i) {
    const ReplayChannel& rc = plan_[i];
    ReplayedChannel info;
    info.logged_name = rc.logged->name;
    info.name = rc.name;
    info.type_name = rc.description.type_name;
    if (opened[i] == nullptr) {
      absl::StatusOr<std::unique_ptr<transport::ChannelHandle>> h =
          transport::ChannelHandle::Create(options_.channels,
                                           *stack->FindChannel(rc.name), schemas_);
      if (!h.ok()) return h.status();
      opened[i] = std::move(*h);
      info.created = true;
    }
    absl::StatusOr<std::unique_ptr<transport::RawPublisher>> pub =
        transport::RawPublisher::Create(opened[i].get());
    if (!pub.ok()) {
      return absl::Status(
          pub.status().code(),
          absl::StrCat("cannot publish on ", rc.name, ": ", pub.status().message(),
                       " (are the nodes that publish it running? replay into "
                       "another --instance or remap it)"));
    }
    for (uint16_t id : rc.ids) by_channel_[id] = pub->get();
    publishers_.push_back(std::move(*pub));
    handles_.push_back(std::move(opened[i]));
    channels_.push_back(std::move(info));
  }
  const int64_t start = reader_->start_ns();
  range_start_ns_ = start + static_cast<int64_t>(options_.start_s.value_or(0) * 1e9);
  range_end_ns_ = options_.end_s.has_value()
                      ? std::min(reader_->end_ns(),
                                 start + static_cast<int64_t>(*options_.end_s * 1e9))
                      : reader_->end_ns();
  if (range_end_ns_ < range_start_ns_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--start/--end select nothing: the log is ",
        (reader_->end_ns() - start) / 1e9, " s long"));
  }
  progress_.duration_ns = range_end_ns_ - range_start_ns_;
  progress_.rate = rate_;
  progress_.paused = paused_;
  // Chunks that could not be read while finding the log's span: those of
  // the replay's channels and range lost messages it would have played
  // (Run's own reads meet only the damage inside the span they found).
  for (const McapProblem& p : reader_->open_problems()) NoteDamage(p);
  return absl::OkStatus();
}

void RealtimeReplay::SetPaused(bool paused) {
  std::lock_guard lock(mu_);
  if (paused_ == paused) return;
  paused_ = paused;
  progress_.paused = paused;
  cv_.notify_all();
}

void RealtimeReplay::TogglePause() {
  std::lock_guard lock(mu_);
  paused_ = !paused_;
  progress_.paused = paused_;
  cv_.notify_all();
}

void RealtimeReplay::Step() {
  std::lock_guard lock(mu_);
  if (!paused_) return;
  ++steps_;
  cv_.notify_all();
}

void RealtimeReplay::SetRate(double rate) {
  if (std::isnan(rate)) return;
  rate = std::clamp(rate, kMinReplayRate, kMaxReplayRate);
  std::lock_guard lock(mu_);
  // Re-anchor at the current position so the change applies from now.
  const int64_t now = MonotonicNow();
  const double played =
      static_cast<double>(SaturatingSub(now, anchor_wall_)) * rate_;
  anchor_log_ = SaturatingAdd(anchor_log_, Saturate(played));
  anchor_wall_ = now;
  rate_ = rate;
  progress_.rate = rate;
  cv_.notify_all();
}

ReplayProgress RealtimeReplay::progress() const {
  std::lock_guard lock(mu_);
  return progress_;
}

void RealtimeReplay::NoteMalformed(const std::string& channel,
                                   const LogMessage& m) {
  for (MalformedMessages& seen : malformed_) {
    if (seen.name == channel) {
      ++seen.count;
      return;
    }
  }
  MalformedMessages first;
  first.name = channel;
  first.count = 1;
  first.first_s = (m.monotonic_send_ns - reader_->start_ns()) / 1e9;
  // Publish said only kMalformed: the same check again, for its words.
  transport::SlotMessageReader reader(m.data);
  if (transport::CheckedRoot<capnp::AnyStruct>(reader, &first.why).ok()) {
    first.why = "refused by the channel's publisher";
  }
  malformed_.push_back(std::move(first));
}

void RealtimeReplay::NoteDamage(const McapProblem& p) {
  if (!damage_seen_.insert(p.offset).second) return;
  notes_.push_back(absl::StrCat("damaged log: ", p.ToString()));
  if (DamageConcernsReplay(p)) ++progress_.damaged;
}

bool RealtimeReplay::DamageConcernsReplay(const McapProblem& p) const {
  // The chunk the damage is in, by the summary's index; without one, or
  // outside every chunk, it may have held anything.
  const mcap::ChunkIndex* chunk = nullptr;
  for (const mcap::ChunkIndex& c : reader_->mcap().chunk_indexes()) {
    if (p.offset >= c.chunk_start_offset &&
        p.offset - c.chunk_start_offset < c.chunk_length) {
      chunk = &c;
      break;
    }
  }
  if (chunk == nullptr) return true;
  if (!chunk->message_index_offsets.empty()) {
    bool ours = false;
    for (const ReplayChannel& rc : plan_) {
      for (uint16_t id : rc.ids) ours |= chunk->message_index_offsets.count(id) > 0;
    }
    if (!ours) return false;  // none of the replayed channels' messages
  }
  // The whole log asked for: all of it counts (a damaged chunk lies
  // outside the span the readable messages give).
  if (!options_.start_s.has_value() && !options_.end_s.has_value()) return true;
  if (!reader_->log_time_tracks_send()) return true;
  // Its messages' log times against the range's, with the reader's slack.
  const int64_t offset = reader_->realtime_offset_ns();
  const int64_t slack = LogReader::kLogTimeSlackNs;
  const int64_t lo = SaturatingSub(SaturatingAdd(range_start_ns_, offset), slack);
  const int64_t hi = SaturatingAdd(SaturatingAdd(range_end_ns_, offset), slack);
  return !(static_cast<int64_t>(chunk->message_end_time) < lo ||
           static_cast<int64_t>(chunk->message_start_time) > hi);
}

bool RealtimeReplay::WaitUntilDue(int64_t t, const std::function<bool()>& stop,
                                  bool take_step) {
  bool was_paused = false;
  for (;;) {
    // `stop` may read progress(): never call it with mu_ held.
    if (stop && stop()) return false;
    std::unique_lock lock(mu_);
    if (paused_) {
      was_paused = true;
      if (steps_ > 0) {
        if (!take_step) return true;  // the step is the next message's
        --steps_;
        anchor_log_ = t;  // continue from here when unpaused
        anchor_wall_ = MonotonicNow();
        return true;
      }
      cv_.wait_for(lock, std::chrono::milliseconds(50));
      continue;
    }
    if (was_paused) {
      // No burst after a pause: this message is due now.
      anchor_log_ = t;
      anchor_wall_ = MonotonicNow();
      was_paused = false;
    }
    const int64_t due = SaturatingAdd(
        anchor_wall_,
        Saturate(static_cast<double>(SaturatingSub(t, anchor_log_)) / rate_));
    const int64_t now = MonotonicNow();
    if (due <= now) return true;
    const int64_t wait = std::min<int64_t>(due - now, 50'000'000);
    if (wait > 2'000'000) {
      // Long waits: interruptible by the controls.
      cv_.wait_for(lock, std::chrono::nanoseconds(wait - 1'000'000));
      continue;
    }
    // Short waits: an absolute sleep, without the lock, for accuracy; the
    // last `spin` of it spinning.
    lock.unlock();
    const int64_t wake = due - options_.spin.count();
    if (wake > now) {
      timespec ts;
      ts.tv_sec = wake / 1'000'000'000;
      ts.tv_nsec = wake % 1'000'000'000;
      while (::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) ==
             EINTR) {
      }
    }
    while (options_.spin.count() > 0 && MonotonicNow() < due) {
    }
  }
}

absl::Status RealtimeReplay::Run(const std::function<bool()>& stop) {
  // Wake-ups within a microsecond of the due time, not the default 50 us.
  ::prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  // Sends that failed (not malformed ones: NoteMalformed sums those).
  PublishFailures failed;
  LogReadOptions read;
  for (const ReplayChannel& rc : plan_) {
    read.channels.insert(rc.ids.begin(), rc.ids.end());
  }
  read.start_ns = range_start_ns_;
  read.end_ns = range_end_ns_;
  const int64_t span = range_end_ns_ - range_start_ns_;
  // Rounds are laid end to end on one clock: round k plays the range's log
  // times shifted by k ranges (plus a ms), and is due then, so a round
  // lasts its whole range (an empty one too) and the stamped send times
  // keep pace with the wall clock.
  const auto round_shift = [span](int round) {
    return SaturatingMul(round, SaturatingAdd(span, 1'000'000));
  };
  bool anchored = false;
  // Waits until shifted log time `t` is due; false when stopped. The clock
  // starts when the first message is ready (reading the first chunk and
  // filling the reorder window take a while).
  const auto wait_until = [&](int64_t t, bool take_step) {
    if (!anchored) {
      std::lock_guard lock(mu_);
      anchor_log_ = t;
      anchor_wall_ = MonotonicNow();
      anchored = true;
    }
    return WaitUntilDue(t, stop, take_step);
  };
  // Ends the run; `cursor`'s damage so far is noted (a stop mid-round
  // keeps what it met).
  const auto stopped = [&](const LogCursor& cursor) {
    std::lock_guard lock(mu_);
    for (const McapProblem& p : cursor.problems()) NoteDamage(p);
    progress_.done = true;
    return failed.Summary();
  };
  for (int round = 0;; ++round) {
    {
      std::lock_guard lock(mu_);
      progress_.round = round;
    }
    const int64_t shift = round_shift(round);
    std::unique_ptr<LogCursor> cursor = reader_->Read(read);
    LogMessage m;
    while (cursor->Next(&m)) {
      if (!wait_until(SaturatingAdd(m.monotonic_send_ns, shift),
                      /*take_step=*/true)) {
        return stopped(*cursor);
      }
      transport::RawPublisher* pub = by_channel_[m.channel->id];
      transport::SendTimes times;
      times.monotonic_ns =
          static_cast<uint64_t>(SaturatingAdd(m.monotonic_send_ns, shift));
      times.realtime_ns =
          static_cast<uint64_t>(SaturatingAdd(m.realtime_send_ns, shift));
      const transport::PublishResult r =
          pub->Publish(m.data, options_.restamp ? nullptr : &times);
      if (r.status == transport::PublishStatus::kMalformed) {
        NoteMalformed(pub->channel()->name(), m);
      }
      std::lock_guard lock(mu_);
      if (r.status == transport::PublishStatus::kMalformed) {
        ++progress_.malformed;
      } else if (r.status != transport::PublishStatus::kOk) {
        ++progress_.failed;
        failed.Add(pub->channel()->name(), r.status);
      } else {
        ++progress_.messages;
      }
      progress_.position_ns = m.monotonic_send_ns - range_start_ns_;
    }
    if (!options_.loop || (stop && stop())) return stopped(*cursor);
    // The next round's start: a step taken while paused is the next
    // message's, not spent on the boundary.
    if (!wait_until(SaturatingAdd(range_start_ns_, round_shift(round + 1)),
                    /*take_step=*/false)) {
      return stopped(*cursor);
    }
  }
}

}  // namespace tether::log
