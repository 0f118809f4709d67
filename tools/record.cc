#include "tools/record.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "log/logger.h"
#include "tools/channel_tool.h"
#include "tools/cli.h"

namespace tether::tools {
namespace {

std::string Megabytes(uint64_t bytes) {
  return absl::StrFormat("%.2f MB", bytes / 1e6);
}

std::string DefaultPath(const std::string& instance) {
  const time_t now = ::time(nullptr);
  struct tm tm;
  localtime_r(&now, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y%m%d-%H%M%S", &tm);
  return absl::StrCat("tether_", instance, "_", buf, ".mcap");
}

std::string StatusLine(const log::LoggerStats& s, double seconds,
                       double mb_per_s) {
  return absl::StrFormat(
      "recording %6.1f s  %9u msgs  %10s  %6.2f MB/s  missed %u  %u channels  "
      "file %s",
      seconds, s.messages, Megabytes(s.bytes), mb_per_s, s.missed,
      s.channels.size(), Megabytes(s.file_bytes));
}

}  // namespace

ArgParser RecordParser() {
  ArgParser parser(
      "tether record",
      "Records the channels of a stack instance into an MCAP file: every\n"
      "channel (or those given), including channels that appear while it\n"
      "runs, each message with its send times, publisher, sequence and\n"
      "receive time, and a record of every message it missed (shown live and\n"
      "written into the log). It adds no cost to publishers: it never sleeps\n"
      "on a channel's wake word and pins nothing; it copies out what arrived\n"
      "every --period on its own thread and compresses and writes on another.\n"
      "It warns about channels whose queue cannot hold two periods at their\n"
      "rate. Ctrl-C or SIGTERM finishes the file cleanly (summary and\n"
      "indexes, so standard MCAP tools open it indexed); a file whose\n"
      "recorder was killed keeps every closed chunk (tether log recover).\n"
      "As a stack node: {\"name\": \"recorder\", \"command\":\n"
      "\"bazel-bin/tools/tether\", \"args\": [\"record\", \"--out\", ...]}\n"
      "(--root/--instance then default to the launcher's).");
  AddRootInstanceOptions(parser);
  parser.AddOption("out", "FILE",
                   "output file (default: tether_<instance>_<time>.mcap)");
  parser.AddOption("channels", "LIST",
                   "comma-separated channel names or globs ('*' matches '/' "
                   "too); default: all");
  parser.AddOption("exclude", "LIST", "channel names or globs to leave out");
  parser.AddOption("period", "MS", "drain period in milliseconds", "10");
  parser.AddOption("duration", "SECONDS", "stop after this long");
  parser.AddOption("split-size", "MB", "start a new file every this many MB");
  parser.AddOption("split-duration", "SECONDS",
                   "start a new file every this many seconds");
  parser.AddOption("compression", "NAME", "zstd or none", "zstd");
  parser.AddOption("level", "N", "zstd level (1 fast .. 19 small)", "1");
  parser.AddOption("chunk-size", "KB", "uncompressed chunk size", "1024");
  parser.AddOption("status-interval", "SECONDS",
                   "when stderr is not a terminal, print the status every "
                   "this often",
                   "10");
  parser.AddFlag("from-oldest",
                 "also record what is still in each channel's queue at start");
  parser.AddFlag("force", "overwrite an existing output file");
  parser.AddFlag("quiet", "no status line, only the final summary");
  return parser;
}

int RunRecordCommand(const ParsedArgs& args, std::ostream& out,
                     std::ostream& err) {
  const char* cmd = "tether record";
  log::LoggerOptions options;
  if (!RootInstanceFrom(args, "tether record", &options.channels, err)) return kExitUsage;
  options.path = args.HasOption("out") ? args.Option("out")
                                       : DefaultPath(options.channels.instance);
  options.overwrite = args.Flag("force");
  for (absl::string_view p :
       absl::StrSplit(args.Option("channels"), ',', absl::SkipEmpty())) {
    options.include.emplace_back(p);
  }
  for (absl::string_view p :
       absl::StrSplit(args.Option("exclude"), ',', absl::SkipEmpty())) {
    options.exclude.emplace_back(p);
  }
  double period_ms = 0;
  if (!ParsePositiveOption(args, cmd, "period", &period_ms, err)) {
    return kExitUsage;
  }
  options.period = std::chrono::nanoseconds(static_cast<int64_t>(period_ms * 1e6));
  options.from_oldest = args.Flag("from-oldest");
  absl::StatusOr<log::Compression> compression =
      log::ParseCompression(args.Option("compression"));
  if (!compression.ok()) {
    err << cmd << ": --compression: " << compression.status().message() << "\n";
    return kExitUsage;
  }
  options.mcap.compression = *compression;
  uint64_t level = 0, chunk_kb = 0;
  if (!ParseCountOption(args, cmd, "level", &level, err) ||
      !ParseCountOption(args, cmd, "chunk-size", &chunk_kb, err)) {
    return kExitUsage;
  }
  if (level < 1 || level > 19) {
    err << cmd << ": --level " << level
        << ": zstd levels are 1 (fast) to 19 (small)\n";
    return kExitUsage;
  }
  if (chunk_kb < 1) {
    err << cmd << ": --chunk-size must be at least 1 KB (default 1024)\n";
    return kExitUsage;
  }
  options.mcap.zstd_level = static_cast<int>(level);
  options.mcap.chunk_size = chunk_kb * 1024;
  double value = 0;
  if (args.HasOption("split-size")) {
    if (!ParsePositiveOption(args, cmd, "split-size", &value, err)) {
      return kExitUsage;
    }
    options.split_bytes = static_cast<uint64_t>(value * 1e6);
  }
  if (args.HasOption("split-duration")) {
    if (!ParsePositiveOption(args, cmd, "split-duration", &value, err)) {
      return kExitUsage;
    }
    options.split_duration =
        std::chrono::nanoseconds(static_cast<int64_t>(value * 1e9));
  }
  double duration_s = 0;
  if (args.HasOption("duration") &&
      !ParsePositiveOption(args, cmd, "duration", &duration_s, err)) {
    return kExitUsage;
  }
  double status_interval = 0;
  if (!ParsePositiveOption(args, cmd, "status-interval", &status_interval, err)) {
    return kExitUsage;
  }
  options.recording_metadata["recorder"] = "tether record";

  // The stop handler comes after the start: it only sets a flag that the
  // loop below polls, so a SIGTERM or Ctrl-C while the logger starts
  // (opening the file and the channels) keeps its default action and ends
  // the process at once.
  absl::StatusOr<std::unique_ptr<log::Logger>> logger =
      log::Logger::Start(options);
  if (!logger.ok()) {
    err << cmd << ": " << logger.status().message() << "\n";
    return kExitFailure;
  }
  // A second Ctrl-C kills the recorder before it finishes the file: it says
  // which file and how to repair it.
  const bool splitting =
      options.split_bytes > 0 || options.split_duration.count() > 0;
  const std::string unfinished =
      splitting ? absl::StrCat("the last of ",
                               log::SplitFileName(options.path, true, 0),
                               ", ... (the highest number)")
                : options.path;
  const std::string repair = splitting ? "FILE" : options.path;
  StopFn stop;
  std::shared_ptr<void> guard = InstallStop(
      cmd, &stop, err,
      absl::StrCat("\n", cmd, ": stopped by a second signal: ", unfinished,
                   " is unfinished (no summary; its last second may be "
                   "lost); `tether log recover ",
                   repair, " FIXED.mcap` makes a complete copy\n"));
  if (guard == nullptr) return kExitFailure;
  const bool tty = ::isatty(STDERR_FILENO) == 1 && !args.Flag("quiet");
  const bool quiet = args.Flag("quiet");
  {
    const log::LoggerStats s = (*logger)->stats();
    err << cmd << ": recording " << s.channels.size() << " channels of "
        << options.channels.root << "/" << options.channels.instance
        << " into " << s.files.front() << " (Ctrl-C to stop)\n";
    if (s.channels.empty()) {
      err << cmd << ": no channels yet; new ones are picked up as they "
                    "appear\n";
    }
  }
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  Clock::time_point last_status = start;
  uint64_t last_bytes = 0;
  Clock::time_point last_rate = start;
  double rate = 0;
  bool line_open = false;
  auto flush_notices = [&] {
    for (const std::string& n : (*logger)->TakeNotices()) {
      if (line_open) err << "\r\x1b[K";
      line_open = false;
      err << cmd << ": " << n << "\n";
    }
  };
  flush_notices();
  while (!stop()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    flush_notices();
    const Clock::time_point now = Clock::now();
    const double elapsed = std::chrono::duration<double>(now - start).count();
    if (duration_s > 0 && elapsed >= duration_s) break;
    if ((*logger)->failed()) break;
    const double since_rate = std::chrono::duration<double>(now - last_rate).count();
    const log::LoggerStats s = (*logger)->stats();
    if (since_rate >= 1.0) {
      rate = (s.bytes - last_bytes) / 1e6 / since_rate;
      last_bytes = s.bytes;
      last_rate = now;
    }
    if (tty && now - last_status >= std::chrono::milliseconds(500)) {
      err << "\r\x1b[K" << StatusLine(s, elapsed, rate) << std::flush;
      line_open = true;
      last_status = now;
    } else if (!tty && !quiet &&
               std::chrono::duration<double>(now - last_status).count() >=
                   status_interval) {
      err << cmd << ": " << StatusLine(s, elapsed, rate) << "\n";
      last_status = now;
    }
  }
  if (line_open) err << "\r\x1b[K";
  const absl::Status stopped = (*logger)->Stop();
  flush_notices();
  const log::LoggerStats s = (*logger)->stats();
  const double elapsed =
      std::chrono::duration<double>(Clock::now() - start).count();
  // What the files hold: messages of chunks that reached them whole. Those
  // read but lost to a write error are counted apart (UNWRITTEN).
  const bool lost = s.unwritten > 0 || !stopped.ok();
  size_t w = 7, tw = 4;
  for (const log::LoggerChannelStats& c : s.channels) {
    w = std::max(w, c.name.size());
    tw = std::max(tw, c.type_name.size());
  }
  out << absl::StrFormat("%-*s  %-*s  %10s  %10s  %8s%s\n", w, "CHANNEL", tw,
                         "TYPE", "MESSAGES", "BYTES", "MISSED",
                         lost ? "   UNWRITTEN" : "");
  for (const log::LoggerChannelStats& c : s.channels) {
    out << absl::StrFormat(
        "%-*s  %-*s  %10u  %10s  %8u%s\n", w, c.name, tw, c.type_name,
        c.written, Megabytes(c.written_bytes), c.missed,
        lost ? absl::StrFormat("  %10u", c.unwritten) : std::string());
  }
  out << absl::StrFormat(
      "recorded %u messages (%s%s) in %.1f s into %s (%s on disk)\n", s.written,
      Megabytes(s.written_bytes),
      lost ? absl::StrFormat(", in %u whole chunks", s.chunks) : "", elapsed,
      absl::StrJoin(s.files, ", "), Megabytes(s.file_bytes));
  if (s.unwritten > 0) {
    out << absl::StrFormat(
        "LOST %u messages to the write error: read from the channels but in "
        "no file (UNWRITTEN above)\n",
        s.unwritten);
  }
  if (s.missed > 0) {
    out << absl::StrFormat(
        "missed %u messages; %s (/tether/log/gaps; see "
        "tether log info)\n",
        s.missed,
        lost ? "the loss records written before the error "
               "are in the log"
             : "each loss is recorded in the log");
  }
  if (!stopped.ok()) {
    err << cmd << ": " << stopped.message() << "\n";
    const std::string& last = s.files.empty() ? options.path : s.files.back();
    if (s.written > 0) {
      err << cmd << ": the " << s.written << " messages recorded above are "
          << "readable in " << absl::StrJoin(s.files, ", ") << " as "
          << (s.files.size() > 1 ? "they are" : "it is") << "; `tether log "
          << "recover " << last << " FIXED.mcap` makes a complete copy"
          << (s.files.size() > 1 ? " of the last" : "") << "\n";
    } else {
      err << cmd << ": no recorded message reached " << last
          << " before the error: it holds none\n";
    }
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace tether::tools
