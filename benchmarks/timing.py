"""The one timing helper the benchmarks share."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def median_seconds(func: Callable[[], object], runs: int) -> float:
    """Median wall time of ``runs`` calls of ``func``, in seconds."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def median_wall_and_cpu(func: Callable[[], object], runs: int) -> tuple[float, float]:
    """Medians of the wall time and of this process's CPU time over ``runs`` calls of ``func``, in seconds.

    For single-threaded work the CPU time is what the call costs whatever else shares the machine; the wall
    time on a loaded machine also counts the waits for a core."""
    walls, cpus = [], []
    for _ in range(runs):
        start, cpu = time.perf_counter(), time.process_time()
        func()
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus)
