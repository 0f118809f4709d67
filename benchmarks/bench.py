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
rounds so machine noise hits all alike.

This driver starts what the peers need and stops it again, also on Ctrl-C:
iox-roudi with its own config in a private mount namespace (its own /tmp and
/dev/shm, so it cannot collide with another RouDi and leaves nothing
behind), a private roscore on a free port, and a Cyclone DDS configuration
pinned to the loopback interface on a random domain. It prints markdown
tables (ratios to the floors and to each peer), writes --json and renders PNG
plots with gnuplot (--plots).

Normally run through `./tether bench`, which installs the peers' packages
and builds the runners first. Uses only the Python standard library.
"""

import argparse
import ctypes
import datetime
import glob
import json
import math
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import xmlrpc.client

PAYLOADS = [64, 4096, 65536, 1048576, 4194304]
MODES = ["touch16", "full"]
FANOUT = [1, 2, 4, 8, 16]
SYSTEM_GROUPS = ["tether", "iceoryx", "ros1", "cyclonedds", "floors"]
US = 1000.0  # ns per us


def human_size(n):
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div} {unit}"
    return f"{n} B"


class System:
    """One row label: a runner binary, its variant and what it needs."""

    def __init__(self, key, label, group, runner, variant="", spin_us=0,
                 needs=None, tests=("latency", "fanout", "throughput"),
                 one_cpu=True, peer=None, args=()):
        self.key = key
        self.label = label
        self.group = group      # tether, iceoryx, ros1, cyclonedds, floor
        self.runner = runner    # path under the bin dir
        self.variant = variant
        self.spin_us = spin_us
        self.needs = needs      # None, "roudi", "ros", "dds", "dds_shm", "huge"
        self.tests = set(tests)
        self.one_cpu = one_cpu  # meaningful with both sides on one CPU
        self.peer = peer        # column name when other rows compare to it
        self.args = list(args)  # extra runner flags
        self.unavailable = None  # one-line reason, set by the preflight


def make_systems(spin_us, backends, default=None):
    systems = []
    for b in backends:
        systems.append(System(f"tether/{b}", f"tether {b}", "tether",
                              "benchmarks/tether_pingpong", variant=b))
        systems.append(System(f"tether/{b}+spin", f"tether {b} +spin {spin_us}us",
                              "tether", "benchmarks/tether_pingpong", variant=b,
                              spin_us=spin_us, tests=("latency",)))
    if default in backends:
        # Large messages as docs/large-messages.md configures them: channels
        # on a tmpfs with huge pages and the smallest ring (a channel cycles
        # through queueDepth + 1 slots or more, whose 4 KiB pages outgrow the
        # TLB at 1 MiB). Compared with the floor on the same memory.
        systems.append(System(f"tether/{default}+huge",
                              f"tether {default}, huge pages, queueDepth 2",
                              "tether", "benchmarks/tether_pingpong",
                              variant=default, needs="huge",
                              tests=("latency",), args=["--queue_depth=2"]))
    systems += [
        System("iceoryx", "iceoryx 2.0.3 WaitSet", "iceoryx",
               "benchmarks/peers/iceoryx_pingpong", needs="roudi",
               peer="iceoryx"),
        System("ros1", "ROS 1 TCPROS", "ros1", "benchmarks/peers/ros1_pingpong",
               needs="ros", peer="ROS 1"),
        System("dds/net", "Cyclone DDS UDP lo", "cyclonedds",
               "benchmarks/peers/cyclone_pingpong", variant="net", needs="dds",
               peer="DDS"),
        System("dds/shm", "Cyclone DDS iceoryx shm", "cyclonedds",
               "benchmarks/peers/cyclone_pingpong", variant="shm",
               needs="dds_shm", peer="DDS shm"),
        System("floor/futex", "floor: raw futex", "floor",
               "benchmarks/floor_pingpong", variant="futex",
               tests=("latency", "fanout"), peer="futex floor"),
        System("floor/futex+huge", "floor: raw futex, huge pages", "floor",
               "benchmarks/floor_pingpong", variant="futex", needs="huge",
               tests=("latency",)),
        # The kernel's io_uring wake path alone (what tether's default backend
        # sleeps in), so a row can be split into mechanism and tether's work.
        System("floor/uring", "floor: io_uring futex wait", "floor",
               "benchmarks/floor_pingpong", variant="uring",
               tests=("latency",)),
        System("floor/spin", "floor: busy spin", "floor",
               "benchmarks/floor_pingpong", variant="spin",
               tests=("latency",), one_cpu=False),
        System("floor/memcpy", "floor: memcpy", "floor",
               "benchmarks/floor_pingpong", variant="memcpy",
               tests=("latency",)),
    ]
    return systems


class Plan:
    """Sample counts and what runs, for --quick, the full suite or --tiny."""

    def __init__(self, mode):
        self.mode = mode
        # Latency/fanout: a case stops recording after this long (keeping at
        # least 30 samples), so a system at 100 ms per round trip (Cyclone
        # over UDP at 4 MiB) does not set the length of the run.
        self.case_budget_ms = {"tiny": 0, "quick": 1500}.get(mode, 5000)
        if mode == "tiny":  # the harness test: proves the pipeline only
            self.rounds = 1
            self.samples = {p: 20 for p in PAYLOADS}
            self.payloads = [64, 65536]
            self.fanout = [1, 2]
            self.fanout_placements = ["2cpu"]
            self.fanout_samples = 20
            self.throughput_placements = ["2cpu"]
            self.phase_ms = 20
            self.max_rate = 8000
            self.load_payloads = [64]
            self.load_placements = ["2cpu"]
        elif mode == "quick":
            self.rounds = 2
            self.samples = {64: 1000, 4096: 400, 65536: 300, 1048576: 100,
                            4194304: 20}
            self.payloads = PAYLOADS
            self.fanout = [1, 4, 16]
            self.fanout_placements = ["2cpu"]
            self.fanout_samples = 200
            self.throughput_placements = ["2cpu"]
            self.phase_ms = 100
            self.max_rate = 4e6
            self.load_payloads = [64]
            self.load_placements = ["1cpu", "2cpu"]
        else:
            self.rounds = 3
            self.samples = {64: 6000, 4096: 3000, 65536: 2100, 1048576: 900,
                            4194304: 300}
            self.payloads = PAYLOADS
            self.fanout = FANOUT
            self.fanout_placements = ["1cpu", "2cpu"]
            self.fanout_samples = 1500
            self.throughput_placements = ["1cpu", "2cpu"]
            self.phase_ms = 300
            self.max_rate = 4e6
            self.load_payloads = PAYLOADS
            self.load_placements = ["1cpu", "2cpu"]

    def cases(self, payloads, rounds):
        out = []
        for p in payloads:
            for m in MODES:
                n = max(1, self.samples[p] // rounds)
                w = max(3, min(100, n // 10))
                out.append(f"{p}:{m}:{n}:{w}")
        return ",".join(out)


PLACEMENTS = {
    # name: (label, ping cpu, pong cpu)
    "1cpu": ("1 CPU", 0, 0),
    "2cpu": ("2 CPUs", 0, 1),
}


def percentile(sorted_values, q):
    if not sorted_values:
        return float("nan")
    i = min(len(sorted_values) - 1, max(0, math.ceil(q * len(sorted_values)) - 1))
    return sorted_values[i]


def summarize(values_ns, divide=1.0):
    """Percentiles in us of values (ns), each divided by `divide`."""
    v = sorted(x / divide / US for x in values_ns if x >= 0)
    if not v:
        return None
    return {
        "n": len(v),
        "p50": percentile(v, 0.50),
        "p90": percentile(v, 0.90),
        "p99": percentile(v, 0.99),
        "p999": percentile(v, 0.999),
        "max": v[-1],
        "mean": sum(v) / len(v),
    }


class Interrupted(Exception):
    pass


_LIBC = ctypes.CDLL(None, use_errno=True)
PR_SET_PDEATHSIG = 1


def dies_with_us(sig):
    """preexec_fn: the child gets `sig` if this driver dies, even by
    SIGKILL (no trap runs then), so nothing it started outlives it."""
    parent = os.getpid()

    def setup():
        _LIBC.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:  # the driver died before prctl
            os.kill(os.getpid(), int(sig))
    return setup


class Bench:
    def __init__(self, args):
        self.args = args
        self.root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        self.bin = os.path.abspath(args.bin_dir)
        self.plan = Plan("tiny" if args.tiny else "quick" if args.quick else "full")
        if args.rounds:
            self.plan.rounds = args.rounds
        if args.samples:
            self.plan.samples = {p: args.samples * self.plan.rounds
                                 for p in PAYLOADS}
            self.plan.fanout_samples = args.samples * min(self.plan.rounds, 2)
        sweep_stale()
        self.tmp = tempfile.mkdtemp(prefix=f"tether-bench-{os.getpid()}-")
        self.shm_prefix = f"/dev/shm/tether-bench-{os.getpid()}-"
        self.shm_count = 0
        self.huge_dir = None  # the "+huge" rows' tmpfs, while mounted
        self.roudi = None
        self.roscore = None
        self.load = None
        self.current = None
        self.ros_env = None
        self.dds_domain = random.randint(1, 200)
        self.latency = {}     # key -> accumulated samples
        self.throughput = {}  # key -> list of results
        self.failures = {}    # (system key, test) -> reason
        self.infos = {}       # system key -> info line from its runner
        self.sessions_done = 0
        self.sessions_total = 0
        self.started = time.monotonic()
        self.load_before = os.getloadavg()
        self.probe = {}
        self.no_backend = {}  # wake backend -> why this kernel cannot run it

    # --- processes we own ---------------------------------------------------

    def log_path(self, name):
        return os.path.join(self.tmp, name)

    def start_roudi(self):
        """iox-roudi in a private mount namespace with its own /tmp, /dev/shm."""
        roudi = shutil.which("iox-roudi")
        if roudi is None:
            return "iox-roudi not found (Debian package `iceoryx`)"
        if not shutil.which("unshare") or not shutil.which("nsenter"):
            return "unshare/nsenter (util-linux) not found"
        config = self.log_path("roudi.toml")
        with open(config, "w") as f:
            f.write(ROUDI_CONFIG)
        log = open(self.log_path("roudi.log"), "w")
        # The config is opened as fd 3 before /tmp is covered by the
        # namespace's own tmpfs (this run's files live in the real /tmp).
        script = (f'exec 3<"{config}" && '
                  "mount -t tmpfs -o size=1536m tether-bench-shm /dev/shm && "
                  "mount -t tmpfs -o size=64m tether-bench-tmp /tmp && "
                  f"exec {roudi} -c /dev/fd/3 -l warning")
        self.roudi = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "--",
             "/bin/sh", "-c", script],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True, preexec_fn=dies_with_us(signal.SIGKILL))
        log.close()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.roudi.poll() is not None:
                reason = self.tail(self.log_path("roudi.log"))
                self.roudi = None
                return f"iox-roudi exited: {reason}"
            with open(self.log_path("roudi.log")) as f:
                if "RouDi is ready for clients" in f.read():
                    return None
            time.sleep(0.05)
        self.stop_roudi()
        return "iox-roudi did not get ready in 15 s"

    def stop_roudi(self):
        if self.roudi is None:
            return
        self.stop_process(self.roudi, signal.SIGINT, 8, group=True)
        self.roudi = None

    def start_roscore(self):
        roscore = shutil.which("roscore")
        if roscore is None:
            return "roscore not found (Debian package `ros-core`)"
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        home = self.log_path("ros")
        os.makedirs(os.path.join(home, "log"), exist_ok=True)
        self.ros_env = {
            "ROS_MASTER_URI": f"http://127.0.0.1:{port}",
            "ROS_IP": "127.0.0.1",
            "ROS_HOME": home,
            "ROS_LOG_DIR": os.path.join(home, "log"),
        }
        self.ros_env.pop("ROS_HOSTNAME", None)
        env = dict(os.environ)
        env.pop("ROS_HOSTNAME", None)
        env.update(self.ros_env)
        log = open(self.log_path("roscore.log"), "w")
        self.roscore = subprocess.Popen(
            [roscore, "-p", str(port)], env=env, stdin=subprocess.DEVNULL,
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=dies_with_us(signal.SIGINT))
        log.close()
        master = xmlrpc.client.ServerProxy(self.ros_env["ROS_MASTER_URI"])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.roscore.poll() is not None:
                reason = self.tail(self.log_path("roscore.log"))
                self.roscore = None
                return f"roscore exited: {reason}"
            try:
                code, _, _ = master.getSystemState("/tether_bench")
                if code == 1:
                    return None
            except (OSError, xmlrpc.client.Error):
                pass
            time.sleep(0.1)
        self.stop_roscore()
        return "roscore did not answer on its port within 30 s"

    def stop_roscore(self):
        if self.roscore is None:
            return
        # SIGINT to its process group also stops rosmaster and rosout.
        self.stop_process(self.roscore, signal.SIGINT, 10, group=True)
        self.roscore = None

    def start_load(self, cpu):
        self.load = subprocess.Popen(
            [os.path.join(self.bin, "benchmarks/bench_load"), f"--cpu={cpu}"],
            stdin=subprocess.DEVNULL, preexec_fn=dies_with_us(signal.SIGKILL))
        time.sleep(0.2)

    def stop_load(self):
        if self.load is not None:
            self.stop_process(self.load, signal.SIGKILL, 5)
            self.load = None

    @staticmethod
    def stop_process(p, sig, grace, group=False):
        """Signals `p` (its process group if it leads one), then SIGKILL."""
        if p.poll() is not None:
            return
        try:
            if group:
                os.killpg(p.pid, sig)
            else:
                p.send_signal(sig)
            p.wait(timeout=grace)
        except (subprocess.TimeoutExpired, ProcessLookupError):
            pass
        if p.poll() is None:
            try:
                if group:
                    os.killpg(p.pid, signal.SIGKILL)
                else:
                    p.kill()
            except ProcessLookupError:
                pass
            p.wait()

    @staticmethod
    def tail(path, n=3):
        try:
            with open(path, errors="replace") as f:
                lines = [l.strip() for l in f if l.strip()]
            return " | ".join(lines[-n:]) or "(no output)"
        except OSError:
            return "(no log)"

    # --- huge pages ---------------------------------------------------------

    def mount_huge(self):
        """Mounts a tmpfs with transparent huge pages for the "+huge" rows;
        returns None, or why those rows cannot run."""
        if not os.path.exists("/sys/kernel/mm/transparent_hugepage"):
            return "this kernel has no transparent huge pages"
        if os.geteuid() != 0:
            return ("mounting a huge-page tmpfs needs root (run the bench as "
                    "root, or skip these rows with --systems)")
        # A fresh, unguessable folder: /dev/shm is world-writable, and a
        # name known in advance could be a symlink planted by anyone.
        path = tempfile.mkdtemp(prefix=os.path.basename(self.shm_prefix) +
                                "huge-", dir="/dev/shm")
        # Room for the largest session's channels (1 MiB and 4 MiB cases).
        r = subprocess.run(["mount", "-t", "tmpfs", "-o",
                            "huge=within_size,size=512m,mode=0700", "tmpfs",
                            path], capture_output=True, text=True)
        if r.returncode != 0:
            os.rmdir(path)
            return ("mount -t tmpfs -o huge=within_size failed: " +
                    (r.stderr.strip() or f"exit {r.returncode}"))
        self.huge_dir = path
        return None

    def unmount_huge(self):
        if self.huge_dir is None:
            return
        r = subprocess.run(["umount", "-l", self.huge_dir], capture_output=True,
                           text=True)
        if r.returncode != 0:
            self.note(f"could not unmount {self.huge_dir}: "
                      f"{r.stderr.strip() or r.returncode}; run umount -l "
                      f"{self.huge_dir}")
        else:
            shutil.rmtree(self.huge_dir, ignore_errors=True)
        self.huge_dir = None

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

    def note(self, text):
        print(f"bench: {text}", file=sys.stderr, flush=True)

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
        extra = [f"--test={test}", f"--ping_cpu={ping_cpu}",
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
                                             f"round {r + 1}/{plan.rounds}"))
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
                                    f"round {r + 1}/{rounds}"))
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
                            f"throughput {PLACEMENTS[placement][0]}"))
        if "load" in tests and (os.cpu_count() or 1) >= 2:
            # One round's worth of samples per row.
            cases = plan.cases(plan.load_payloads, plan.rounds)
            for placement in plan.load_placements:
                for s in self.systems:
                    if self.runnable(s, "latency", placement):
                        sessions.append(("latency", True, placement, s,
                                         [f"--cases={cases}"],
                                         f"latency + load {PLACEMENTS[placement][0]}"))
        return sessions

    def run(self):
        self.preflight()
        sessions = self.schedule()
        self.sessions_total = len(sessions)
        self.note(f"{len(sessions)} sessions ({self.plan.mode}); "
                  f"kernel {self.probe.get('kernel')}, default wake backend "
                  f"{self.probe.get('default')}")
        for test, load, placement, system, extra, label in sessions:
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
        if sys.stderr.isatty():
            sys.stderr.write("\r\033[K")
        self.elapsed = time.monotonic() - self.started
        self.load_after = os.getloadavg()


def sweep_stale():
    """Removes what a bench killed with SIGKILL (no cleanup ran) left: its
    temporary directory and any shared-memory root, named by its pid."""
    for pattern in (os.path.join(tempfile.gettempdir(), "tether-bench-*"),
                    "/dev/shm/tether-bench-*"):
        for path in glob.glob(pattern):
            parts = os.path.basename(path).split("-")
            if len(parts) < 3 or not parts[2].isdigit():
                continue
            pid = int(parts[2])
            try:
                os.kill(pid, 0)
                continue  # still running: not ours to touch
            except ProcessLookupError:
                pass
            except PermissionError:
                continue
            if os.path.ismount(path):  # a "+huge" tmpfs: unmount it first
                r = subprocess.run(["umount", "-l", path], capture_output=True,
                                   text=True)
                if r.returncode != 0:
                    print(f"bench: a killed bench left {path} mounted and it "
                          f"cannot be unmounted here ({r.stderr.strip()}): "
                          f"run umount -l {path} as root",
                          file=sys.stderr, flush=True)
                    continue
            shutil.rmtree(path, ignore_errors=True)


# --- results -------------------------------------------------------------------


def dds_config(domain, shm):
    """Cyclone pinned to lo (never the LAN), unicast discovery, a private
    domain; iceoryx shared memory when `shm`."""
    shm_xml = ("<SharedMemory><Enable>true</Enable><LogLevel>warn</LogLevel>"
               "</SharedMemory>") if shm else ""
    return (f'<CycloneDDS><Domain id="{domain}"><General><Interfaces>'
            '<NetworkInterface name="lo"/></Interfaces>'
            "<AllowMulticast>false</AllowMulticast></General><Discovery>"
            "<ParticipantIndex>auto</ParticipantIndex>"
            "<MaxAutoParticipantIndex>40</MaxAutoParticipantIndex>"
            '<Peers><Peer address="127.0.0.1"/></Peers></Discovery>'
            f"{shm_xml}<Tracing><Verbosity>warning</Verbosity>"
            "<OutputFile>stderr</OutputFile></Tracing></Domain></CycloneDDS>")


# Chunks for every payload (+ iceoryx's and Cyclone's headers), enough for
# both iceoryx and Cyclone's shared memory: publisher history 16, queues.
ROUDI_CONFIG = """[general]
version = 1

