"""What `./tether bench` measures: the systems (rows), the plan (sample
counts and cases for --tiny, --quick and the full run) and the placements."""

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
        # What huge pages buy (tether collapses a large channel's file into
        # them by itself, shm::ChannelOptions::huge_pages): the default with
        # them off. Measured in the targets pass only.
        systems.append(System(f"tether/{default}+4k",
                              f"tether {default}, 4 KiB pages", "tether",
                              "benchmarks/tether_pingpong", variant=default,
                              tests=("targets",), args=["--huge_pages=0"]))
        # Large messages as docs/large-messages.md configures them: the
        # smallest ring (a channel cycles through queueDepth + 1 slots or
        # more, the memory a 1 MiB ping-pong sweeps), on the huge pages tether
        # gives large channels by itself.
        systems.append(System(f"tether/{default}+qd2",
                              f"tether {default}, queueDepth 2",
                              "tether", "benchmarks/tether_pingpong",
                              variant=default, tests=("latency",),
                              args=["--queue_depth=2"]))
        # The transport and loop without the typed layer: the raw sender and
        # watcher, the payload's bytes with no Cap'n Proto framing and no
        # check. Splits tether's own work into the typed layer and the rest.
        # Measured in the targets pass only.
        systems.append(System(f"tether/{default}+raw",
                              f"tether {default}, raw API", "tether",
                              "benchmarks/tether_pingpong", variant=default,
                              tests=("targets",), args=["--api=raw"]))
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
        # The floor on a tmpfs mounted with huge pages: whether the plain
        # floor's two buffers gain from them (they fit the TLB).
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


# Per mode: rounds of alternating latency sessions and samples per payload
# (over all rounds); the payloads of the latency rows; fan-out subscriber
# counts, placements and samples; throughput placements, phase length and
# top rate; the loaded rows' payloads and placements; the targets pass's
# rounds and samples per session.
PLANS = {
    # The harness test: proves the pipeline only.
    "tiny": dict(
        rounds=1, samples={p: 20 for p in PAYLOADS}, payloads=[64, 65536],
        fanout=[1, 2], fanout_placements=["2cpu"], fanout_samples=20,
        throughput_placements=["2cpu"], phase_ms=20, max_rate=8000,
        load_payloads=[64], load_placements=["2cpu"],
        target_rounds=1, target_samples={64: 20, 1048576: 5}),
    "quick": dict(
        rounds=2, samples={64: 1000, 4096: 400, 65536: 300, 1048576: 100,
                           4194304: 20},
        payloads=PAYLOADS,
        fanout=[1, 4, 16], fanout_placements=["2cpu"], fanout_samples=200,
        throughput_placements=["2cpu"], phase_ms=100, max_rate=4e6,
        load_payloads=[64], load_placements=["1cpu", "2cpu"],
        target_rounds=6, target_samples={64: 800, 1048576: 150}),
    "full": dict(
        rounds=6, samples={64: 6000, 4096: 3000, 65536: 2100, 1048576: 900,
                           4194304: 300},
        payloads=PAYLOADS,
        fanout=FANOUT, fanout_placements=["1cpu", "2cpu"],
        fanout_samples=1500,
        throughput_placements=["1cpu", "2cpu"], phase_ms=300, max_rate=4e6,
        load_payloads=PAYLOADS, load_placements=["1cpu", "2cpu"],
        target_rounds=12, target_samples={64: 2000, 1048576: 300}),
}


class Plan:
    """Sample counts and what runs, for --quick, the full suite or --tiny
    (PLANS)."""

    def __init__(self, mode):
        self.mode = mode
        # Latency/fanout: a case stops recording after this long (keeping at
        # least 30 samples), so a system at 100 ms per round trip (Cyclone
        # over UDP at 4 MiB) does not set the length of the run.
        self.case_budget_ms = {"tiny": 0, "quick": 1500}.get(mode, 5000)
        for name, value in PLANS[mode].items():
            setattr(self, name, dict(value) if isinstance(value, dict)
                    else list(value) if isinstance(value, list) else value)

    def target_cases(self):
        """The cases issue 12's targets compare: 64 B, 1 MiB touch16, 1 MiB
        full, each session's share of target_samples."""
        out = []
        for p, m in ((64, "touch16"), (1048576, "touch16"), (1048576, "full")):
            n = self.target_samples[p]
            out.append(f"{p}:{m}:{n}:{max(3, min(100, n // 10))}")
        return ",".join(out)

    def cases(self, payloads, rounds):
        out = []
        for p in payloads:
            for m in MODES:
                n = max(1, self.samples[p] // rounds)
                w = max(3, min(100, n // 10))
                out.append(f"{p}:{m}:{n}:{w}")
        return ",".join(out)


def target_keys(default):
    """The systems issue 12's targets compare, measured in the targets pass:
    tether's default and fallback backends, the large-message settings
    (queueDepth 2), the default on 4 KiB pages and through the raw API, and
    the floors each is held against."""
    return [f"tether/{default}", "tether/futex_waitv", f"tether/{default}+qd2",
            f"tether/{default}+4k", f"tether/{default}+raw", "floor/futex",
            "floor/futex+huge", "floor/uring"]


PLACEMENTS = {
    # name: (label, ping cpu, pong cpu)
    "1cpu": ("1 CPU", 0, 0),
    "2cpu": ("2 CPUs", 0, 1),
}
