#include "benchmarks/harness/session.h"

#include <algorithm>
#include <cstring>
#include "absl/strings/string_view.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace tether::bench {

const char* WriteModeName(WriteMode mode) {
  return mode == WriteMode::kFull ? "full" : "touch16";
}

const char* TestName(Test test) {
  switch (test) {
    case Test::kLatency:
      return "latency";
    case Test::kFanout:
      return "fanout";
    case Test::kThroughput:
      return "throughput";
  }
  return "?";
}

uint32_t Session::max_payload() const {
  uint32_t m = std::max(kMinPayload, throughput_payload);
  for (const Case& c : cases) m = std::max(m, c.payload);
  return m;
}

absl::StatusOr<std::vector<Case>> ParseCases(const std::string& text) {
  std::vector<Case> cases;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    std::vector<absl::string_view> f = absl::StrSplit(item, ':');
    Case c;
    if (f.size() < 2 || f.size() > 4 || !absl::SimpleAtoi(f[0], &c.payload) ||
        c.payload < kMinPayload) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--cases: bad case '", item,
          "'; want PAYLOAD:MODE[:SAMPLES[:WARMUP]] with PAYLOAD >= ",
          kMinPayload, " bytes, MODE touch16 or full"));
    }
    if (f[1] == "touch16") {
      c.mode = WriteMode::kTouch16;
    } else if (f[1] == "full") {
      c.mode = WriteMode::kFull;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "--cases: mode '", f[1], "' in '", item, "'; use touch16 or full"));
    }
    if ((f.size() > 2 && (!absl::SimpleAtoi(f[2], &c.samples) ||
                          c.samples < 1 || c.samples > kMaxSamples)) ||
        (f.size() > 3 && (!absl::SimpleAtoi(f[3], &c.warmup) || c.warmup < 0 ||
                          c.warmup > kMaxSamples))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--cases: counts in '", item, "': samples 1..", kMaxSamples,
          ", warm-up 0..", kMaxSamples));
    }
    cases.push_back(c);
  }
  if (cases.empty()) {
    return absl::InvalidArgumentError("--cases: no case given");
  }
  if (cases.size() > static_cast<size_t>(kMaxCases)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--cases: at most ", kMaxCases, " cases per session"));
  }
  return cases;
}

std::string UsageText(const std::string& system) {
  return absl::StrCat(
      "usage: ", system, " [FLAGS]\n\n",
      "One bench session of ", system,
      " (normally started by `./tether bench`).\n"
      "Results are JSON lines, one per case (see benchmarks/bench.py).\n\n"
      "  --test=latency|fanout|throughput   what to measure (latency)\n"
      "  --cases=P:MODE[:N[:W]],...         latency/fanout: payload bytes,\n"
      "                                     touch16|full, samples, warm-up\n"
      "  --variant=NAME                     system-specific variant\n"
      "  --spin_us=N                        tether: spin before sleeping\n"
      "  --queue_depth=N                    tether: channels' queueDepth (4)\n"
      "  --huge_pages=0|1                   tether: huge pages for large\n"
      "                                     channels (1)\n"
      "  --api=typed|raw                    tether, latency/fanout: typed\n"
      "                                     messages (typed) or raw bytes\n"
      "  --ping_cpu=N --pong_cpu=N          pin the processes (-1: no)\n"
      "  --pongs=N                          fanout: subscribers (1..16)\n"
      "  --phase_ms=N --start_rate=R --max_rate=R --payload=P\n"
      "                                     throughput: each rate's phase\n"
      "  --shm_root=DIR                     where shared memory files go\n"
      "  --timeout_s=N                      kill the session after N s\n"
      "  --case_budget_ms=N                 end a case after N ms (>= 30\n"
      "                                     samples; 0: never)\n"
      "  --out=FILE                         results file (default stdout)\n"
      "  --name=NAME                        system name in the results\n");
}

namespace {

bool Match(absl::string_view arg, absl::string_view flag, absl::string_view* v) {
  if (arg.size() <= flag.size() + 2 || arg.substr(0, 2) != "--" ||
      arg.substr(2, flag.size()) != flag || arg[flag.size() + 2] != '=') {
    return false;
  }
  *v = arg.substr(flag.size() + 3);
  return true;
}

template <typename T>
absl::Status Number(absl::string_view flag, absl::string_view v, T* out) {
  bool ok;
  if constexpr (std::is_same_v<T, double>) {
    ok = absl::SimpleAtod(v, out);
  } else {
    ok = absl::SimpleAtoi(v, out);
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, ": '", v, "' is not a number"));
}

}  // namespace

