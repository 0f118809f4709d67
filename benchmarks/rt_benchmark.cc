// tether on a PREEMPT_RT kernel: the deadline experiment and wakes under
// contention (rt_deadlines.h, rt_contention.h), as markdown tables and
// --json. Runs on any Linux with SCHED_FIFO (root); the numbers mean most on
// a PREEMPT_RT kernel on bare metal (a Jetson, a PC); ./tether rt-lab runs
// it in an emulated guest, where only effects of >= 300 us show.
//
//   bazel run -c opt //benchmarks:rt_benchmark -- [deadlines|contention|all]
//       [--quick] [--json FILE] [--seconds S] [--cpu N] [--pub-cpu N]
//       [--sub-cpu N] [--churners N] [--mechanisms a,b,...]
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "benchmarks/rt_contention.h"
#include "benchmarks/rt_deadlines.h"
#include "benchmarks/rt_report.h"
#include "loop/kernel_probe.h"
#include "loop/make_wake_port.h"
#include "util/json_writer.h"

namespace tether::bench {
namespace {

constexpr char kUsage[] =
    "usage: rt_benchmark [deadlines|contention|all] [--quick] [--json FILE]\n"
    "    [--seconds S] [--rounds N] [--cpu N] [--pub-cpu N] [--sub-cpu N]\n"
    "    [--churners N] [--burst-priority P]\n"
    "    [--deadline-timer auto|ring_wait|hard] [--mechanisms KEY,...]\n"
    "\n"
    "deadlines   a SCHED_FIFO 40 loop with a 500 us phased loop beside a\n"
    "            SCHED_FIFO 20 thread running 50-1000 us bursts on the same CPU\n"
    "            (--cpu, default the last one): for each deadline mode of\n"
    "            tether and clock_nanosleep (the floor): wakeups late by\n"
    "            > 100 us and > 300 us, deadlines missed, p50/p99/max.\n"
    "            --seconds: per mode (default 2; --quick 0.5).\n"
    "contention  a SCHED_FIFO 80 publisher (--pub-cpu, default 0) sends every\n"
    "            500 us to a SCHED_FIFO 80 subscriber loop (--sub-cpu, default\n"
    "            1) while --churners (default 4) SCHED_OTHER processes publish\n"
    "            and subscribe on the same channel every 200 us, each living\n"
    "            50-300 ms, beside SCHED_FIFO 50 bursts on both CPUs: for each\n"
    "            wake mechanism (--mechanisms: tether_uring_futex,\n"
    "            tether_futex_waitv, raw_futex, raw_futex_split,\n"
    "            raw_futex_rt_wakes, msg_ring):\n"
    "            real-time deliveries late by > 100 us, p50/p99/longest, lost,\n"
    "            and the publisher's time inside Send. --seconds: per\n"
    "            mechanism (default 4; --quick 1.5). --churners 0 and\n"
    "            --burst-priority 0 (no bursts) take the load away, for a\n"
    "            baseline; --deadline-timer sets the tether loops' deadline\n"
    "            mode (default auto: what a loop picks here).\n"
    "all         both (the default).\n"
    "--rounds N  rounds that alternate the modes or mechanisms (default 4;\n"
    "            --quick 3), so that a noisy stretch hits them alike.\n"
    "--json FILE also writes the results as one JSON object.\n"
    "Needs SCHED_FIFO (root, or CAP_SYS_NICE / RLIMIT_RTPRIO >= 80).\n";

struct Args {
  bool deadlines = true;
  bool contention = true;
  bool quick = false;
  std::string json;
  double seconds = 0;  // 0: the default for the mode
  int rounds = 0;      // 0: the default (4; --quick 3)
  int cpu = -1;
  int pub_cpu = 0;
  int sub_cpu = 1;
  int churners = 4;
  int burst_priority = 50;
  loop::DeadlineTimer deadline_timer = loop::DeadlineTimer::kAuto;
  std::vector<std::string> mechanisms;
};

[[noreturn]] void Usage(const std::string& error) {
  std::fprintf(stderr, "rt_benchmark: %s\n%s", error.c_str(), kUsage);
  std::exit(2);
}

int IntArg(const char* name, const char* value) {
  int v = 0;
  if (value == nullptr || !absl::SimpleAtoi(value, &v) || v < 0) {
    Usage(std::string(name) + " needs a non-negative integer");
  }
  return v;
}

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const char* next = i + 1 < argc ? argv[i + 1] : nullptr;
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (arg == "deadlines") {
      a.contention = false;
    } else if (arg == "contention") {
      a.deadlines = false;
    } else if (arg == "all") {
    } else if (arg == "--quick") {
      a.quick = true;
    } else if (arg == "--json") {
      if (next == nullptr) Usage("--json needs a file");
      a.json = argv[++i];
    } else if (arg == "--seconds") {
      if (next == nullptr || !absl::SimpleAtod(next, &a.seconds) ||
          !(a.seconds > 0 && a.seconds <= 3600)) {
        Usage("--seconds needs a number in (0, 3600]");
      }
      ++i;
    } else if (arg == "--rounds") {
      a.rounds = IntArg("--rounds", next);
      if (a.rounds < 1 || a.rounds > 100) Usage("--rounds: 1 to 100");
      ++i;
    } else if (arg == "--cpu") {
      a.cpu = IntArg("--cpu", next);
      ++i;
    } else if (arg == "--pub-cpu") {
      a.pub_cpu = IntArg("--pub-cpu", next);
      ++i;
    } else if (arg == "--sub-cpu") {
      a.sub_cpu = IntArg("--sub-cpu", next);
      ++i;
    } else if (arg == "--churners") {
      a.churners = IntArg("--churners", next);
      if (a.churners > 24) Usage("--churners: at most 24");
      ++i;
    } else if (arg == "--burst-priority") {
      a.burst_priority = IntArg("--burst-priority", next);
      if (a.burst_priority > 99) Usage("--burst-priority: 0 (none) to 99");
      ++i;
    } else if (arg == "--deadline-timer") {
      const std::string v = next != nullptr ? next : "";
      if (v == "auto") {
        a.deadline_timer = loop::DeadlineTimer::kAuto;
      } else if (v == "ring_wait") {
        a.deadline_timer = loop::DeadlineTimer::kRingWait;
      } else if (v == "hard") {
        a.deadline_timer = loop::DeadlineTimer::kHard;
      } else {
        Usage("--deadline-timer: auto, ring_wait or hard");
      }
      ++i;
    } else if (arg == "--mechanisms") {
      if (next == nullptr) Usage("--mechanisms needs a list");
      for (absl::string_view k : absl::StrSplit(next, ',', absl::SkipEmpty())) {
        bool known = false;
        for (const auto& [key, label] : ContentionMechanisms()) {
          known |= key == k;
        }
        if (!known) Usage("unknown mechanism " + std::string(k));
        a.mechanisms.emplace_back(k);
      }
      ++i;
    } else {
      Usage("unknown argument " + arg);
    }
  }
  return a;
}