[[segment]]

[[segment.mempool]]
size = 128
count = 20000

[[segment.mempool]]
size = 4224
count = 512

[[segment.mempool]]
size = 65664
count = 128

[[segment.mempool]]
size = 1048704
count = 64

[[segment.mempool]]
size = 4194432
count = 64
"""


class Report:
    def __init__(self, bench):
        self.b = bench
        self.systems = {s.key: s for s in bench.systems}
        self.rows = []
        self.build_rows()

    def stats(self, key):
        acc = self.b.latency.get(key)
        if acc is None:
            return None
        test = key[0]
        st = summarize(acc["oneway"] if test == "fanout" else acc["rtt"],
                       1.0 if test == "fanout" else 2.0)
        if st is None:
            return None
        st["vcsw_per_rt"] = acc["vcsw"] / max(1, acc["rts"])
        st["ivcsw_per_rt"] = acc["ivcsw"] / max(1, acc["rts"])
        if test == "fanout":
            send = summarize(acc["send"])
            st["send_p50"] = send["p50"] if send else float("nan")
            st["send_p99"] = send["p99"] if send else float("nan")
        return st

    def build_rows(self):
        for key in sorted(self.b.latency, key=self.sort_key):
            test, load, placement, skey, payload, mode, pongs = key
            st = self.stats(key)
            if st is None:
                continue
            row = {"test": test, "load": load, "placement": placement,
                   "system": skey, "label": self.systems[skey].label,
                   "payload": payload, "mode": mode, "subscribers": pongs}
            row.update(st)
            floor = self.stats((test, load, placement, "floor/futex", payload,
                                mode, pongs))
            row["p50_vs_futex_floor"] = ratio(st["p50"], floor and floor["p50"])
            row["p99_vs_futex_floor"] = ratio(st["p99"], floor and floor["p99"])
            for peer in ("iceoryx", "ros1", "dds/net", "dds/shm"):
                other = self.stats((test, load, placement, peer, payload, mode,
                                    pongs))
                row[f"p50_vs_{peer}"] = ratio(st["p50"], other and other["p50"])
            self.rows.append(row)

    def sort_key(self, key):
        test, load, placement, skey, payload, mode, pongs = key
        order = [s.key for s in self.b.systems]
        return (["latency", "fanout"].index(test), load, placement, pongs,
                payload, MODES.index(mode),
                order.index(skey) if skey in order else 99)

    # --- markdown ---

    def markdown(self):
        b = self.b
        out = []
        m = machine_info()
        out.append(f"# tether bench ({b.plan.mode})\n")
        out.append(f"- machine: {m['cpu']}, {m['cpus']} CPUs online, "
                   f"{m['memory']}, kernel {m['kernel']}"
                   f"{', ' + m['virt'] if m['virt'] else ''}")
        out.append(f"- command: `{b.args.command}` at {m['date']}, commit "
                   f"{m['commit']}; {b.plan.rounds} round(s), "
                   f"{b.sessions_done} sessions in {b.elapsed:.0f} s")
        out.append("- other load on the machine: 1-minute load average "
                   f"{b.load_before[0]:.1f} before, {b.load_after[0]:.1f} after "
                   f"({m['cpus']} CPUs; the bench itself adds about 1 to the second; "
                   "beyond that other work competed, and the tails show it)")
        out.append(f"- tether default wake backend: {b.probe.get('default')} "
                   f"({b.probe.get('default_reason', '')})")
        out.append("- one-way latency = round trip / 2, in us; csw/rt = "
                   "voluntary context switches of all processes per round "
                   "trip (a spinner shows ~0); ratios are p50 (or p99) of the "
                   "row over the same case's raw futex floor or peer, in this "
                   "run" + (f"; a case stops recording after "
                            f"{b.plan.case_budget_ms / 1000:g} s (n: the "
                            "samples it got)" if b.plan.case_budget_ms else "")
                   + "\n")
        for name, reason in sorted(b.no_backend.items()):
            if b.args.systems is None or "tether" in b.args.systems.split(","):
                out.append(f"- tether {name}: not measured — {reason}")
        for s in b.systems:
            if s.unavailable:
                out.append(f"- **{s.label}: not measured** — {s.unavailable}")
        for (skey, test), reason in sorted(b.failures.items()):
            label = self.systems[skey].label if skey in self.systems else skey
            out.append(f"- **{label} ({test}): failed** — {reason}")
        out.append("")
        summary = self.summary_table()
        if summary:
            out.append(summary)
            out.append("\n## Every latency row\n")
        out.append(self.latency_table(False))
        if any(r["load"] for r in self.rows):
            out.append("\n## The same with a busy background load on CPU 1\n")
            out.append("(1 CPU: both processes on CPU 0, the load on the other "
                       "CPU; 2 CPUs: the receiver shares CPU 1 with the load)\n")
            out.append(self.latency_table(True))
        if any(r["test"] == "fanout" for r in self.rows):
            out.append(self.fanout_table())
        if b.throughput:
            out.append(self.throughput_table())
        checks = self.issue12_checks()
        if checks:
            out.append("\n## Full-path targets (issue 12), this run\n")
            out += checks
        return "\n".join(out) + "\n"

    def summary_table(self):
        """The comparison at a glance: p50 / p99 one-way per system."""
        default = self.b.probe.get("default")
        keys = [f"tether/{default}", "tether/futex_waitv", "iceoryx", "ros1",
                "dds/net", "dds/shm", "floor/futex", "floor/uring",
                "floor/spin"]
        keys = [k for k in dict.fromkeys(keys) if k in self.systems]
        cases = [(64, "touch16"), (4096, "full"), (1048576, "touch16"),
                 (1048576, "full")]
        rows = []
        for pl in self.b.placements:
            for payload, mode in cases:
                cells = []
                for k in keys:
                    r = self.find(pl, k, payload, mode)
                    cells.append(f"{fmt(r['p50'])} / {fmt(r['p99'])}" if r else "—")
                if any(c != "—" for c in cells):
                    rows.append(f"| {PLACEMENTS[pl][0]} | {human_size(payload)} "
                                f"{mode} | " + " | ".join(cells) + " |")
        if not rows:
            return ""
        head = ["placement", "payload"] + [self.systems[k].label for k in keys]
        return "\n".join(
            ["## Summary: one-way latency p50 / p99 (us)\n",
             "| " + " | ".join(head) + " |",
             "|" + "|".join("---" for _ in head) + "|"] + rows)

    def peer_columns(self):
        cols = []
        for peer, name in (("floor/futex", "futex floor"), ("iceoryx", "iceoryx"),
                           ("ros1", "ROS 1"), ("dds/net", "DDS"),
                           ("dds/shm", "DDS shm")):
            if peer in self.systems and not self.systems[peer].unavailable:
                cols.append((peer, name))
        return cols

    def latency_table(self, load):
        rows = [r for r in self.rows if r["test"] == "latency" and r["load"] == load]
        if not rows:
            return ""
        cols = self.peer_columns()
        head = ["placement", "payload", "write", "system", "n", "p50", "p90",
                "p99", "p99.9", "max", "mean", "csw/rt", "p99 / futex floor"]
        head += [f"p50 / {name}" for _, name in cols]
        lines = ["| " + " | ".join(head) + " |",
                 "|" + "|".join("---" for _ in head) + "|"]
        for r in rows:
            cells = [PLACEMENTS[r["placement"]][0], human_size(r["payload"]),
                     r["mode"], r["label"], str(r["n"])]
            cells += [fmt(r[k]) for k in ("p50", "p90", "p99", "p999", "max",
                                           "mean")]
            cells.append(f"{r['vcsw_per_rt']:.1f}")
            cells.append(fmt_ratio(r["p99_vs_futex_floor"]))
            for peer, _ in cols:
                key = "p50_vs_futex_floor" if peer == "floor/futex" else f"p50_vs_{peer}"
                cells.append(fmt_ratio(r[key]))
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines)

    def fanout_table(self):
        rows = [r for r in self.rows if r["test"] == "fanout"]
        cols = self.peer_columns()
        head = ["placement", "subscribers", "system", "last p50", "last p99",
                "last p99.9", "last max", "send p50", "send p99", "csw/round"]
        head += [f"p50 / {name}" for _, name in cols]
        lines = ["\n## Fan-out, 64 B: one-way latency of the last subscriber "
                 "to get each message and the publisher's send cost (us)\n",
                 "(publisher on CPU 0; subscribers on CPU 1 for 2 CPUs, on CPU 0 "
                 "for 1 CPU; each subscriber replies on its own channel)\n",
                 "| " + " | ".join(head) + " |",
                 "|" + "|".join("---" for _ in head) + "|"]
        for r in rows:
            cells = [PLACEMENTS[r["placement"]][0], str(r["subscribers"]),
                     r["label"], fmt(r["p50"]), fmt(r["p99"]), fmt(r["p999"]),
                     fmt(r["max"]), fmt(r["send_p50"]), fmt(r["send_p99"]),
                     f"{r['vcsw_per_rt']:.1f}"]
            for peer, _ in cols:
                key = "p50_vs_futex_floor" if peer == "floor/futex" else f"p50_vs_{peer}"
                cells.append(fmt_ratio(r[key]))
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines)

    def throughput_rows(self):
        rows = []
        order = [s.key for s in self.b.systems]
        for (placement, skey), results in sorted(
                self.b.throughput.items(),
                key=lambda kv: (kv[0][0], order.index(kv[0][1]))):
            best = max(results, key=lambda r: r.get("max_rate", 0))
            ok_phases = [p for p in best.get("phases", []) if p["ok"]]
            top = max(ok_phases, key=lambda p: p["achieved"]) if ok_phases else None
            first_bad = None
            if top is not None:
                bad = [p for p in best["phases"] if not p["ok"] and p["rate"] > top["rate"]]
                first_bad = min(bad, key=lambda p: p["rate"]) if bad else None
            rows.append({
                "placement": placement, "system": skey,
                "label": self.systems[skey].label,
                "payload": best.get("payload", 64),
                "queue": best.get("queue", 0),
                "max_rate": best.get("max_rate", 0),
                "csw_per_msg": ((top["publisher"][0] + top["subscriber"][0]) /
                                max(1, top["sent"])) if top else None,
                "next_rate": first_bad["rate"] if first_bad else None,
                "next_lost": first_bad["lost"] + max(0, first_bad["sent"] -
                             first_bad["received"] - first_bad["lost"])
                if first_bad else None,
                "next_achieved": first_bad["achieved"] if first_bad else None,
                "phases": best.get("phases", []),
                "info": best.get("info", ""),
            })
        return rows

    def throughput_table(self):
        lines = ["\n## Highest sustained rate without loss, 64 B, one publisher "
                 "to one subscriber (messages/s)\n",
                 f"(each rate runs {self.b.plan.phase_ms} ms; it passes when "
                 "the subscriber got every message and the publisher kept "
                 "the pace; a failing rate is tried twice; doubling from "
                 "1,000/s, then bisecting. Receive queue: what the "
                 "subscriber side can hold, as configured for this test)\n",
                 "| placement | system | receive queue | max msg/s | csw/msg there | next rate tried | what failed there |",
                 "|---|---|---|---|---|---|---|"]
        for r in self.throughput_rows():
            why = f"none up to the {self.b.plan.max_rate:,.0f}/s ceiling"
            if r["next_rate"] is not None:
                why = (f"sent {r['next_achieved']:,.0f}/s, lost {r['next_lost']:,}")
            csw = f"{r['csw_per_msg']:.2f}" if r["csw_per_msg"] is not None else "—"
            nxt = f"{r['next_rate']:,.0f}" if r["next_rate"] else "—"
            lines.append(f"| {PLACEMENTS[r['placement']][0]} | {r['label']} | "
                         f"{r['queue'] or '—'} | {r['max_rate']:,.0f} | {csw} | "
                         f"{nxt} | {why} |")
        return "\n".join(lines)

    def find(self, placement, skey, payload, mode, test="latency", load=False):
        for r in self.rows:
            if (r["test"], r["load"], r["placement"], r["system"], r["payload"],
                    r["mode"]) == (test, load, placement, skey, payload, mode):
                return r
        return None

    def issue12_checks(self):
        default = self.b.probe.get("default")
        if not default:
            return []
        d = f"tether/{default}"
        fallback = "tether/futex_waitv"
        lines = []

        def check(text, num, den, what, target):
            if num is None or den is None:
                return
            v = num[what] / den[what] if den[what] else float("nan")
            verdict = ("" if target is None else
                       f" (target <= {target}x): " +
                       ("met" if v <= target else "NOT met"))
            lines.append(f"- {text}: {num[what]:.1f} / {den[what]:.1f} us = "
                         f"**{v:.2f}x**{verdict}")

        for pl in ("1cpu", "2cpu"):
            name = PLACEMENTS[pl][0]
            check(f"{name}: {default} 1 MiB touch16 p50 / 64 B p50",
                  self.find(pl, d, 1048576, "touch16"),
                  self.find(pl, d, 64, "touch16"), "p50", 1.3)
            check(f"{name}: {default} 1 MiB full p50 / raw-shm memcpy ping-pong "
                  "1 MiB p50", self.find(pl, d, 1048576, "full"),
                  self.find(pl, "floor/futex", 1048576, "full"), "p50", 1.2)
            check(f"{name}: {default} with huge pages, 1 MiB full p50 / the "
                  "memcpy ping-pong on the same memory",
                  self.find(pl, d + "+huge", 1048576, "full"),
                  self.find(pl, "floor/futex+huge", 1048576, "full"), "p50",
                  1.2)
            check(f"{name}: fallback (futex_waitv) 64 B p50 / raw futex p50",
                  self.find(pl, fallback, 64, "touch16"),
                  self.find(pl, "floor/futex", 64, "touch16"), "p50", 1.5)
            check(f"{name}: {default} 64 B p50 / raw futex p50",
                  self.find(pl, d, 64, "touch16"),
                  self.find(pl, "floor/futex", 64, "touch16"), "p50",
                  1.3 if pl == "1cpu" else 1.1)
            if pl == "2cpu":
                check(f"{name}: {default} 64 B p99 / raw futex p99",
                      self.find(pl, d, 64, "touch16"),
                      self.find(pl, "floor/futex", 64, "touch16"), "p99", 1.5)
            # No target: the 64 B ratio split into the kernel's io_uring wake
            # path and tether's own work on top of it.
            check(f"{name}: io_uring futex floor 64 B p50 / raw futex p50 "
                  "(the mechanism; for reference)",
                  self.find(pl, "floor/uring", 64, "touch16"),
                  self.find(pl, "floor/futex", 64, "touch16"), "p50", None)
            check(f"{name}: {default} 64 B p50 / io_uring futex floor p50 "
                  "(tether's own work; for reference)",
                  self.find(pl, d, 64, "touch16"),
                  self.find(pl, "floor/uring", 64, "touch16"), "p50", None)
        return lines

    # --- json ---

    def json(self):
        b = self.b
        return {
            "machine": machine_info(),
            "command": b.args.command,
            "mode": b.plan.mode,
            "rounds": b.plan.rounds,
            "elapsed_s": round(b.elapsed, 1),
            "load_average_before_after": [b.load_before[0], b.load_after[0]],
            "tether_default_backend": b.probe.get("default"),
            "kernel_probe": b.probe,
            "systems": [{"key": s.key, "label": s.label, "info":
                         b.infos.get(s.key, ""), "not_measured": s.unavailable}
                        for s in b.systems],
            "backends_not_available": b.no_backend,
            "failures": [{"system": k[0], "test": k[1], "reason": v}
                         for k, v in sorted(b.failures.items())],
            "latency_unit": "us (one-way; fanout: last subscriber, stamped)",
            "rows": [clean(r) for r in self.rows],
            "throughput": [clean({k: v for k, v in r.items() if k != "phases"} |
                                 {"phases": r["phases"]})
                           for r in self.throughput_rows()],
            "checks": self.issue12_checks(),
        }

    # --- plots ---

    def plots(self, directory):
        if shutil.which("gnuplot") is None:
            return ["gnuplot not found (Debian package gnuplot-nox): no plots"]
        os.makedirs(directory, exist_ok=True)
        data = os.path.join(self.b.tmp, "plots")
        os.makedirs(data, exist_ok=True)
        made, problems = [], []
        jobs = []
        for pl in self.b.placements:
            for payload in (64, 1048576):
                jobs.append(self.cdf_plot(directory, data, pl, payload, "touch16"))
            for mode in MODES:
                jobs.append(self.size_plot(directory, data, pl, mode))
            jobs.append(self.fanout_plot(directory, data, pl))
        for job in jobs:
            if job is None:
                continue
            png, script = job
            path = os.path.join(data, os.path.basename(png) + ".gp")
            with open(path, "w") as f:
                f.write(script)
            r = subprocess.run(["gnuplot", path], capture_output=True, text=True)
            if r.returncode != 0 or not os.path.exists(png):
                problems.append(f"gnuplot failed for {png}: {r.stderr.strip()[:300]}")
            else:
                made.append(png)
        self.made_plots = made
        return problems

    def header(self, title):
        return ("set terminal pngcairo size 1100,700 font ',10'\n"
                f"set title \"{title}\" noenhanced\n"
                "set key outside right top noenhanced\nset grid\n")

    def cdf_plot(self, directory, data, pl, payload, mode):
        series = []
        for s in self.b.systems:
            acc = self.b.latency.get(("latency", False, pl, s.key, payload, mode, 1))
            if not acc or not acc["rtt"]:
                continue
            v = sorted(x / 2 / US for x in acc["rtt"])
            path = os.path.join(data, f"cdf-{pl}-{payload}-{s.key.replace('/', '_')}.dat")
            with open(path, "w") as f:
                n = len(v)
                step = max(1, n // 1500)
                for i in range(0, n, step):
                    f.write(f"{v[i]} {(i + 1) / n}\n")
                for i in range(max(0, n - n // 100), n):  # every tail point
                    f.write(f"{v[i]} {(i + 1) / n}\n")
            series.append((path, s.label, s.key))
        if not series:
            return None
        png = os.path.join(directory, f"cdf-{human_size(payload).replace(' ', '')}-{pl}.png")
        script = self.header(
            f"one-way latency CDF, {human_size(payload)} {mode}, "
            f"{PLACEMENTS[pl][0]} ({self.b.plan.mode} run)")
        script += (f"set output '{png}'\nset logscale x\nset xlabel 'one-way latency (us, log)'\n"
                   "set ylabel 'fraction of messages'\nset yrange [0:1]\n")
        script += "plot " + ", ".join(
            f"'{p}' using 1:2 with lines {style(k)} title '{t}'"
            for p, t, k in series) + "\n"
        return png, script

    def p99_plot(self, directory, data, name, title, x, xsetup, select):
        """p99 against `x` (a row field), one line per system, log-log."""
        series = []
        for s in self.b.systems:
            pts = [r for r in self.rows if r["system"] == s.key and select(r)]
            if len(pts) < 2:
                continue
            path = os.path.join(data, f"{name}-{s.key.replace('/', '_')}.dat")
            with open(path, "w") as f:
                for r in sorted(pts, key=lambda r: r[x]):
                    f.write(f"{r[x]} {r['p99']} {r['p50']}\n")
            series.append((path, s.label, s.key))
        if not series:
            return None
        png = os.path.join(directory, f"{name}.png")
        script = self.header(f"{title} ({self.b.plan.mode} run)")
        script += (f"set output '{png}'\nset logscale xy\n"
                   "set ylabel 'p99 one-way latency (us, log)'\n" + xsetup)
        script += "plot " + ", ".join(
            f"'{p}' using 1:2 with linespoints {style(k)} pt 7 ps 0.8 title '{t}'"
            for p, t, k in series) + "\n"
        return png, script

    def size_plot(self, directory, data, pl, mode):
        return self.p99_plot(
            directory, data, f"p99-vs-payload-{mode}-{pl}",
            f"p99 one-way latency vs payload, {mode}, {PLACEMENTS[pl][0]}",
            "payload",
            "set xlabel 'payload (bytes, log)'\nset xrange [48:6e6]\n"
            "set xtics ('64 B' 64, '4 KiB' 4096, '64 KiB' 65536, "
            "'1 MiB' 1048576, '4 MiB' 4194304)\n",
            lambda r: (r["test"] == "latency" and not r["load"] and
                       r["placement"] == pl and r["mode"] == mode))

    def fanout_plot(self, directory, data, pl):
        return self.p99_plot(
            directory, data, f"p99-vs-subscribers-{pl}",
            f"fan-out: p99 latency of the last subscriber, 64 B, "
            f"{PLACEMENTS[pl][0]}", "subscribers",
            "set xlabel 'subscribers'\nset xrange [0.8:20]\n"
            "set xtics (1, 2, 4, 8, 16)\n",
            lambda r: r["test"] == "fanout" and r["placement"] == pl)


# Line style per system in the plots: tether blue/green (dashed: +spin),
# peers in their own colours, floors grey/black and dashed.
STYLES = {
    "tether/uring_futex": "lc rgb '#1f77b4' lw 2.5",
    "tether/uring_futex+spin": "lc rgb '#1f77b4' lw 1.5 dt 2",
    "tether/futex_waitv": "lc rgb '#2ca02c' lw 2.5",
    "tether/futex_waitv+spin": "lc rgb '#2ca02c' lw 1.5 dt 2",
    "iceoryx": "lc rgb '#ff7f0e' lw 2",
    "ros1": "lc rgb '#d62728' lw 2",
    "dds/net": "lc rgb '#9467bd' lw 2",
    "dds/shm": "lc rgb '#8c564b' lw 2",
    "floor/futex": "lc rgb '#000000' lw 2 dt 4",
    "floor/uring": "lc rgb '#17becf' lw 1.5 dt 4",
    "floor/spin": "lc rgb '#7f7f7f' lw 1.5 dt 4",
    "floor/memcpy": "lc rgb '#bcbd22' lw 1.5 dt 3",
}


def style(key):
    if key in STYLES:
        return STYLES[key]
    return ("lc rgb '#17becf' lw 1.5 dt 2" if key.endswith("+spin")
            else "lc rgb '#17becf' lw 2.5")


def ratio(a, b):
    if b is None or not b or a is None or math.isnan(a) or math.isnan(b):
        return None
    return a / b


def fmt(v):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    if v >= 1000:
        return f"{v:,.0f}"
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def fmt_ratio(v):
    return "—" if v is None else f"{v:.2f}x"


def clean(d):
    out = {}
    for k, v in d.items():
        if isinstance(v, float):
            v = None if math.isnan(v) else round(v, 3)
        out[k] = v
    return out


_MACHINE = None


def machine_info():
    global _MACHINE
    if _MACHINE is not None:
        return _MACHINE
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
            mem = f"{kb / (1 << 20):.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    virt = ""
    if shutil.which("systemd-detect-virt"):
        r = subprocess.run(["systemd-detect-virt", "--vm"], capture_output=True,
                           text=True)
        virt = r.stdout.strip() if r.returncode == 0 else ""
    commit = "unknown"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run(["git", "-C", root, "describe", "--always", "--dirty"],
                       capture_output=True, text=True)
    if r.returncode == 0:
        commit = r.stdout.strip()
    _MACHINE = {
        "cpu": cpu, "cpus": os.cpu_count(), "memory": mem,
        "kernel": os.uname().release, "virt": virt and f"VM ({virt})",
        "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "commit": commit, "hostname": socket.gethostname(),
    }
    return _MACHINE


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
    p.add_argument("--tests", default="latency,fanout,throughput,load",
                   help="comma-separated subset of latency, fanout, "
                        "throughput, load (default: all)")
    p.add_argument("--rounds", type=int, default=0,
                   help="rounds of alternating sessions (default: 3, quick 2)")
    p.add_argument("--samples", type=int, default=0,
                   help="round trips per case and session (overrides the "
                        "plan's per-payload counts)")
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
    bad = tests - {"latency", "fanout", "throughput", "load"}
    if bad:
        p.error(f"--tests: unknown {','.join(sorted(bad))}")
    if args.systems:
        unknown = set(args.systems.split(",")) - set(SYSTEM_GROUPS)
        if unknown:
            p.error(f"--systems: unknown {','.join(sorted(unknown))}; use "
                    f"{','.join(SYSTEM_GROUPS)}")
    if args.quick and args.tiny:
        p.error("--quick and --tiny exclude each other")
    if args.bin_dir is None:
        args.bin_dir = os.path.join(
            os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
            "bazel-bin")
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
