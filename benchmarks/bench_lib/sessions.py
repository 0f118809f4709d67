"""Bench: one `./tether bench` run. The preflight (the kernel's wake
backends, which runners are built, the peers' services), the schedule of
sessions alternating between systems in rounds, running each runner and
collecting its JSON lines, progress on stderr, and cleanup."""

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from bench_lib.processes import (Interrupted, Processes, alive_path,
                                 claim_run_name, dds_config, dies_with_us,
                                 sweep_stale)
from bench_lib.stats import summarize
from bench_lib.systems import (PAYLOADS, PLACEMENTS, Plan, make_systems,
                               target_keys)


class Bench(Processes):
    def __init__(self, args):
        self.args = args
        self.bin = os.path.abspath(args.bin_dir)
        self.plan = Plan("tiny" if args.tiny else "quick" if args.quick else "full")
        if args.rounds:
            self.plan.rounds = args.rounds
        if args.target_rounds:
            self.plan.target_rounds = args.target_rounds
        if args.samples:
            self.plan.samples = {p: args.samples * self.plan.rounds
                                 for p in PAYLOADS}
            self.plan.fanout_samples = args.samples * min(self.plan.rounds, 2)
        sweep_stale()
        # Every file of this run is named after it, under its lock.
        self.run_name, self.alive_fd = claim_run_name()
        self.tmp = os.path.join(tempfile.gettempdir(), self.run_name)
        os.mkdir(self.tmp, 0o700)  # fails on a planted name: never follows
        self.shm_prefix = f"/dev/shm/{self.run_name}-"
        self.shm_count = 0
        self.huge_dir = None  # the "+huge" rows' tmpfs, while mounted
        self.roudi = None
        self.roscore = None
        self.load = None
        self.current = None
        self.ros_env = None
        self.dds_domain = random.randint(1, 200)
        self.latency = {}     # key -> accumulated samples
        # The targets pass, per round: (placement, system key, payload, mode)
        # -> {round: {"p50": us, "p99": us}}, so a ratio can be taken between
        # sessions that ran next to each other.
        self.target_rounds = {}
        self.throughput = {}  # key -> list of results
        self.failures = {}    # (system key, test) -> reason
        self.infos = {}       # system key -> info line from its runner
        self.sessions_done = 0
        self.sessions_total = 0
        self.started = time.monotonic()
        self.load_before = os.getloadavg()
        self.probe = {}
        self.no_backend = {}  # wake backend -> why this kernel cannot run it

    def cleanup(self):
        if self.current is not None:
            self.stop_process(self.current, signal.SIGTERM, 5)
            self.current = None
        self.stop_load()
        self.stop_roscore()
        self.stop_roudi()
        self.unmount_huge()
        for name in os.listdir("/dev/shm"):
            path = os.path.join("/dev/shm", name)
            if path.startswith(self.shm_prefix):
                shutil.rmtree(path, ignore_errors=True)
                try:
                    os.remove(path)
                except OSError:
                    pass
        shutil.rmtree(self.tmp, ignore_errors=True)
        if self.alive_fd is not None:
            try:
                os.remove(alive_path(self.run_name))
            except OSError:
                pass
            os.close(self.alive_fd)
            self.alive_fd = None

    # --- preflight ------------------------------------------------------------

    def preflight(self):
        probe_bin = os.path.join(self.bin, "benchmarks/tether_pingpong")
        backends = []
        try:
            out = subprocess.run([probe_bin, "--probe"], capture_output=True,
                                 text=True, timeout=30, check=True).stdout
            self.probe = json.loads(out)
            for b in self.probe["backends"]:
                if b["ok"]:
                    backends.append(b["name"])
                else:
                    self.no_backend[b["name"]] = b["reason"]
        except (OSError, subprocess.SubprocessError, ValueError, KeyError) as e:
            raise SystemExit(f"bench: cannot run {probe_bin} --probe: {e}")
        self.systems = make_systems(self.args.spin_us, backends,
                                    self.probe.get("default"))
        wanted = set(self.args.systems.split(",")) if self.args.systems else None
        if wanted is not None:  # names checked by parse_args
            self.systems = [s for s in self.systems if s.group in wanted or
                            (s.group == "floor" and "floors" in wanted)]
        reasons = {}
        for s in self.systems:
            path = os.path.join(self.bin, s.runner)
            if not os.access(path, os.X_OK):
                s.unavailable = (f"{s.runner} is not built (`./tether bench` "
                                 "builds it; see the build output)")
            elif s.key == "floor/uring" and "uring_futex" not in backends:
                s.unavailable = self.no_backend.get(
                    "uring_futex", "io_uring futex waits are not available")
        needs = {s.needs for s in self.systems if s.unavailable is None}
        if needs & {"roudi", "dds_shm"}:
            reasons["roudi"] = self.start_roudi()
            reasons["dds_shm"] = reasons["roudi"]
        if "ros" in needs:
            reasons["ros"] = self.start_roscore()
        if "huge" in needs:
            reasons["huge"] = self.mount_huge()
        for s in self.systems:
            if s.unavailable is None and s.needs and reasons.get(s.needs):
                s.unavailable = reasons[s.needs]
        ncpu = os.cpu_count() or 1
        self.placements = ["1cpu", "2cpu"] if ncpu >= 2 else ["1cpu"]
        if ncpu < 2:
            self.note(f"only {ncpu} CPU online: the 2-CPU rows are skipped")

    # --- sessions ---------------------------------------------------------------

    def command(self, system, extra):
        args = [os.path.join(self.bin, system.runner), f"--name={system.group}"]
        if system.variant:
            args.append(f"--variant={system.variant}")
        if system.spin_us:
            args.append(f"--spin_us={system.spin_us}")
        args += system.args
        self.shm_count += 1
        if system.needs == "huge":
            args.append(f"--shm_root={self.huge_dir}/{self.shm_count}")
        else:
            args.append(f"--shm_root={self.shm_prefix}{self.shm_count}")
        args += extra
        env = dict(os.environ)
        if system.needs == "ros":
            env.pop("ROS_HOSTNAME", None)
            env.update(self.ros_env)
        if system.needs in ("dds", "dds_shm"):
            env["CYCLONEDDS_URI"] = dds_config(self.dds_domain,
                                                system.needs == "dds_shm")
        if system.needs in ("roudi", "dds_shm"):
            args = ["nsenter", "-t", str(self.roudi.pid), "-m", "--"] + args
        return args, env

    def run_session(self, system, test, placement, extra, timeout_s, label):
        """Runs one runner session; returns its result lines (dicts)."""
        self.sessions_done += 1
        self.progress(f"{label}  {system.label}")
        _, ping_cpu, pong_cpu = PLACEMENTS[placement]
        runner_test = "latency" if test == "targets" else test
        extra = [f"--test={runner_test}", f"--ping_cpu={ping_cpu}",
                 f"--pong_cpu={pong_cpu}", f"--timeout_s={timeout_s}"] + extra
        if test != "throughput" and self.plan.case_budget_ms:
            extra.append(f"--case_budget_ms={self.plan.case_budget_ms}")
        args, env = self.command(system, extra)
        err_path = self.log_path(f"session-{self.sessions_done}.err")
        with open(err_path, "w") as err:
            self.current = subprocess.Popen(
                args, env=env, stdout=subprocess.PIPE, stderr=err,
                stdin=subprocess.DEVNULL, text=True,
                preexec_fn=dies_with_us(signal.SIGTERM))
            try:
                out, _ = self.current.communicate(timeout=timeout_s + 15)
            except subprocess.TimeoutExpired:
                self.stop_process(self.current, signal.SIGTERM, 5)
                out = ""
            rc = self.current.returncode
            self.current = None
        lines = []
        error = None
        for line in out.splitlines():
            try:
                d = json.loads(line)
            except ValueError:
                continue
            if d.get("ok") is False and "error" in d:
                error = d["error"]
            else:
                lines.append(d)
            if d.get("info"):
                self.infos[system.key] = d["info"]
        if rc == 130 or rc == -signal.SIGINT:
            raise Interrupted()
        if error is None and rc != 0:
            error = f"runner exited with {rc}: {self.tail(err_path)}"
        if error is not None:
            self.failures.setdefault((system.key, test), error)
        return lines

    def progress(self, text):
        elapsed = time.monotonic() - self.started
        line = (f"[{self.sessions_done:3d}/{self.sessions_total}] "
                f"{elapsed:5.0f}s  {text}")
        if sys.stderr.isatty():
            sys.stderr.write("\r\033[K" + line[:120])
            sys.stderr.flush()
        else:
            print(line, file=sys.stderr, flush=True)

    def add_latency(self, test, load, placement, system, line):
        key = (test, load, placement, system.key, line["payload"], line["mode"],
               line.get("pongs", 1))
        acc = self.latency.setdefault(key, {"rtt": [], "oneway": [], "send": [],
                                            "vcsw": 0, "ivcsw": 0, "rts": 0})
        acc["rtt"] += line["rtt_ns"]
        acc["oneway"] += line.get("oneway_ns", [])
        acc["send"] += line.get("send_ns", [])
        sw = line["switches"]
        acc["vcsw"] += sw["ping"][0] + sum(p[0] for p in sw["pong"])
        acc["ivcsw"] += sw["ping"][1] + sum(p[1] for p in sw["pong"])
        acc["rts"] += line["samples"]

    def add_target_round(self, placement, system, rnd, line):
        st = summarize(line["rtt_ns"], 2.0)
        if st is not None:
            key = (placement, system.key, line["payload"], line["mode"])
            self.target_rounds.setdefault(key, {})[rnd] = {
                "p50": st["p50"], "p99": st["p99"]}

    def runnable(self, system, test, placement):
        if system.unavailable or test not in system.tests:
            return False
        if (system.key, "all") in self.failures:
            return False
        if placement == "1cpu" and not system.one_cpu:
            return False
        return True

    def schedule(self):
        """The sessions to run, in order: rounds alternate the systems."""
        plan = self.plan
        tests = set(self.args.tests.split(","))
        sessions = []
        lat_cases = plan.cases(plan.payloads, plan.rounds)
        if "latency" in tests:
            for r in range(plan.rounds):
                for placement in self.placements:
                    for s in self.systems:
                        if self.runnable(s, "latency", placement):
                            sessions.append(("latency", False, placement, s,
                                             [f"--cases={lat_cases}"],
                                             f"latency {PLACEMENTS[placement][0]} "
                                             f"round {r + 1}/{plan.rounds}", r))
        if "fanout" in tests:
            n = max(1, plan.fanout_samples // max(1, min(plan.rounds, 2)))
            rounds = min(plan.rounds, 2)
            for r in range(rounds):
                for placement in plan.fanout_placements:
                    if placement not in self.placements:
                        continue
                    for k in plan.fanout:
                        for s in self.systems:
                            if s.key.endswith("+spin") or s.key == "floor/memcpy":
                                continue
                            if self.runnable(s, "fanout", placement):
                                sessions.append((
                                    "fanout", False, placement, s,
                                    [f"--pongs={k}",
                                     f"--cases=64:touch16:{n}:{max(3, n // 10)}"],
                                    f"fan-out {k} {PLACEMENTS[placement][0]} "
                                    f"round {r + 1}/{rounds}", r))
        if "throughput" in tests:
            for placement in plan.throughput_placements:
                if placement not in self.placements:
                    continue
                for s in self.systems:
                    if self.runnable(s, "throughput", placement):
                        sessions.append((
                            "throughput", False, placement, s,
                            [f"--phase_ms={plan.phase_ms}",
                             f"--max_rate={plan.max_rate:.0f}"],
                            f"throughput {PLACEMENTS[placement][0]}", 0))
        if "load" in tests and (os.cpu_count() or 1) >= 2:
            # A third of the latency rows' samples (at most), in one session.
            cases = plan.cases(plan.load_payloads, min(plan.rounds, 3))
            for placement in plan.load_placements:
                for s in self.systems:
                    if self.runnable(s, "latency", placement):
                        sessions.append(("latency", True, placement, s,
                                         [f"--cases={cases}"],
                                         f"latency + load {PLACEMENTS[placement][0]}", 0))
        if "targets" in tests:
            # Issue 12's ratios compare tether with the floors. The host's
            # noise drifts over seconds (a 2-CPU floor moved from 21 to 30 us
            # within a minute), so the systems compared run here in many
            # short rounds, next to each other, in an order that rotates each
            # round so no system always follows the same one.
            keys = target_keys(self.probe.get("default"))
            chosen = [s for s in self.systems if s.key in keys]
            cases = plan.target_cases()
            for r in range(plan.target_rounds):
                turn = chosen[r % len(chosen):] + chosen[:r % len(chosen)] \
                    if chosen else []
                for placement in self.placements:
                    for s in turn:
                        if self.runnable(s, "latency", placement) or \
                                self.runnable(s, "targets", placement):
                            sessions.append((
                                "targets", False, placement, s,
                                [f"--cases={cases}"],
                                f"targets {PLACEMENTS[placement][0]} "
                                f"round {r + 1}/{plan.target_rounds}", r))
        return sessions

    def run(self):
        self.preflight()
        sessions = self.schedule()
        self.sessions_total = len(sessions)
        self.note(f"{len(sessions)} sessions ({self.plan.mode}); "
                  f"kernel {self.probe.get('kernel')}, default wake backend "
                  f"{self.probe.get('default')}")
        for test, load, placement, system, extra, label, rnd in sessions:
            if (system.key, test) in self.failures:
                continue  # it failed once: do not spend the run on it
            if load:
                self.start_load(1)
            try:
                timeout = 600 if self.plan.mode == "full" else 180
                lines = self.run_session(system, test, placement, extra, timeout,
                                         label)
            finally:
                if load:
                    self.stop_load()
            for line in lines:
                if test == "throughput":
                    self.throughput.setdefault((placement, system.key), []).append(line)
                elif line.get("ok"):
                    self.add_latency(test, load, placement, system, line)
                    if test == "targets":
                        self.add_target_round(placement, system, rnd, line)
        if sys.stderr.isatty():
            sys.stderr.write("\r\033[K")
        self.elapsed = time.monotonic() - self.started
        self.load_after = os.getloadavg()

