"""Statistics and number formatting of the bench report."""

import math

from bench_lib.systems import US


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


def geomean_interval(ratios):
    """The geometric mean of `ratios` (per-round ratios, all > 0) and its 95%
    interval (normal approximation on the logs), or None for fewer than 3.
    The mean of logs is what a ratio of two noisy systems measured side by
    side converges to; pooled percentiles move with whichever rounds the
    host made slow."""
    logs = [math.log(r) for r in ratios if r > 0]
    if len(logs) < 3:
        return None
    n = len(logs)
    mean = sum(logs) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (n - 1))
    half = 1.96 * sd / math.sqrt(n)
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


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
