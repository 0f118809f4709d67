#include "tools/stat.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "loop/channel_waiter.h"
#include "loop/clock.h"
#include "tools/cli.h"
#include "transport/raw_endpoints.h"

namespace tether::tools {
namespace {

double Percentile(const std::vector<int64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  size_t i = static_cast<size_t>(std::ceil(p * sorted.size()));
  i = std::clamp<size_t>(i, 1, sorted.size()) - 1;
  return sorted[i] / 1000.0;
}

// What one channel's reader saw over a span of time.
struct Tally {
  uint64_t messages = 0, missed = 0;
  std::vector<int64_t> latencies_ns;
};

struct Watched {
  std::string name;
  std::unique_ptr<transport::ChannelHandle> handle;
  std::unique_ptr<transport::RawSubscriber> sub;
  Tally interval, total;
  bool corrupt = false;
};

// Takes everything `w` has now. False (and `w` marked) when its channel
// turned out corrupt.
bool Drain(Watched& w) {
  for (;;) {
    transport::RawMessage m;
    const transport::ReceiveStatus s = w.sub->Next(&m);
    if (s == transport::ReceiveStatus::kNothingNew) return true;
    if (s != transport::ReceiveStatus::kOk) {
      w.corrupt = true;
      return false;
    }
    const transport::MessageContext c = m.context;
    const bool valid = w.sub->StillValid(m);  // unpinned: context intact?
    w.sub->Release();
    for (Tally* t : {&w.interval, &w.total}) {
      t->missed += c.missed + (valid ? 0 : 1);
      if (valid) {
        ++t->messages;
        t->latencies_ns.push_back(c.monotonic_receive_ns - c.monotonic_send_ns);
      }
    }
  }
}

StatRow TakeRow(const Watched& w, Tally& t, double seconds, bool reset) {
  StatRow row = MakeStatRow(w.name, t.messages, t.missed, seconds,
                            t.latencies_ns);
  row.corrupt = w.corrupt;
  if (reset) t = Tally{};
  return row;
}

}  // namespace

StatRow MakeStatRow(const std::string& channel, uint64_t messages,
                    uint64_t missed, double seconds,
                    std::vector<int64_t>& latencies_ns) {
  StatRow row;
  row.channel = channel;
  row.messages = messages;
  row.missed = missed;
  row.rate_hz = seconds > 0 ? messages / seconds : 0;
  std::sort(latencies_ns.begin(), latencies_ns.end());
  row.p50_us = Percentile(latencies_ns, 0.50);
  row.p99_us = Percentile(latencies_ns, 0.99);
  row.max_us = latencies_ns.empty() ? 0 : latencies_ns.back() / 1000.0;
  return row;
}

std::string FormatStatTable(const std::vector<StatRow>& rows) {
  size_t w = 7;
  for (const StatRow& r : rows) w = std::max(w, r.channel.size());
  std::string out =
      absl::StrFormat("%-*s  %10s  %8s  %9s  %9s  %9s  %9s\n", w, "CHANNEL",
                      "MESSAGES", "MISSED", "RATE HZ", "P50 US", "P99 US",
                      "MAX US");
  for (const StatRow& r : rows) {
    absl::StrAppendFormat(&out, "%-*s  %10u  %8u  %9.1f  %9.1f  %9.1f  %9.1f%s\n",
                          w, r.channel, r.messages, r.missed, r.rate_hz,
                          r.p50_us, r.p99_us, r.max_us,
                          r.corrupt ? "  CORRUPT (stopped reading)" : "");
  }
  return out;
}

int RunStat(const StatOptions& options, std::ostream& out, std::ostream& err) {
  std::vector<std::string> names = options.names;
  if (names.empty()) {
    absl::StatusOr<std::vector<std::string>> all =
        shm::Channel::List(options.channels);
    if (!all.ok()) {
      err << "tether stat: " << all.status().message() << "\n";
      return kExitFailure;
    }
    names = *all;
    if (names.empty()) {
      err << "tether stat: no channels in " << options.channels.root << "/"
          << options.channels.instance << "\n";
      return kExitFailure;
    }
  }
  // Declared before the waiter, which holds sleeper registrations on these
  // channels and must go first.
  std::vector<std::unique_ptr<Watched>> watched;
  absl::StatusOr<std::unique_ptr<loop::ChannelWaiter>> waiter =
      loop::ChannelWaiter::Create();
  if (!waiter.ok()) {
    err << "tether stat: " << waiter.status().message() << "\n";
    return kExitFailure;
  }
  bool failed = false;
  for (const std::string& name : names) {
    auto handle = OpenChannelByName(options.channels, name);
    if (!handle.ok()) {
      err << "tether stat: " << handle.status().message() << "\n";
      failed = true;
      continue;
    }
    auto w = std::make_unique<Watched>();
    w->name = name;
    w->handle = std::move(*handle);
    // Unpinned: stat takes none of the stack's pins.
    auto sub = transport::RawSubscriber::Create(w->handle.get(), {.pin = false});
    if (!sub.ok()) {
      err << "tether stat: " << name << ": " << sub.status().message() << "\n";
      failed = true;
      continue;
    }
    w->sub = std::move(*sub);
    if (absl::Status s = (*waiter)->Add(w->sub.get()); !s.ok()) {
      err << "tether stat: " << name << ": " << s.message() << "\n";
      failed = true;
      continue;
    }
    watched.push_back(std::move(w));
  }
  if (watched.empty()) return kExitFailure;

  // One thread reads every channel: drain, print when a table is due, then
  // sleep on all the channels' wake words at once (at most 100 ms, so a stop
  // request is seen).
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  const bool bounded = options.duration.count() > 0;
  const Clock::time_point end = start + options.duration;
  Clock::time_point interval_start = start;
  Clock::time_point next_tick = start + options.interval;
  bool stopping = false;
  while (!stopping) {
    for (auto& w : watched) {
      if (w->corrupt || Drain(*w)) continue;
      (*waiter)->Remove(w->sub.get());
      err << "tether stat: " << w->name
          << ": the channel's shared memory is corrupt; stopped reading it "
             "(remove "
          << w->handle->path() << " and restart the stack's nodes on it)\n";
      failed = true;
    }
    if (options.stop && options.stop()) stopping = true;
    const Clock::time_point now = Clock::now();
    if (bounded && now >= end) stopping = true;
    const double seconds =
        std::chrono::duration<double>(now - interval_start).count();
    if (now >= next_tick || (stopping && seconds > 0.001)) {
      std::vector<StatRow> rows;
      for (auto& w : watched) {
        rows.push_back(TakeRow(*w, w->interval, seconds, true));
      }
      out << absl::StrFormat(
                 "--- %.1f s ---\n",
                 std::chrono::duration<double>(now - start).count())
          << FormatStatTable(rows);
      out.flush();
      interval_start = now;
      while (next_tick <= now) next_tick += options.interval;
    }
    if (stopping) break;
    Clock::time_point wake = bounded ? std::min(next_tick, end) : next_tick;
    wake = std::min(wake, now + std::chrono::milliseconds(100));
    (*waiter)->Wait(loop::MonotonicNow() +
                    std::chrono::duration_cast<loop::Duration>(wake - now));
  }
  const double total_seconds =
      std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<StatRow> rows;
  for (auto& w : watched) {
    rows.push_back(TakeRow(*w, w->total, total_seconds, false));
  }
  out << absl::StrFormat("=== summary over %.1f s ===\n", total_seconds)
      << FormatStatTable(rows);
  return failed ? kExitFailure : kExitOk;
}

ArgParser StatParser() {
  ArgParser parser(
      "tether stat",
      "Watches channels (default: every channel of the instance) and prints,\n"
      "every interval, the messages seen, their rate, the messages missed and\n"
      "the send -> receive latency (p50/p99/max, microseconds) of what this\n"
      "reader saw; then a summary of the whole run. Readers are unpinned (no\n"
      "pins taken from the stack) and see only messages sent after start.\n"
      "Ctrl-C or --duration ends it.");
  parser.AddPositional("channels",
                       "channels to watch, comma separated (default: all)",
                       false);
  AddRootInstanceOptions(parser);
  parser.AddOption("duration", "SECONDS", "stop after this long (default: "
                   "until Ctrl-C)");
  parser.AddOption("interval", "SECONDS", "print a table this often", "1");
  return parser;
}

int RunStatCommand(const ParsedArgs& args, std::ostream& out,
                   std::ostream& err) {
  StatOptions options;
  if (!RootInstanceFrom(args, "tether stat", &options.channels, err)) return kExitUsage;
  for (absl::string_view name :
       absl::StrSplit(args.Positional("channels"), ',', absl::SkipEmpty())) {
    options.names.emplace_back(name);
  }
  double seconds = 0;
  if (args.HasOption("duration")) {
    if (!ParsePositiveOption(args, "tether stat", "duration", &seconds, err)) {
      return kExitUsage;
    }
    options.duration = std::chrono::milliseconds(std::llround(seconds * 1000));
  }
  if (!ParsePositiveOption(args, "tether stat", "interval", &seconds, err)) {
    return kExitUsage;
  }
  options.interval =
      std::chrono::milliseconds(std::max<long long>(1, std::llround(seconds * 1000)));
  std::shared_ptr<void> guard = InstallStop("tether stat", &options.stop, err);
  if (guard == nullptr) return kExitFailure;
  return RunStat(options, out, err);
}

}  // namespace tether::tools
