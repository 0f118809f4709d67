#include "tools/replay.h"

#include <poll.h>
#include <termios.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "log/realtime_replay.h"
#include "tools/channel_tool.h"
#include "tools/cli.h"

namespace tether::tools {
namespace {

// Raw keys from a terminal for the life of the guard (restored after).
class RawTerminal {
 public:
  RawTerminal() {
    if (::isatty(STDIN_FILENO) != 1 || ::tcgetattr(STDIN_FILENO, &saved_) != 0) {
      return;
    }
    termios raw = saved_;
    raw.c_lflag &= ~(ICANON | ECHO);
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    active_ = ::tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
  }
  ~RawTerminal() {
    if (active_) ::tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }
  bool active() const { return active_; }
  // A key pressed within `ms`, or 0.
  char Poll(int ms) const {
    pollfd p{STDIN_FILENO, POLLIN, 0};
    if (::poll(&p, 1, ms) != 1) return 0;
    char c = 0;
    return ::read(STDIN_FILENO, &c, 1) == 1 ? c : 0;
  }

 private:
  termios saved_{};
  bool active_ = false;
};

std::string Bar(const log::ReplayProgress& p, bool keys) {
  constexpr int kWidth = 30;
  const double f = p.duration_ns > 0
                       ? std::clamp(double(p.position_ns) / p.duration_ns, 0.0, 1.0)
                       : 1.0;
  const int filled = static_cast<int>(f * kWidth);
  std::string bar(kWidth, ' ');
  for (int i = 0; i < filled; ++i) bar[i] = '=';
  if (filled < kWidth) bar[filled] = '>';
  return absl::StrFormat(
      "[%s] %7.2f / %.2f s  x%.2f  %u msgs%s%s%s%s%s", bar, p.position_ns / 1e9,
      p.duration_ns / 1e9, p.rate, p.messages,
      p.round > 0 ? absl::StrFormat("  round %d", p.round + 1) : "",
      p.failed > 0 ? absl::StrFormat("  %u FAILED", p.failed) : "",
      p.malformed > 0 ? absl::StrFormat("  %u malformed skipped", p.malformed)
                      : "",
      p.paused ? "  PAUSED" : "",
      keys ? (p.paused ? "  (Space: play, s: step)" : "  (Space: pause)") : "");
}

}  // namespace

ArgParser ReplayParser() {
  ArgParser parser(
      "tether replay",
      "Plays a log back into shared memory in real time: creates the logged\n"
      "channels that do not exist (with their logged type and queue shape;\n"
      "a channel that exists must have the logged type and be at least as\n"
      "large in every dimension, else it is refused, both sides named), then\n"
      "publishes every message at its logged send time (scaled by --rate)\n"
      "with its bytes unchanged and its logged send times (unless\n"
      "--restamp; with --loop each round lasts the range and is shifted by\n"
      "it, so times keep increasing with the wall clock). Remap channels\n"
      "with /logged:=/new arguments. A progress bar shows position, duration and rate; when\n"
      "stdin is a terminal, Space pauses, s steps one message while paused,\n"
      "+ and - double and halve the rate, q quits. Channels it created stay\n"
      "(tether clean removes unused ones). Messages that are not valid Cap'n\n"
      "Proto messages (bad framing or pointers: what typed readers would\n"
      "skip) are not published: they are counted and summed up per channel\n"
      "at the end. Exits 1 if any message was not published (also one in a\n"
      "damaged part of the log that could not be read), 130 if a\n"
      "signal (Ctrl-C, SIGTERM) stopped it before the end (not with --loop),\n"
      "else 0.");
  parser.AddPositional("file", "the MCAP log");
  parser.AddPositionalList("remap", "/logged/name:=/new/name renamings");
  AddRootInstanceOptions(parser);
  parser.AddOption("rate", "R",
                   "speed factor (2 = twice as fast), from 1e-06 to 1e+06",
                   "1");
  parser.AddOption("start", "SECONDS", "start this far into the log");
  parser.AddOption("end", "SECONDS", "stop this far into the log");
  parser.AddOption("channels", "LIST",
                   "comma-separated logged channel names or globs (default: "
                   "all)");
  parser.AddOption("spin-us", "US",
                   "spin this long before each message instead of sleeping "
                   "(closer to the logged times, costs CPU)",
                   "0");
  parser.AddFlag("loop", "start over at the end, until Ctrl-C");
  parser.AddFlag("restamp", "stamp new send times instead of the logged ones");
  parser.AddFlag("paused", "start paused (Space or s to go on)");
  parser.AddFlag("quiet", "no progress bar");
  return parser;
}

int RunReplayCommand(const ParsedArgs& args, std::ostream& out,
                     std::ostream& err) {
  const char* cmd = "tether replay";
  log::RealtimeReplayOptions options;
  if (!RootInstanceFrom(args, "tether replay", &options.channels, err)) return kExitUsage;
  for (absl::string_view p :
       absl::StrSplit(args.Option("channels"), ',', absl::SkipEmpty())) {
    options.select.emplace_back(p);
  }
  for (const std::string& r : args.PositionalList("remap")) {
    absl::StatusOr<std::pair<std::string, std::string>> remap = log::ParseRemap(r);
    if (!remap.ok()) {
      err << cmd << ": " << remap.status().message() << "\n";
      return kExitUsage;
    }
    options.remaps.push_back(*remap);
  }
  if (!ParseRangeOption(args, cmd, "rate", log::kMinReplayRate,
                        log::kMaxReplayRate, &options.rate, err)) {
    return kExitUsage;
  }
  if (!ParseStartEndOptions(args, cmd, &options.start_s, &options.end_s, err)) {
    return kExitUsage;
  }
  uint64_t spin_us = 0;
  if (!ParseCountOption(args, cmd, "spin-us", &spin_us, err)) return kExitUsage;
  options.spin = std::chrono::microseconds(spin_us);
  options.loop = args.Flag("loop");
  options.restamp = args.Flag("restamp");
  options.start_paused = args.Flag("paused");
  if (options.start_paused && ::isatty(STDIN_FILENO) != 1) {
    // Nothing could ever unpause it: the keys are read from a terminal.
    err << cmd << ": --paused needs stdin to be a terminal (Space plays, s "
                  "steps); stdin is not one here, so the replay would never "
                  "start\n";
    return kExitUsage;
  }

  // The stop handler comes after the setup: it only sets a flag that the
  // run polls, so a SIGTERM or Ctrl-C during the setup (reading a large log,
  // or anything that blocks there) keeps its default action and ends the
  // process at once.
  absl::StatusOr<std::unique_ptr<log::RealtimeReplay>> replay =
      log::RealtimeReplay::Create(args.Positional("file"), options);
  if (!replay.ok()) {
    err << cmd << ": " << replay.status().message() << "\n";
    return kExitFailure;
  }
  StopFn stop;
  std::shared_ptr<void> guard = InstallStop(cmd, &stop, err);
  if (guard == nullptr) return kExitFailure;
  log::RealtimeReplay& r = **replay;
  for (const std::string& n : r.notes()) err << cmd << ": " << n << "\n";
  err << cmd << ": replaying " << r.channels().size() << " channels into "
      << options.channels.root << "/" << options.channels.instance << ":\n";
  for (const log::ReplayedChannel& c : r.channels()) {
    err << "  " << c.logged_name
        << (c.name != c.logged_name ? " -> " + c.name : std::string())
        << "  (" << c.type_name << (c.created ? ", created" : ", existing")
        << ")\n";
  }
  std::atomic<bool> quit{false};
  absl::Status result;
  std::thread worker([&] {
    result = r.Run([&] { return quit.load() || stop(); });
  });
  const bool bar = !args.Flag("quiet") && ::isatty(STDERR_FILENO) == 1;
  RawTerminal keys;
  auto last_print = std::chrono::steady_clock::now();
  while (!r.progress().done) {
    const char c = keys.active() ? keys.Poll(100) : 0;
    if (!keys.active()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    switch (c) {
      case ' ':
        r.TogglePause();
        break;
      case 's':
        r.Step();
        break;
      case '+':
        r.SetRate(r.progress().rate * 2);
        break;
      case '-':
        r.SetRate(r.progress().rate / 2);
        break;
      case 'q':
        quit = true;
        break;
      default:
        break;
    }
    const auto now = std::chrono::steady_clock::now();
    if (bar) {
      err << "\r\x1b[K" << Bar(r.progress(), keys.active()) << std::flush;
    } else if (!args.Flag("quiet") && now - last_print >= std::chrono::seconds(10)) {
      err << cmd << ": " << Bar(r.progress(), false) << "\n";
      last_print = now;
    }
  }
  worker.join();
  if (bar) err << "\r\x1b[K";
  const log::ReplayProgress p = r.progress();
  for (const std::string& n : r.notes()) err << cmd << ": " << n << "\n";
  // Why it ended: the end of the range, or asked to stop before it (a
  // signal, or q). A replay cut short is not a replay of the log: a script
  // that runs `tether replay log && check` must not check half of it.
  const bool signalled = stop();
  const bool cut_short = (signalled || quit.load()) && !options.loop;
  if (options.loop) {
    out << absl::StrFormat(
        "replayed %u messages in %d rounds of %.2f s (the last stopped at "
        "+%.2f s)\n",
        p.messages, p.round + 1, p.duration_ns / 1e9, p.position_ns / 1e9);
  } else if (cut_short) {
    out << absl::StrFormat(
        "stopped (%s) at +%.2f s of %.2f s: replayed %u messages; the rest of "
        "the log was not played\n",
        signalled ? "signal" : "q", p.position_ns / 1e9, p.duration_ns / 1e9,
        p.messages);
  } else {
    out << absl::StrFormat("replayed %u messages (%.2f s of log)\n",
                           p.messages, p.position_ns / 1e9);
  }
  if (p.malformed > 0) {
    // Bytes no typed reader would take: kept out of the live stack.
    err << cmd << ": skipped " << p.malformed
        << " messages that are not valid Cap'n Proto messages (they fail the "
           "check every typed reader makes; `tether log check` lists them):\n";
    for (const log::MalformedMessages& m : r.malformed()) {
      err << absl::StrFormat("  %s: %u, the first at %.3f s: %s\n", m.name,
                             m.count, m.first_s, m.why);
    }
  }
  if (!result.ok()) {
    err << cmd << ": " << result.message() << " (" << p.failed
        << " messages not published)\n";
    return kExitFailure;
  }
  if (p.malformed > 0) return kExitFailure;
  if (p.damaged > 0) {
    // Messages in the parts that could not be read were not replayed.
    err << cmd << ": the log is damaged in " << p.damaged
        << " place(s) (above): their messages were not replayed; `tether log "
           "check` says what is lost, `tether log recover` keeps what is "
           "intact\n";
    return kExitFailure;
  }
  // 128 + SIGINT, as a shell reports a command Ctrl-C ended.
  return cut_short && signalled ? kExitInterrupted : kExitOk;
}

}  // namespace tether::tools
