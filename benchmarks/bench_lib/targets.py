"""Issue 12's full-path targets: the ratios the issue asks for, from the
targets pass (the systems compared, side by side in many short rounds) or,
when it did not run, from the latency rows. A mixin of Report (it uses
Report.find and the Bench's plan and per-round results)."""

from bench_lib.stats import geomean_interval
from bench_lib.systems import PLACEMENTS


class Targets:
    def issue12_checks(self):
        default = self.b.probe.get("default")
        if not default:
            return []
        d = f"tether/{default}"
        fallback = "tether/futex_waitv"
        # The targets pass when it ran (the systems side by side in many short
        # rounds), else the latency rows.
        test = ("targets" if any(r["test"] == "targets" for r in self.rows)
                else "latency")
        lines = []
        measured = False

        def check(pl, text, num, den, what, target):
            nonlocal measured
            a, b = (self.find(pl, k, p, m, test=test)
                    for k, p, m in (num, den))
            if a is None or b is None:
                # Said, not dropped: a target that vanished from the list
                # would read as one that was never asked for.
                absent = num[0] if a is None else den[0]
                lines.append(f"- {PLACEMENTS[pl][0]}: {text}: not measured "
                             f"({self.why_absent(absent, test)})")
                return None
            measured = True
            v = a[what] / b[what] if b[what] else float("nan")
            verdict = ("" if target is None else
                       f" (target <= {target}x): " +
                       ("met" if v <= target else "NOT met"))
            spread = (self.round_spread(pl, num, den, what, target)
                      if test == "targets" else "")
            lines.append(f"- {PLACEMENTS[pl][0]}: {text}: {a[what]:.1f} / "
                         f"{b[what]:.1f} us = **{v:.2f}x**{verdict}{spread}")
            return v

        tiny = (d, 64, "touch16")
        futex = ("floor/futex", 64, "touch16")
        for pl in ("1cpu", "2cpu"):
            check(pl, f"{default} 1 MiB touch16 p50 / 64 B p50",
                  (d, 1048576, "touch16"), tiny, "p50", 1.3)
            check(pl, f"{default} 1 MiB full p50 / raw-shm memcpy ping-pong "
                  "1 MiB p50", (d, 1048576, "full"),
                  ("floor/futex", 1048576, "full"), "p50", 1.2)
            check(pl, f"{default} with the large-message settings (queueDepth "
                  "2, docs/large-messages.md), 1 MiB full p50 / raw-shm "
                  "memcpy ping-pong 1 MiB p50", (d + "+qd2", 1048576, "full"),
                  ("floor/futex", 1048576, "full"), "p50", 1.2)
            check(pl, f"{default} on 4 KiB pages (huge pages off), 1 MiB "
                  "full p50 / raw-shm memcpy ping-pong 1 MiB p50 (what huge "
                  "pages buy; for reference)", (d + "+4k", 1048576, "full"),
                  ("floor/futex", 1048576, "full"), "p50", None)
            check(pl, "raw-shm memcpy ping-pong 1 MiB p50 on huge pages / on "
                  "4 KiB pages (for reference)",
                  ("floor/futex+huge", 1048576, "full"),
                  ("floor/futex", 1048576, "full"), "p50", None)
            check(pl, "fallback (futex_waitv) 64 B p50 / raw futex p50",
                  (fallback, 64, "touch16"), futex, "p50", 1.5)
            tiny_target = 1.3 if pl == "1cpu" else 1.1
            check(pl, f"{default} 64 B p50 / raw futex p50", tiny, futex,
                  "p50", tiny_target)
            if pl == "2cpu":
                check(pl, f"{default} 64 B p99 / raw futex p99", tiny, futex,
                      "p99", 1.5)
            # No target: the 64 B ratio split into the kernel's io_uring wake
            # path and tether's own work on top of it.
            mechanism = check(pl, "io_uring futex floor 64 B p50 / raw futex "
                              "p50 (the mechanism; for reference)",
                              ("floor/uring", 64, "touch16"), futex, "p50",
                              None)
            if (default.startswith("uring") and mechanism is not None
                    and mechanism >= tiny_target):
                # Said, so that the miss is not read as tether's alone.
                lines.append(
                    f"- {PLACEMENTS[pl][0]}: the io_uring futex floor by "
                    f"itself is {mechanism:.2f}x the raw futex here, at or "
                    f"over the {tiny_target}x target: no path that sleeps "
                    "in io_uring meets it on this machine, whatever its own "
                    "work (the next line is tether's share)")
            check(pl, f"{default} 64 B p50 / io_uring futex floor p50 "
                  "(tether's own work; for reference)",
                  tiny, ("floor/uring", 64, "touch16"), "p50", None)
            # tether's own work split: the transport and loop (the raw API,
            # no Cap'n Proto), then the typed layer on top of them.
            raw = (d + "+raw", 64, "touch16")
            check(pl, f"{default} raw API 64 B p50 / raw futex p50 (the "
                  "transport and loop without the typed layer; for "
                  "reference)", raw, futex, "p50", None)
            check(pl, f"{default} 64 B p50 / {default} raw API 64 B p50 "
                  "(the typed layer: Cap'n Proto building, the checked "
                  "read; for reference)", tiny, raw, "p50", None)
        if not measured:
            return []  # e.g. --systems without tether or the floors
        lines.insert(0, self.targets_preamble(test))
        return lines

    def why_absent(self, skey, test):
        """Why a system has no rows for a target, in a few words (the
        failures list above gives a failure's whole reason)."""
        s = self.systems.get(skey)
        if s is None:
            return f"{skey} was not run here (--systems)"
        if s.unavailable:
            return f"{s.label}: {s.unavailable}"
        for t in (test, "all"):
            if (skey, t) in self.b.failures:
                return f"{s.label} failed in the {t} pass: see above"
        return f"{s.label} recorded no samples of this case"

    def targets_preamble(self, test):
        if test != "targets":
            return ("(from the latency rows above: the targets pass did not "
                    "run)\n")
        plan = self.b.plan
        return (f"From the targets pass: the systems compared ran side by "
                f"side in {plan.target_rounds} short rounds (their order "
                f"rotating), {plan.target_samples[64]} round trips of 64 B "
                f"and {plan.target_samples[1048576]} of 1 MiB per session; "
                "each ratio is of the pooled samples, and \"rounds\" gives "
                "the same ratio within each round (min-max) and in how many "
                "rounds it met the target; \"per round\" is the geometric "
                "mean of the rounds' ratios with its 95% interval (more "
                "rounds, --target-rounds, narrow it).\n")

    def round_spread(self, pl, num, den, what, target):
        per = self.b.target_rounds
        a = per.get((pl,) + num, {})
        b = per.get((pl,) + den, {})
        rs = [a[r][what] / b[r][what] for r in sorted(a)
              if r in b and b[r][what]]
        if not rs:
            return ""
        met = "" if target is None else \
            f", met in {sum(v <= target for v in rs)} of {len(rs)}"
        gm = geomean_interval(rs)
        per_round = ("" if gm is None else
                     f"; per round {gm[0]:.3f}x (95% {gm[1]:.3f}-{gm[2]:.3f}x)")
        return f"; rounds {min(rs):.2f}-{max(rs):.2f}x{met}{per_round}"
