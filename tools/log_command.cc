#include "tools/log_command.h"

#include <fnmatch.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "log/log_check.h"
#include "log/log_info.h"
#include "log/log_plot.h"
#include "log/log_reader.h"
#include "log/log_recover.h"
#include "log/mcap_writer.h"
#include "tools/channel_tool.h"
#include "tools/cli.h"
#include "transport/dynamic.h"
#include "util/json_writer.h"

namespace tether::tools {
namespace {

struct LogSubcommand {
  std::string_view name;
  std::string_view summary;
  ArgParser (*make_parser)();
  int (*run)(const ParsedArgs&, std::ostream&, std::ostream&);
};

// Channel names or globs from a comma-separated option.
std::vector<std::string> Patterns(const std::string& list) {
  std::vector<std::string> out;
  for (absl::string_view p : absl::StrSplit(list, ',', absl::SkipEmpty())) {
    out.emplace_back(p);
  }
  return out;
}

bool Matches(const std::vector<std::string>& patterns, const std::string& name) {
  if (patterns.empty()) return true;
  return std::any_of(patterns.begin(), patterns.end(), [&](const std::string& p) {
    return ::fnmatch(p.c_str(), name.c_str(), 0) == 0;
  });
}

// --- info -------------------------------------------------------------------

ArgParser InfoParser() {
  ArgParser p("tether log info",
              "Shows a log's duration, start time, compression, and per\n"
              "channel its type, message count, rate, bytes and messages\n"
              "missed while recording (from the loss records). Damage found\n"
              "while reading is listed with file offsets.");
  p.AddPositional("file", "the MCAP log");
  p.AddFlag("json", "print one JSON object");
  p.AddFlag("scan",
            "read the data section by scanning, not through the "
            "summary's chunk indexes (when an index is damaged)");
  return p;
}

int RunInfo(const ParsedArgs& args, std::ostream& out, std::ostream& err) {
  log::LogInfoOptions options;
  options.scan = args.Flag("scan");
  absl::StatusOr<log::LogInfo> info =
      log::ComputeLogInfo(args.Positional("file"), options);
  if (!info.ok()) {
    err << "tether log info: " << info.status().message() << "\n";
    return kExitFailure;
  }
  out << (args.Flag("json") ? log::FormatLogInfoJson(*info)
                            : log::FormatLogInfo(*info));
  return kExitOk;
}

// --- cat --------------------------------------------------------------------

ArgParser CatParser() {
  ArgParser p("tether log cat",
              "Prints a log's messages in send-time order, decoded to JSON\n"
              "through the schemas the log carries (no compiled types\n"
              "needed): one line per message, \"<seconds> <channel> <json>\",\n"
              "or with --json one JSON object with the message's context.");
  p.AddPositional("file", "the MCAP log");
  p.AddOption("channels", "LIST", "comma-separated names or globs (default: all)");
  p.AddOption("start", "SECONDS", "skip messages sent before this (from the log's start)");
  p.AddOption("end", "SECONDS", "stop after messages sent at this time");
  p.AddOption("count", "N", "stop after N messages");
  p.AddFlag("json", "one JSON object per message, with send/receive times, "
                    "queue index and publisher");
  p.AddFlag("scan",
            "read the data section by scanning, not through the "
            "summary's chunk indexes (when an index is damaged)");
  return p;
}

int RunCat(const ParsedArgs& args, std::ostream& out, std::ostream& err) {
  const char* cmd = "tether log cat";
  absl::StatusOr<std::unique_ptr<log::LogReader>> reader =
      log::LogReader::Open(args.Positional("file"));
  if (!reader.ok()) {
    err << cmd << ": " << reader.status().message() << "\n";
    return kExitFailure;
  }
  log::LogReader& r = **reader;
  const std::vector<std::string> patterns = Patterns(args.Option("channels"));
  log::LogReadOptions o;
  for (const log::LogChannel& c : r.channels()) {
    if (Matches(patterns, c.name)) o.channels.insert(c.id);
  }
  if (o.channels.empty()) {
    err << cmd << ": no channel of the log matches " << args.Option("channels")
        << " (see tether log info)\n";
    return kExitFailure;
  }
  std::optional<double> start, end;
  if (!ParseStartEndOptions(args, cmd, &start, &end, err)) return kExitUsage;
  if (start) o.start_ns = r.start_ns() + static_cast<int64_t>(*start * 1e9);
  if (end) o.end_ns = r.start_ns() + static_cast<int64_t>(*end * 1e9);
  std::optional<uint64_t> count;  // none: every message
  if (args.HasOption("count")) {
    uint64_t n = 0;
    if (!ParseCountOption(args, cmd, "count", &n, err)) return kExitUsage;
    count = n;
  }
  const bool json = args.Flag("json");
  o.force_scan = args.Flag("scan");
  std::unique_ptr<log::LogCursor> cursor = r.Read(o);
  log::LogMessage m;
  uint64_t printed = 0;
  std::map<uint16_t, std::string> type_errors;
  while ((!count || printed < *count) && cursor->Next(&m)) {
    std::string body;
    absl::StatusOr<capnp::StructSchema> type = r.MessageType(*m.channel);
    if (type.ok()) {
      absl::StatusOr<std::string> j = transport::MessageToJson(*type, m.data);
      body = j.ok() ? *j
                    : absl::StrCat(
                          "{\"undecodable\":",
                          util::JsonQuote(std::string(j.status().message())),
                          ",\"bytes\":", m.data.size(), "}");
    } else {
      body = absl::StrCat("{\"undecodable\":",
                          util::JsonQuote(std::string(type.status().message())),
                          ",\"bytes\":", m.data.size(), "}");
    }
    const double t = (m.monotonic_send_ns - r.start_ns()) / 1e9;
    if (json) {
      out << absl::StrFormat(
          "{\"channel\":%s,\"time_s\":%.9f,\"monotonic_send_ns\":%d,"
          "\"realtime_send_ns\":%d,\"monotonic_receive_ns\":%d,"
          "\"queue_index\":%u,\"publisher_pid\":%u,\"publisher_sequence\":%u,"
          "\"message\":%s}\n",
          util::JsonQuote(m.channel->name), t, m.monotonic_send_ns,
          m.realtime_send_ns, m.monotonic_receive_ns, m.queue_index,
          m.publisher_pid, m.publisher_sequence, body);
    } else {
      out << absl::StrFormat("%.6f %s %s\n", t, m.channel->name, body);
    }
    ++printed;
  }
  out.flush();
  for (const log::McapProblem& p : cursor->problems()) {
    err << cmd << ": " << p.ToString() << "\n";
  }
  return cursor->problems().empty() ? kExitOk : kExitFailure;
}

// --- check ------------------------------------------------------------------

ArgParser CheckParser() {
  ArgParser p("tether log check",
              "Verifies a log end to end: every record, every chunk CRC,\n"
              "every message index against its chunk, the data section CRC,\n"
              "the summary (CRC, schema and channel copies, chunk indexes,\n"
              "statistics, summary offsets) against the data, every message\n"
              "of a Cap'n Proto channel decoded with its schema (what typed\n"
              "readers and replay need), and tether's own records. Prints\n"
              "what passed and every problem with its file offset. Exits 1\n"
              "if anything is wrong.");
  p.AddPositional("file", "the MCAP log");
  p.AddFlag("all", "print every problem (default: the first 50, in file order)");
  return p;
}

// A badly damaged file has a problem per record: the first ones say where
// the damage starts, the rest would bury them.
constexpr size_t kShownProblems = 50;

int RunCheck(const ParsedArgs& args, std::ostream& out, std::ostream& err) {
  absl::StatusOr<log::CheckReport> report = log::CheckLog(args.Positional("file"));
  if (!report.ok()) {
    err << "tether log check: " << report.status().message() << "\n";
    return kExitFailure;
  }
  for (const std::string& p : report->passed) out << "OK    " << p << "\n";
  for (const std::string& n : report->notes) out << "NOTE  " << n << "\n";
  const size_t shown = args.Flag("all")
                           ? report->problems.size()
                           : std::min(report->problems.size(), kShownProblems);
  for (size_t i = 0; i < shown; ++i) {
    out << "FAIL  " << report->problems[i].ToString() << "\n";
  }
  if (shown < report->problems.size()) {
    out << "FAIL  ... and " << report->problems.size() - shown
        << " more problems after these (--all prints every one)\n";
  }
  // Recovering rewrites damaged files; it cannot mend messages that were
  // recorded undecodable.
  const bool file_damaged =
      report->problems.size() > report->undecodable_problems;
  out << absl::StrFormat("%u messages in %u chunks; %u problems%s%s\n",
                         report->messages, report->chunks,
                         report->problems.size(),
                         report->undecodable_messages > 0
                             ? absl::StrFormat(" (%u messages that do not "
                                               "decode)",
                                               report->undecodable_messages)
                             : "",
                         file_damaged ? " (`tether log recover IN OUT` "
                                        "rewrites every intact chunk)"
                                      : "");
  return report->ok() ? kExitOk : kExitFailure;
}

// --- recover ----------------------------------------------------------------

ArgParser RecoverParser() {
  ArgParser p("tether log recover",
              "Rewrites a damaged or unfinished log (its recorder was killed,\n"
              "the copy is truncated, chunks are corrupt) as a complete,\n"
              "indexed file: every message of every intact chunk, with its\n"
              "context, the channels, schemas and metadata, and a summary of\n"
              "what was recovered. Lists what could not be, with offsets.");
  p.AddPositional("in", "the damaged log");
  p.AddPositional("out", "the file to write");
  p.AddFlag("force", "overwrite OUT if it exists");
  return p;
}

int RunRecover(const ParsedArgs& args, std::ostream& out, std::ostream& err) {
  log::McapWriterOptions o;
  o.overwrite = args.Flag("force");
  absl::StatusOr<log::RecoverReport> r =
      log::RecoverLog(args.Positional("in"), args.Positional("out"), o);
  if (!r.ok()) {
    err << "tether log recover: " << r.status().message() << "\n";
    return kExitFailure;
  }
  for (const log::McapProblem& p : r->problems) {
    out << "damage: " << p.ToString() << "\n";
  }
  out << absl::StrFormat(
      "recovered %u messages on %u channels from %u chunks into %s%s\n",
      r->messages, r->channels, r->chunks_read, args.Positional("out"),
      r->input_was_complete ? " (the input was already complete)" : "");
  if (r->orphans > 0) {
    // Intact messages that the written log cannot hold: not a recovery.
    err << "tether log recover: " << r->orphans
        << " intact messages were left out because their channel records "
           "are damaged; "
        << args.Positional("out")
        << " does not hold them (keep the input: it still does)\n";
    return kExitFailure;
  }
  return kExitOk;
}

// --- plot -------------------------------------------------------------------

ArgParser PlotParser() {
  ArgParser p("tether log plot",
              "Draws numeric fields of a log's messages over time as a PNG, one\n"
              "panel per field on a shared time axis (seconds from the log's\n"
              "start), decoded through the schemas the log carries. A field is\n"
              "CHANNEL.path: /robot/imu.angularVelocity.z, or name[i] for list\n"
              "elements. The line breaks where messages are missing (a red\n"
              "mark), and each panel says how many were missed.");
  p.AddPositional("file", "the MCAP log");
  p.AddPositionalList("field", "fields to plot, CHANNEL.path", /*required=*/true);
  p.AddOption("out", "PNG", "output image", "plot.png");
  p.AddOption("start", "SECONDS", "from this far into the log");
  p.AddOption("end", "SECONDS", "to this far into the log");
  p.AddOption("width", "PIXELS", "image width", "1400");
  p.AddFlag("force", "overwrite OUT even if it is not a PNG image");
  return p;
}

int RunPlot(const ParsedArgs& args, std::ostream& out, std::ostream& err) {
  const char* cmd = "tether log plot";
  absl::StatusOr<std::unique_ptr<log::LogReader>> reader =
      log::LogReader::Open(args.Positional("file"));
  if (!reader.ok()) {
    err << cmd << ": " << reader.status().message() << "\n";
    return kExitFailure;
  }
  log::PlotRange range;
  if (!ParseStartEndOptions(args, cmd, &range.start_s, &range.end_s, err)) {
    return kExitUsage;
  }
  uint64_t width = 0;
  if (!ParseCountOption(args, cmd, "width", &width, err)) return kExitUsage;
  if (width < 300 || width > 20000) {
    err << cmd << ": --width must be 300..20000 pixels\n";
    return kExitUsage;
  }
  absl::StatusOr<std::vector<log::PlotSeries>> series =
      log::ReadPlotSeries(**reader, args.PositionalList("field"), range);
  if (!series.ok()) {
    err << cmd << ": " << series.status().message() << "\n";
    return kExitUsage;
  }
  // An empty picture would look like a flat signal: say what is there.
  if (std::all_of(series->begin(), series->end(),
                  [](const log::PlotSeries& s) { return s.value.empty(); })) {
    const log::LogReader& r = **reader;
    err << cmd << ": no message with "
        << (series->size() == 1 ? "that field" : "those fields")
        << absl::StrFormat(" was sent in %s (the log spans 0 to %.3f s): ",
                           range.start_s || range.end_s
                               ? absl::StrFormat(
                                     "%.3f to %s s", range.start_s.value_or(0),
                                     range.end_s ? absl::StrFormat("%.3f", *range.end_s)
                                                 : std::string("the end"))
                               : std::string("the log"),
                           (r.end_ns() - r.start_ns()) / 1e9)
        << "choose --start/--end inside it, or see `tether log info` for "
           "which channels have messages; nothing written\n";
    return kExitFailure;
  }
  const std::string& png = args.Option("out");
  if (absl::Status s =
          log::CheckOutputIsNotInput(args.Positional("file"), png, "plot");
      !s.ok()) {
    err << cmd << ": " << s.message() << "\n";
    return kExitUsage;
  }
  // Drawing again over an earlier plot is the common case; anything else
  // at OUT (a log, a typo'd path) is kept unless asked.
  if (std::ifstream existing(png, std::ios::binary);
      existing && !args.Flag("force")) {
    char magic[8] = {};
    existing.read(magic, sizeof(magic));
    if (std::memcmp(magic, "\x89PNG\r\n\x1a\n", 8) != 0) {
      err << cmd << ": " << png
          << " exists and is not a PNG image: give another --out, or "
             "--force to overwrite it\n";
      return kExitUsage;
    }
  }
  log::PlotOptions options;
  options.width = static_cast<int>(width);
  options.title = args.Positional("file");
  const log::Image image = log::RenderPlot(*series, options);
  if (absl::Status s = image.WritePng(png); !s.ok()) {
    err << cmd << ": " << s.message() << "\n";
    return kExitFailure;
  }
  for (const log::PlotSeries& s : *series) {
    out << absl::StrFormat("%s: %u samples%s\n", s.field, s.value.size(),
                           s.missed > 0 ? absl::StrFormat(", %u missed", s.missed)
                                        : "");
  }
  out << "wrote " << args.Option("out") << " (" << image.width() << "x"
      << image.height() << ")\n";
  return kExitOk;
}

constexpr LogSubcommand kLogCommands[] = {
    {"info", "duration, channels with type, count, rate, bytes, missed; "
             "compression",
     &InfoParser, &RunInfo},
    {"cat", "messages as JSON via the log's own schemas", &CatParser, &RunCat},
    {"check", "verify CRCs, indexes and summary; list damage with offsets",
     &CheckParser, &RunCheck},
    {"recover", "rewrite a damaged or unfinished log complete", &RecoverParser,
     &RunRecover},
    {"plot", "draw numeric fields over time as a PNG", &PlotParser, &RunPlot},
};

std::string LogHelp() {
  std::ostringstream s;
  s << "usage: tether log <command> [args...]\n\n"
       "Tools for tether's MCAP logs (made by tether record).\n\ncommands:\n";
  for (const LogSubcommand& c : kLogCommands) {
    s << absl::StrFormat("  %-8s %s\n", std::string(c.name), std::string(c.summary));
  }
  s << "\nRun `tether log <command> --help` for a command's options.\n";
  return s.str();
}

}  // namespace

ArgParser LogParser() {
  std::string description = "Tools for tether's MCAP logs:\n";
  for (const LogSubcommand& c : kLogCommands) {
    absl::StrAppendFormat(&description, "  tether log %-8s %s\n",
                          std::string(c.name), std::string(c.summary));
  }
  return ArgParser("tether log", description);
}

int RunLogCommand(const ParsedArgs&, std::ostream& out, std::ostream&) {
  out << LogHelp();
  return kExitOk;
}

int RunLogCli(std::span<const std::string> args, std::ostream& out,
              std::ostream& err) {
  if (args.empty()) {
    err << LogHelp();
    return kExitUsage;
  }
  const std::string& first = args[0];
  if (first == "--help" || first == "-h" || first == "help") {
    out << LogHelp();
    return kExitOk;
  }
  for (const LogSubcommand& c : kLogCommands) {
    if (c.name != first) continue;
    const ArgParser parser = c.make_parser();
    absl::StatusOr<ParsedArgs> parsed = parser.Parse(args.subspan(1));
    if (!parsed.ok()) {
      err << "tether log " << c.name << ": " << parsed.status().message() << "\n";
      return kExitUsage;
    }
    if (parsed->help_requested()) {
      out << parser.Help();
      return kExitOk;
    }
    return c.run(*parsed, out, err);
  }
  err << "tether log: unknown command '" << first << "'\n\n" << LogHelp();
  return kExitUsage;
}

}  // namespace tether::tools
