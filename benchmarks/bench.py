#!/usr/bin/python3
"""./tether bench: tether against iceoryx, ROS 1, Cyclone DDS and the floors.

Every system is measured by one harness (benchmarks/harness), in one run,
with one method: ping-pong between processes, one-way = round trip / 2,
warm-up discarded, p50/p90/p99/p99.9/max and mean, on one CPU and on two,
payloads 64 B to 4 MiB written 16 bytes ("touch16", what a zero-copy user
writes) or whole ("full"); fan-out to 1..16 subscribers (the last one's
latency and the publisher's send cost); the highest message rate sustained
without loss; the latency rows again with a busy background load; and each
system's voluntary context switches per round trip, so a spinning system is
never mistaken for a blocking one. Sessions alternate between systems in
rounds so machine noise hits all alike. Last, the targets pass runs only the
systems issue 12's ratios compare (tether's backends, the huge-page setup and
the floors) in many short rounds side by side, because a VM's noise drifts
over seconds: those ratios come from it, with their spread over the rounds.

This driver starts what the peers need and stops it again, also on Ctrl-C:
iox-roudi with its own config in a private mount namespace (its own /tmp and
/dev/shm, so it cannot collide with another RouDi and leaves nothing
behind), a private roscore on a free port, and a Cyclone DDS configuration
pinned to the loopback interface on a random domain. It prints markdown
tables (ratios to the floors and to each peer), writes --json and renders PNG
plots with gnuplot (--plots).

Normally run through `./tether bench`, which installs the peers' packages
and builds the runners first. Uses only the Python standard library.
This file is the entry point (flags, main); the rest is in bench_lib/.
"""

import argparse
import json
import os
import signal
import sys

# The modules beside this file (bench_lib/) as it was run: from the
# checkout, or from a test's runfiles (for a symlinked script Python would
# put the link's target folder first). No __pycache__ left in the checkout.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True
from bench_lib import ROOT  # noqa: E402
from bench_lib.processes import Interrupted  # noqa: E402
from bench_lib.report import Report  # noqa: E402
from bench_lib.sessions import Bench  # noqa: E402
from bench_lib.systems import SYSTEM_GROUPS  # noqa: E402


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="./tether bench",
        description="tether against iceoryx, ROS 1, Cyclone DDS and the "
                    "floors (raw futex, busy spin, memcpy), one harness, one "
                    "run. Prints markdown tables; see benchmarks/bench.py.")
    p.add_argument("--quick", action="store_true",
                   help="fewer samples, rounds and cases (under 2 minutes)")
    p.add_argument("--tiny", action="store_true",
                   help="a handful of samples per row: proves the pipeline "
                        "works, measures nothing (the harness test)")
    p.add_argument("--json", metavar="FILE", help="write every row as JSON")
    p.add_argument("--plots", metavar="DIR",
                   help="render PNG plots with gnuplot into DIR")
    p.add_argument("--markdown", metavar="FILE",
                   help="also write the tables to FILE")
    p.add_argument("--systems", metavar="LIST",
                   help="comma-separated subset: tether, iceoryx, ros1, "
                        "cyclonedds, floors (default: all)")
    p.add_argument("--tests", default="latency,fanout,throughput,load,targets",
                   help="comma-separated subset of latency, fanout, "
                        "throughput, load, targets (default: all; targets: "
                        "the systems issue 12's ratios compare, in many "
                        "short rounds side by side)")
    p.add_argument("--rounds", type=int, default=0,
                   help="rounds of alternating sessions (default: 6, quick 2; "
                        "the targets pass keeps its own: 12, quick 6)")
    p.add_argument("--target-rounds", type=int, default=0,
                   help="rounds of the targets pass (default: 12, quick 6); "
                        "each round runs every compared system once, so "
                        "more rounds narrow the 95%% interval printed with "
                        "each ratio (120 rounds: about 3 minutes)")
    p.add_argument("--samples", type=int, default=0,
                   help="round trips per case and session (overrides the "
                        "plan's per-payload counts; the targets pass keeps "
                        "its own)")
    p.add_argument("--spin-us", type=int, default=100,
                   help="tether's spin before sleeping in the +spin rows "
                        "(default 100)")
    p.add_argument("--check-args", action="store_true",
                   help=argparse.SUPPRESS)  # the wrapper, before it builds
    p.add_argument("--bin-dir", default=None,
                   help="where the runners are built (default: bazel-bin of "
                        "this checkout)")
    args = p.parse_args(argv)
    tests = set(args.tests.split(","))
    bad = tests - {"latency", "fanout", "throughput", "load", "targets"}
    if bad:
        p.error(f"--tests: unknown {','.join(sorted(bad))}")
    if args.systems:
        unknown = set(args.systems.split(",")) - set(SYSTEM_GROUPS)
        if unknown:
            p.error(f"--systems: unknown {','.join(sorted(unknown))}; use "
                    f"{','.join(SYSTEM_GROUPS)}")
    if args.target_rounds < 0:
        p.error("--target-rounds: give a positive count (0: the plan's)")
    if args.quick and args.tiny:
        p.error("--quick and --tiny exclude each other")
    if args.bin_dir is None:
        args.bin_dir = os.path.join(ROOT, "bazel-bin")
    shown, skip = [], False
    for a in argv:  # what the user typed (the wrapper adds --bin-dir)
        if skip:
            skip = False
        elif a == "--bin-dir":
            skip = True
        elif not a.startswith("--bin-dir="):
            shown.append(a)
    args.command = " ".join(["./tether bench"] + shown)
    return args


def main(argv):
    args = parse_args(argv)
    if args.check_args:
        return 0
    bench = Bench(args)

    def on_signal(signum, frame):
        raise Interrupted()

    # Also SIGINT: a shell may start us with it ignored (background jobs).
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    try:
        bench.run()
    except (Interrupted, KeyboardInterrupt):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if sys.stderr.isatty():
            sys.stderr.write("\r\033[K")
        print("bench: interrupted; stopping every process it started",
              file=sys.stderr)
        bench.cleanup()
        return 130
    except BaseException:
        bench.cleanup()
        raise
    try:
        return report_results(args, bench)
    except (Interrupted, KeyboardInterrupt):
        print("bench: interrupted", file=sys.stderr)
        return 130
    finally:
        bench.cleanup()


def report_results(args, bench):
    """Prints the tables and writes the JSON and plots asked for."""
    report = Report(bench)
    text = report.markdown()
    problems = []
    if args.plots:
        problems = report.plots(os.path.abspath(args.plots))
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report.json(), f, indent=1)
            f.write("\n")
        print(f"bench: wrote {args.json}", file=sys.stderr)
    if args.plots:
        for png in getattr(report, "made_plots", []):
            print(f"bench: plot {png}", file=sys.stderr)
    for p in problems:
        print(f"bench: {p}", file=sys.stderr)
    if not report.rows and not bench.throughput:
        print("bench: no system produced a result", file=sys.stderr)
        return 1
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
