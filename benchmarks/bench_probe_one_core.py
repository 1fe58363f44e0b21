"""The probe benchmark on one core: ``bench_probe.run(one_core=True)`` (see bench_probe.py).

Its clients run on CPU 0 alone (as under ``taskset -c 0``; the loopback
server keeps the other CPUs), so a fixed cost cannot hide behind a second
core. Rows: the floor, the transport and the whole probe run at 16 and 64 in
flight (three rounds), then the whole-process first run, cached rerun and
time to first request.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def run() -> list[dict]:
    from bench_probe import run as probe_run

    return probe_run(one_core=True)


if __name__ == "__main__":
    for row in run():
        print(f"{row['name']:75s} {row['value']:>8} {row['unit']:2s}  target {row['target']}  "
              f"met={row['met']}  {row['note']}")
