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
