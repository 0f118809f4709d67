"""The bench report: rows from the sessions' samples, the markdown tables,
the "Full-path targets (issue 12)" section and the JSON document."""

import datetime
import os
import shutil
import socket
import subprocess

from bench_lib import ROOT
from bench_lib.plots import Plots
from bench_lib.stats import clean, fmt, fmt_ratio, ratio, summarize
from bench_lib.systems import MODES, PLACEMENTS, human_size
from bench_lib.targets import Targets


class Report(Plots, Targets):
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
        return (["latency", "fanout", "targets"].index(test), load, placement,
                pongs, payload, MODES.index(mode),
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
            cells += self.peer_ratio_cells(r, cols)
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines)

    @staticmethod
    def peer_ratio_cells(r, cols):
        """Row r's p50 over each peer column's, formatted."""
        return [fmt_ratio(r["p50_vs_futex_floor" if peer == "floor/futex"
                            else f"p50_vs_{peer}"]) for peer, _ in cols]

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
            cells += self.peer_ratio_cells(r, cols)
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
    r = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"],
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

