#!/usr/bin/python3
"""The `./tether bench` harness end to end, on a tiny sample count.

Runs benchmarks/bench.py for real with tether and the floors (no peer
packages needed): every expected row appears in the tables and the JSON,
the plots are PNG files, a system whose runner is missing gets a one-line
reason instead of a row, a runner that fails in the targets pass is named
in every target it feeds, bad flags are refused, and Ctrl-C in the middle of
a run stops every process it started and leaves no shared memory behind.
Asserts nothing about timing.

Bazel runs this file directly; it writes its results as JUnit XML to
$XML_OUTPUT_FILE so `./tether test` counts each case.
"""

import glob
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import unittest

RUNFILES = os.path.join(os.environ.get("TEST_SRCDIR", ""), "tether")
sys.path.insert(0, os.path.join(RUNFILES, "tests/util"))
import pyjunit  # noqa: E402  (the shared JUnit runner)
BENCH = os.path.join(RUNFILES, "benchmarks/bench.py")
PYTHON = "/usr/bin/python3"


def probe():
    out = subprocess.run(
        [os.path.join(RUNFILES, "benchmarks/tether_pingpong"), "--probe"],
        capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def our_processes():
    """Processes started from this test's runfiles (runners, their children,
    the load), other than this test itself."""
    found = []
    for d in glob.glob("/proc/[0-9]*"):
        try:
            with open(os.path.join(d, "cmdline"), "rb") as f:
                cmd = f.read().decode(errors="replace")
        except OSError:
            continue
        if RUNFILES in cmd and d != f"/proc/{os.getpid()}":
            found.append((d, cmd.replace("\0", " ")))
    return found


def shm_left(pid):
    return glob.glob(f"/dev/shm/tether-bench-{pid}-*")


class BenchHarnessTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="bench-test-",
                                    dir=os.environ.get("TEST_TMPDIR"))

    def bench(self, *args, timeout=240, env=None):
        return subprocess.run([PYTHON, BENCH, "--bin-dir", RUNFILES, *args],
                              capture_output=True, text=True, timeout=timeout,
                              env=env)

    def test_tiny_run_prints_every_row_writes_json_and_plots(self):
        j = os.path.join(self.tmp, "bench.json")
        plots = os.path.join(self.tmp, "plots")
        md = os.path.join(self.tmp, "bench.md")
        r = self.bench("--tiny", "--systems", "tether,floors", "--json", j,
                       "--plots", plots, "--markdown", md)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        backends = [b["name"] for b in probe()["backends"] if b["ok"]]
        self.assertTrue(backends, "this kernel runs no tether wake backend")
        with open(j) as f:
            data = json.load(f)
        rows = data["rows"]
        lat = {(x["placement"], x["system"], x["payload"], x["mode"])
               for x in rows if x["test"] == "latency" and not x["load"]}
        ncpu = os.cpu_count()
        placements = ["1cpu", "2cpu"] if ncpu >= 2 else ["1cpu"]
        systems = ["floor/futex", "floor/memcpy"]
        if "uring_futex" in backends:  # the io_uring floor runs where it can
            systems.append("floor/uring")
        for b in backends:
            systems += [f"tether/{b}", f"tether/{b}+spin"]
        for pl in placements:
            for s in systems + (["floor/spin"] if pl == "2cpu" else []):
                for payload in (64, 65536):
                    for mode in ("touch16", "full"):
                        self.assertIn((pl, s, payload, mode), lat)
        # The targets pass: the systems issue 12 compares, its three cases,
        # kept apart from the latency rows (tiny's latency payloads are 64 B
        # and 64 KiB only).
        default = probe()["default"]
        tgt = {(x["placement"], x["system"], x["payload"], x["mode"])
               for x in rows if x["test"] == "targets"}
        for pl in placements:
            for s in ("floor/futex", f"tether/{default}"):
                for case in ((64, "touch16"), (1048576, "touch16"),
                             (1048576, "full")):
                    self.assertIn((pl, s) + case, tgt)
        self.assertFalse([x for x in rows if x["test"] == "latency" and
                          x["payload"] == 1048576])
        # tether with its huge pages off runs in the targets pass only.
        for pl in placements:
            self.assertIn((pl, f"tether/{default}+4k", 1048576, "full"), tgt)
        # So does tether through its raw API, with its two reference lines.
        for pl in placements:
            for p, m in ((64, "touch16"), (1048576, "full")):
                self.assertIn((pl, f"tether/{default}+raw", p, m), tgt)
        self.assertFalse([x for x in rows if x["test"] != "targets" and
                          x["system"].endswith(("+4k", "+raw"))])
        checks = data["checks"]
        self.assertIn("From the targets pass", checks[0])
        line = [c for c in checks
                if f"1 CPU: {default} 64 B p50 / raw futex p50" in c]
        self.assertEqual(len(line), 1, checks)
        self.assertRegex(line[0], r"\*\*[0-9.]+x\*\* \(target <= 1.3x\): "
                         r"(met|NOT met); rounds [0-9.]+-[0-9.]+x, met in "
                         r"[01] of 1$")
        for what in ("raw API 64 B p50 / raw futex p50",
                     f"64 B p50 / {default} raw API 64 B p50"):
            line = [c for c in checks if "1 CPU: " in c and what in c]
            self.assertEqual(len(line), 1, (what, checks))
            self.assertRegex(line[0], r"= \*\*[0-9.]+x\*\*; rounds ")
        for x in rows:
            self.assertGreater(x["n"], 0, x)
            self.assertLessEqual(x["p50"], x["p99"], x)
            self.assertLessEqual(x["p99"], x["max"], x)
            self.assertGreaterEqual(x["vcsw_per_rt"], 0, x)
        futex_rows = [x for x in rows if x["system"] == "floor/futex"]
        for x in futex_rows:
            self.assertAlmostEqual(x["p50_vs_futex_floor"], 1.0, places=6)
        if ncpu >= 2:
            fan = {(x["system"], x["subscribers"]) for x in rows
                   if x["test"] == "fanout"}
            for k in (1, 2):
                self.assertIn(("floor/futex", k), fan)
                self.assertIn((f"tether/{backends[0]}", k), fan)
            loaded = [x for x in rows if x["load"]]
            self.assertTrue(loaded, "no rows with the background load")
            tput = {x["system"]: x for x in data["throughput"]}
            self.assertIn(f"tether/{backends[0]}", tput)
            self.assertGreater(tput[f"tether/{backends[0]}"]["max_rate"], 0)
        with open(md) as f:
            text = f.read()
        self.assertIn("| placement | payload | write | system |", text)
        self.assertIn("floor: raw futex", text)
        self.assertIn(f"tether {backends[0]}", text)
        self.assertIn(text.strip(), r.stdout)
        pngs = sorted(glob.glob(os.path.join(plots, "*.png")))
        names = {os.path.basename(p) for p in pngs}
        self.assertIn("cdf-64B-1cpu.png", names)
        self.assertIn("p99-vs-payload-touch16-1cpu.png", names)
        if ncpu >= 2:
            self.assertIn("p99-vs-subscribers-2cpu.png", names)
        for p in pngs:
            with open(p, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n", p)
            self.assertGreater(os.path.getsize(p), 2000, p)
        self.assertEqual(our_processes(), [])

    def test_a_system_that_cannot_run_gets_a_reason_not_a_row(self):
        # The test's runfiles hold no iceoryx runner.
        j = os.path.join(self.tmp, "bench.json")
        r = self.bench("--tiny", "--systems", "iceoryx,floors", "--tests",
                       "latency", "--json", j)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        self.assertIn("iceoryx 2.0.3 WaitSet: not measured", r.stdout)
        self.assertIn("is not built", r.stdout)
        with open(j) as f:
            data = json.load(f)
        self.assertFalse([x for x in data["rows"] if x["system"] == "iceoryx"])
        ice = [s for s in data["systems"] if s["key"] == "iceoryx"][0]
        self.assertIn("not built", ice["not_measured"])

    def test_huge_page_rows_say_why_when_the_tmpfs_cannot_be_mounted(self):
        if os.geteuid() != 0 or not os.path.exists(
                "/sys/kernel/mm/transparent_hugepage"):
            self.skipTest("the bench mounts only as root, on a THP kernel")
        default = probe().get("default")
        if not default:
            self.skipTest("this kernel runs no tether wake backend")
        # A `mount` that refuses, first on PATH: what a container without
        # CAP_SYS_ADMIN answers.
        fake = os.path.join(self.tmp, "bin")
        os.mkdir(fake)
        with open(os.path.join(fake, "mount"), "w") as f:
            f.write("#!/bin/sh\necho 'mount: permission denied (fake)' >&2\n"
                    "exit 32\n")
        os.chmod(os.path.join(fake, "mount"), 0o755)
        env = dict(os.environ, PATH=fake + ":" + os.environ.get("PATH", ""))
        j = os.path.join(self.tmp, "bench.json")
        p = subprocess.Popen(
            [PYTHON, BENCH, "--bin-dir", RUNFILES, "--tiny", "--systems",
             "tether,floors", "--tests", "latency", "--json", j],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        out, err = p.communicate(timeout=240)
        r = subprocess.CompletedProcess(p.args, p.returncode, out, err)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        why = (": not measured** — mount -t tmpfs -o huge=within_size "
               "failed: mount: permission denied (fake)")
        self.assertIn(f"**floor: raw futex, huge pages{why}", r.stdout)
        with open(j) as f:
            data = json.load(f)
        huge = [s for s in data["systems"] if s["key"].endswith("+huge")]
        self.assertEqual([s["key"] for s in huge], ["floor/futex+huge"])
        self.assertIn("permission denied (fake)", huge[0]["not_measured"])
        self.assertFalse([x for x in data["rows"]
                          if x["system"].endswith("+huge")])
        # The other rows ran, tether's large-message row included (its huge
        # pages need no mount), and the refused mount left no folder behind.
        for key in (f"tether/{default}", f"tether/{default}+qd2"):
            self.assertTrue([x for x in data["rows"] if x["system"] == key],
                            key)
        self.assertEqual(shm_left(p.pid), [])  # its huge- folder included

    def test_the_io_uring_floor_says_why_when_io_uring_is_refused(self):
        # As Docker's default seccomp profile refuses it.
        r = subprocess.run(
            [os.path.join(RUNFILES, "tests/util/no_io_uring"),
             os.path.join(RUNFILES, "benchmarks/floor_pingpong"),
             "--variant=uring", "--cases=64:touch16:20:3"],
            capture_output=True, text=True, timeout=60)
        results = [json.loads(line) for line in r.stdout.splitlines()
                   if line.startswith("{")]
        self.assertTrue(results, r.stdout + r.stderr)
        self.assertFalse(results[0]["ok"], results[0])
        self.assertIn("io_uring_setup failed: Operation not permitted",
                      results[0]["error"])
        self.assertIn("refused here", results[0]["error"])

    def test_a_system_that_fails_in_the_targets_pass_is_named_in_its_lines(
            self):
        default = probe().get("default")
        if not default:
            self.skipTest("this kernel runs no tether wake backend")
        # A bin dir whose floor runner refuses its io_uring variant, as a
        # runner that fails in the middle of a run would; the rest is real.
        fake = os.path.join(self.tmp, "bin")
        os.makedirs(os.path.join(fake, "benchmarks"))
        real = os.path.join(RUNFILES, "benchmarks")
        for name in ("tether_pingpong", "bench_load"):
            os.symlink(os.path.join(real, name),
                       os.path.join(fake, "benchmarks", name))
        runner = os.path.join(fake, "benchmarks", "floor_pingpong")
        with open(runner, "w") as f:
            f.write("#!/bin/sh\ncase \" $* \" in *' --variant=uring '*)\n"
                    "  echo '{\"ok\": false, \"error\": \"refused (fake)\"}'\n"
                    "  exit 1;;\nesac\n"
                    f"exec {os.path.join(real, 'floor_pingpong')} \"$@\"\n")
        os.chmod(runner, 0o755)
        j = os.path.join(self.tmp, "bench.json")
        r = subprocess.run(
            [PYTHON, BENCH, "--bin-dir", fake, "--tiny", "--systems",
             "tether,floors", "--tests", "targets", "--json", j],
            capture_output=True, text=True, timeout=240)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        self.assertIn("- **floor: io_uring futex wait (targets): failed** — "
                      "refused (fake)", r.stdout)
        with open(j) as f:
            checks = json.load(f)["checks"]
        # The targets it was the denominator or numerator of say so, on
        # each placement; the others were measured.
        why = ("not measured (floor: io_uring futex wait failed in the "
               "targets pass: see above)")
        ncpu = os.cpu_count()
        for pl in ["1 CPU", "2 CPUs"] if ncpu >= 2 else ["1 CPU"]:
            for text in ("io_uring futex floor 64 B p50 / raw futex p50",
                         f"{default} 64 B p50 / io_uring futex floor p50"):
                line = [c for c in checks if c.startswith(f"- {pl}: {text}")]
                self.assertEqual(len(line), 1, checks)
                self.assertTrue(line[0].endswith(why), line[0])
            line = [c for c in checks
                    if c.startswith(f"- {pl}: {default} 64 B p50 / raw futex")]
            self.assertEqual(len(line), 1, checks)
            self.assertIn("(target <= 1.", line[0])
        self.assertEqual(our_processes(), [])

    def test_more_target_rounds_give_each_ratio_a_per_round_interval(self):
        default = probe().get("default")
        if not default:
            self.skipTest("this kernel runs no tether wake backend")
        j = os.path.join(self.tmp, "bench.json")
        r = self.bench("--tiny", "--systems", "tether,floors", "--tests",
                       "targets", "--target-rounds", "3", "--json", j)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        self.assertIn("round 3/3", r.stderr)
        self.assertNotIn("round 4/", r.stderr)
        with open(j) as f:
            checks = json.load(f)["checks"]
        self.assertIn("side by side in 3 short rounds", checks[0])
        line = [c for c in checks
                if f"1 CPU: {default} 64 B p50 / raw futex p50" in c]
        self.assertEqual(len(line), 1, checks)
        m = re.search(r"met in [0-3] of 3; per round ([0-9.]+)x \(95% "
                      r"([0-9.]+)-([0-9.]+)x\)$", line[0])
        self.assertIsNotNone(m, line[0])
        mid, low, high = (float(x) for x in m.groups())
        self.assertLessEqual(low, mid)
        self.assertLessEqual(mid, high)
        self.assertEqual(our_processes(), [])

    def test_bad_flags_say_what_to_do(self):
        r = self.bench("--tests", "speed")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--tests", r.stderr)
        r = self.bench("--target-rounds", "-2", "--tiny")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--target-rounds: give a positive count", r.stderr)
        r = self.bench("--systems", "zeromq", "--tiny")
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown zeromq", r.stderr)
        runner = os.path.join(RUNFILES, "benchmarks/floor_pingpong")
        r = subprocess.run([runner, "--cases=8:touch16"], capture_output=True,
                           text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn(">= 64", r.stderr)

    def test_ctrl_c_stops_everything_and_leaves_no_shared_memory(self):
        # Sessions long enough that the interrupt lands inside one.
        p = subprocess.Popen(
            [PYTHON, BENCH, "--bin-dir", RUNFILES, "--tiny", "--samples",
             "20000", "--systems", "tether,floors", "--tests", "latency,load"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True)
        first = p.stderr.readline()  # "bench: N sessions ..."
        self.assertIn("sessions", first)
        deadline = time.monotonic() + 60
        seen_runner = False
        while time.monotonic() < deadline and not seen_runner:
            seen_runner = any("--shm_root" in cmd for _, cmd in our_processes())
        self.assertTrue(seen_runner, "no runner started within 60 s")
        time.sleep(0.3)
        # What a terminal does on Ctrl-C: SIGINT to the foreground group.
        os.killpg(p.pid, signal.SIGINT)
        _, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 130, err[-2000:])
        self.assertIn("interrupted", err)
        # Killed children are reaped by init: wait for that, bounded.
        deadline = time.monotonic() + 30
        while our_processes() and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertEqual(our_processes(), [])
        self.assertEqual(shm_left(p.pid), [])

    def test_a_live_run_of_another_pid_namespace_is_not_swept(self):
        # Another run whose pid means nothing here (a container, another
        # Bazel sandbox) but which holds its lock: its files stay; once it
        # is gone (the lock dropped), the next sweep removes them.
        sys.path.insert(0, os.path.join(RUNFILES, "benchmarks"))
        from bench_lib import processes  # noqa: E402
        name = f"tether-bench-4194305-{os.urandom(4).hex()}"
        alive = processes.alive_path(name)
        tmp = os.path.join(tempfile.gettempdir(), name)
        root = f"/dev/shm/{name}-0"
        os.mkdir(tmp)
        os.mkdir(root)
        # The lock's holder is one process (flock(1) forks a child that
        # holds the lock until it gets to run, which on a loaded machine can
        # be after its parent is killed): killed and reaped, the lock is
        # gone.
        holder = subprocess.Popen(
            [PYTHON, "-c",
             "import fcntl, os, sys, time\n"
             "fd = os.open(sys.argv[1], os.O_CREAT | os.O_RDWR, 0o600)\n"
             "fcntl.flock(fd, fcntl.LOCK_EX)\n"
             "print('locked', flush=True)\n"
             "time.sleep(60)\n", alive],
            stdout=subprocess.PIPE, text=True)
        try:
            self.assertEqual(holder.stdout.readline().strip(), "locked")
            self.assertTrue(processes.run_alive(name))
            processes.sweep_stale()
            self.assertTrue(os.path.isdir(tmp))
            self.assertTrue(os.path.isdir(root))
        finally:
            holder.kill()
            holder.wait()
            holder.stdout.close()
        processes.sweep_stale()
        self.assertFalse(os.path.exists(tmp))
        self.assertFalse(os.path.exists(root))
        self.assertFalse(os.path.exists(alive))


if __name__ == "__main__":
    sys.exit(pyjunit.run(BenchHarnessTest))
