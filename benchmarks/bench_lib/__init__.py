"""The modules of `./tether bench` (benchmarks/bench.py is the entry point).

- systems: what is measured (System, make_systems, Plan, PLACEMENTS).
- processes: what a run starts and must stop (RouDi, roscore, the load,
  the huge-page tmpfs), the Cyclone DDS and RouDi configurations.
- sessions: Bench, a run: preflight, the schedule, the runner sessions and
  their JSON lines, progress output, cleanup.
- stats: percentiles, ratios, number formatting.
- report: Report, the tables and the JSON document.
- targets: issue 12's ratios, from the targets pass (a mixin of Report).
- plots: the gnuplot PNG plots of a Report.

Standard library only.
"""

import os

# The checkout (or runfiles tree) this bench runs from.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