loop::Duration Seconds(double s) {
  return loop::Duration(static_cast<int64_t>(s * 1e9));
}

std::string Count(int64_t part, int64_t whole) {
  return std::to_string(part) + " / " + std::to_string(whole);
}

}  // namespace

int Main(int argc, char** argv) {
  const Args args = Parse(argc, argv);
  const loop::KernelFeatures features = loop::ProbeKernel();
  const loop::DeadlineTimerChoice auto_choice =
      loop::ChooseDeadlineTimer(loop::DeadlineTimer::kAuto, features);
  std::printf("rt_benchmark on %s (%s), %ld CPUs%s\n",
              features.kernel_release.c_str(),
              features.preempt_rt ? "PREEMPT_RT" : "not PREEMPT_RT",
              ::sysconf(_SC_NPROCESSORS_ONLN),
              args.quick ? ", --quick" : "");
  std::printf("rt-probe this boot: %s\n\n",
              features.rt_probe.has_value()
                  ? std::string(loop::RingWaitTimerName(
                                    features.rt_probe->ring_wait))
                        .c_str()
                  : "none (run tether doctor --rt-probe)");
  util::JsonWriter json;
  json.BeginObject();
  json.Key("kernel").String(features.kernel_release);
  json.Key("preempt_rt").Bool(features.preempt_rt);
  json.Key("cpus").Int(::sysconf(_SC_NPROCESSORS_ONLN));
  json.Key("quick").Bool(args.quick);
  json.Key("rt_probe")
      .String(features.rt_probe.has_value()
                  ? std::string(
                        loop::RingWaitTimerName(features.rt_probe->ring_wait))
                  : "none");
  json.Key("default_deadline_mode")
      .String(auto_choice.hard ? "hard" : "ring_wait");
  json.Key("default_deadline_reason").String(auto_choice.reason);
  int rc = 0;

  if (args.deadlines) {
    DeadlineOptions o;
    o.cpu = args.cpu;
    o.rounds = args.rounds > 0 ? args.rounds : (args.quick ? 3 : 4);
    o.per_mode = Seconds(args.seconds > 0 ? args.seconds
                                          : (args.quick ? 0.5 : 2.0));
    std::fprintf(stderr, "rt_benchmark: deadlines: %.1f s per mode...\n",
                 o.per_mode.count() / 1e9);
    absl::StatusOr<DeadlineReport> r = RunDeadlines(o);
    if (!r.ok()) {
      std::fprintf(stderr, "rt_benchmark: deadlines: %s\n",
                   std::string(r.status().message()).c_str());
      json.Key("deadlines_error").String(std::string(r.status().message()));
      rc = 1;
    } else {
      std::printf(
          "## Deadlines: SCHED_FIFO 40 loop, 500 us period, beside SCHED_FIFO "
          "20 bursts of 50-1000 us on CPU %d (%d rounds)\n\n",
          r->cpu, o.rounds);
      std::vector<std::vector<std::string>> rows;
      json.Key("deadlines").BeginObject();
      json.Key("cpu").Int(r->cpu);
      json.Key("period_us").Int(500);
      json.Key("rows").BeginArray();
      for (const DeadlineRow& row : r->rows) {
        const loop::DeadlineStats& s = row.stats;
        rows.push_back({row.label + (row.key == "default"
                                         ? (row.hard ? " = hard timer"
                                                     : " = io_uring wait")
                                         : ""),
                        std::to_string(s.deadlines),
                        Count(s.late_100us, s.wakeups),
                        Count(s.late_300us, s.wakeups),
                        std::to_string(s.missed), Us(s.p50.count() / 1e3),
                        Us(s.p99.count() / 1e3), Us(s.max.count() / 1e3)});
        json.BeginObject();
        json.Key("key").String(row.key);
        json.Key("label").String(row.label);
        json.Key("hard").Bool(row.hard);
        json.Key("detail").String(row.detail);
        json.Key("deadlines").Int(s.deadlines);
        json.Key("wakeups").Int(s.wakeups);
        json.Key("late_100us").Int(s.late_100us);
        json.Key("late_300us").Int(s.late_300us);
        json.Key("missed").Int(s.missed);
        json.Key("p50_us").Double(s.p50.count() / 1e3);
        json.Key("p99_us").Double(s.p99.count() / 1e3);
        json.Key("max_us").Double(s.max.count() / 1e3);
        json.EndObject();
      }
      json.EndArray();
      json.EndObject();
      std::printf("%s\n",
                  MarkdownTable({"waiter", "deadlines", "late > 100 us",
                                 "late > 300 us", "missed", "p50 us",
                                 "p99 us", "max us"},
                                rows)
                      .c_str());
      std::printf("default: %s\n\n", auto_choice.reason.c_str());
    }
  }

  if (args.contention) {
    ContentionOptions o;
    o.duration = Seconds(args.seconds > 0 ? args.seconds
                                          : (args.quick ? 1.5 : 4.0));
    o.rounds = args.rounds > 0 ? args.rounds : (args.quick ? 3 : 4);
    o.rt_publisher_cpu = args.pub_cpu;
    o.rt_subscriber_cpu = args.sub_cpu;
    o.churners = args.churners;
    o.burst_priority = args.burst_priority;
    o.deadline_timer = args.deadline_timer;
    o.mechanisms = args.mechanisms;
    absl::StatusOr<std::vector<ContentionRow>> r = RunContention(o);
    if (!r.ok()) {
      std::fprintf(stderr, "rt_benchmark: contention: %s\n",
                   std::string(r.status().message()).c_str());
      json.Key("contention_error").String(std::string(r.status().message()));
      rc = 1;
    } else {
      std::printf(
          "## Wakes under contention: SCHED_FIFO 80 publisher (CPU %d) every "
          "500 us -> SCHED_FIFO 80 subscriber (CPU %d); %d SCHED_OTHER "
          "processes publishing and subscribing every 200 us (50-300 ms "
          "each); SCHED_FIFO 50 bursts on both CPUs; %.1f s each in %d "
          "rounds\n\n",
          o.rt_publisher_cpu, o.rt_subscriber_cpu, o.churners,
          o.duration.count() / 1e9, o.rounds);
      std::vector<std::vector<std::string>> rows;
      json.Key("contention").BeginObject();
      json.Key("churners").Int(o.churners);
      json.Key("rows").BeginArray();
      for (const ContentionRow& row : *r) {
        json.BeginObject();
        json.Key("key").String(row.key);
        json.Key("label").String(row.label);
        json.Key("ran").Bool(row.ran);
        json.Key("note").String(row.note);
        if (!row.ran) {
          rows.push_back({row.label, "not run: " + row.note, "", "", "", "",
                          "", "", "", ""});
          json.EndObject();
          continue;
        }
        rows.push_back({row.label, Count(row.rt_delivered, row.rt_sent),
                        std::to_string(row.lost),
                        std::to_string(row.delivery.over_100us),
                        std::to_string(row.delivery.over_300us),
                        Us(row.delivery.p50_us), Us(row.delivery.p99_us),
                        Us(row.delivery.max_us),
                        Us(row.send.p50_us) + " / " + Us(row.send.p99_us) +
                            " / " + Us(row.send.max_us),
                        std::to_string(row.churners_started)});
        json.Key("rt_sent").Int(row.rt_sent);
        json.Key("rt_delivered").Int(row.rt_delivered);
        json.Key("lost").Int(row.lost);
        json.Key("late_100us").Int(row.delivery.over_100us);
        json.Key("late_300us").Int(row.delivery.over_300us);
        json.Key("p50_us").Double(row.delivery.p50_us);
        json.Key("p99_us").Double(row.delivery.p99_us);
        json.Key("max_us").Double(row.delivery.max_us);
        json.Key("send_p50_us").Double(row.send.p50_us);
        json.Key("send_p99_us").Double(row.send.p99_us);
        json.Key("send_max_us").Double(row.send.max_us);
        json.Key("churners_started").Int(row.churners_started);
        json.Key("churn_sent").Int(row.churn_sent);
        json.EndObject();
        if (row.lost > 0) rc = 1;
      }
      json.EndArray();
      json.EndObject();
      std::printf("%s\n",
                  MarkdownTable({"mechanism", "RT delivered", "lost",
                                 "late > 100 us", "late > 300 us", "p50 us",
                                 "p99 us",
                                 "longest us",
                                 "RT Send p50 / p99 / max us",
                                 "churners started"},
                                rows)
                      .c_str());
    }
  }
  json.EndObject();
  if (!args.json.empty()) {
    std::ofstream out(args.json);
    out << json.str();  // Ends with a newline.
    if (!out) {
      std::fprintf(stderr, "rt_benchmark: cannot write %s\n", args.json.c_str());
      rc = 1;
    }
  }
  return rc;
}

}  // namespace tether::bench

int main(int argc, char** argv) { return tether::bench::Main(argc, argv); }
