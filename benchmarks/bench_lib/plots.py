"""The gnuplot PNG plots of a bench Report: latency CDFs, p99 against
payload and against subscribers, one line per system."""

import os
import shutil
import subprocess

from bench_lib.systems import MODES, PLACEMENTS, US, human_size


class Plots:
    """The base of Report (bench_lib.report): uses its b (the Bench) and
    rows."""

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
    "tether/uring_futex+qd2": "lc rgb '#e377c2' lw 2.5",
    "floor/futex": "lc rgb '#000000' lw 2 dt 4",
    "floor/futex+huge": "lc rgb '#e377c2' lw 1.5 dt 4",
    "floor/uring": "lc rgb '#1f77b4' lw 1.5 dt 4",
    "floor/spin": "lc rgb '#7f7f7f' lw 1.5 dt 4",
    "floor/memcpy": "lc rgb '#bcbd22' lw 1.5 dt 3",
}


def style(key):
    if key in STYLES:
        return STYLES[key]
    return ("lc rgb '#17becf' lw 1.5 dt 2" if key.endswith("+spin")
            else "lc rgb '#17becf' lw 2.5")