absl::StatusOr<Session> ParseSession(int argc, char** argv) {
  Session s;
  bool have_cases = false;
  for (int i = 1; i < argc; ++i) {
    const absl::string_view a = argv[i];
    absl::string_view v;
    absl::Status st;
    if (Match(a, "test", &v)) {
      if (v == "latency") {
        s.test = Test::kLatency;
      } else if (v == "fanout") {
        s.test = Test::kFanout;
      } else if (v == "throughput") {
        s.test = Test::kThroughput;
      } else {
        return absl::InvalidArgumentError(absl::StrCat(
            "--test: '", v, "'; use latency, fanout or throughput"));
      }
    } else if (Match(a, "cases", &v)) {
      absl::StatusOr<std::vector<Case>> c = ParseCases(std::string(v));
      if (!c.ok()) return c.status();
      s.cases = std::move(*c);
      have_cases = true;
    } else if (Match(a, "variant", &v)) {
      s.variant = std::string(v);
    } else if (Match(a, "spin_us", &v)) {
      st = Number("spin_us", v, &s.spin_us);
    } else if (Match(a, "queue_depth", &v)) {
      st = Number("queue_depth", v, &s.queue_depth);
    } else if (Match(a, "huge_pages", &v)) {
      st = Number("huge_pages", v, &s.huge_pages);
    } else if (Match(a, "api", &v)) {
      if (v != "typed" && v != "raw") {
        return absl::InvalidArgumentError(
            absl::StrCat("--api: '", v, "'; use typed or raw"));
      }
      s.raw_api = v == "raw";
    } else if (Match(a, "ping_cpu", &v)) {
      st = Number("ping_cpu", v, &s.ping_cpu);
    } else if (Match(a, "pong_cpu", &v)) {
      st = Number("pong_cpu", v, &s.pong_cpu);
    } else if (Match(a, "pongs", &v)) {
      st = Number("pongs", v, &s.pongs);
    } else if (Match(a, "phase_ms", &v)) {
      st = Number("phase_ms", v, &s.phase_ms);
    } else if (Match(a, "start_rate", &v)) {
      st = Number("start_rate", v, &s.start_rate);
    } else if (Match(a, "max_rate", &v)) {
      st = Number("max_rate", v, &s.max_rate);
    } else if (Match(a, "payload", &v)) {
      st = Number("payload", v, &s.throughput_payload);
    } else if (Match(a, "shm_root", &v)) {
      s.shm_root = std::string(v);
    } else if (Match(a, "timeout_s", &v)) {
      st = Number("timeout_s", v, &s.timeout_s);
    } else if (Match(a, "case_budget_ms", &v)) {
      st = Number("case_budget_ms", v, &s.case_budget_ms);
    } else if (Match(a, "out", &v)) {
      s.out = std::string(v);
    } else if (Match(a, "name", &v)) {
      s.name = std::string(v);
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown argument '", a, "' (try --help)"));
    }
    if (!st.ok()) return st;
  }
  if (s.test != Test::kThroughput && !have_cases) {
    return absl::InvalidArgumentError(
        "--cases is required for latency and fanout sessions, e.g. "
        "--cases=64:touch16:1000:100");
  }
  if (s.test == Test::kFanout ? (s.pongs < 1 || s.pongs > kMaxPongs)
                              : s.pongs != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--pongs: ", s.pongs, "; fanout takes 1..", kMaxPongs,
        " subscribers, the other tests exactly 1"));
  }
  if (s.phase_ms < 10 || s.start_rate < 1 || s.max_rate < s.start_rate ||
      s.throughput_payload < kMinPayload) {
    return absl::InvalidArgumentError(absl::StrCat(
        "throughput: want --phase_ms >= 10, 1 <= --start_rate <= --max_rate, "
        "--payload >= ",
        kMinPayload));
  }
  if (s.raw_api && s.test == Test::kThroughput) {
    return absl::InvalidArgumentError(
        "--api=raw: latency and fanout sessions only");
  }
  if (s.timeout_s < 1 || s.spin_us < 0 || s.case_budget_ms < 0) {
    return absl::InvalidArgumentError(
        "want --timeout_s >= 1, --spin_us >= 0, --case_budget_ms >= 0");
  }
  if (s.name.empty()) s.name = argc > 0 ? argv[0] : "runner";
  return s;
}

}  // namespace tether::bench
