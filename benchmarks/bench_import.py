"""`cfkit cases import` of a million-row CSV: streamed, so its memory barely grows with the rows.

Each import runs as its own ``cfkit`` process (the command a user types), its wall time taken around it, its CPU
time and peak resident memory read from the kernel's accounting of the finished child. The time is judged on the
CPU time: the import is one single-threaded process reading a file the page cache holds, so on an idle core its
wall time is its CPU time, while on the shared benchmark machine the wall time mostly counts the waits for a core
(both are written down). The same import of a tenth of the
rows gives the growth ratio: a streamed import holds the ids and image names it must compare (a few hundred bytes
a row) beside a constant. (Before it streamed, the import of 100,000 such rows peaked at 380 MiB, measured with
/usr/bin/time at commit 34a90c7, and 1,000,000 rows did not finish in 300 s.)
"""

from __future__ import annotations

import csv
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROWS = 1_000_000
SMALL = ROWS // 10
HEADER = ["id", "image", "question", "option_A", "option_B", "gold", "domain", "rationale"]


def _source(path: Path, rows: int) -> Path:
    """A CSV of ``rows`` two-option cases, written a row at a time."""
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(HEADER)
        for i in range(rows):
            writer.writerow([f"C{i:07d}", f"images/{i % 5000:04d}/{i}.jpg",
                             f"Is the picture of item {i} suitable for a children's hospital corridor?", "Yes", "No",
                             "AB"[i % 3 == 0], ("painting", "photography", "poster")[i % 3],
                             "The curator's note says the scene is calm and bright."])
    return path


def _import(source: Path, target: Path) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds and peak RSS (MiB) of one ``cfkit cases import`` process."""
    code = (f"import resource, subprocess, sys, time; t = time.perf_counter(); "
            f"r = subprocess.run([sys.executable, '-m', 'cfkit', 'cases', 'import', {str(source)!r}, '--to', "
            f"{str(target)!r}], capture_output=True, text=True); w = time.perf_counter() - t; "
            f"assert r.returncode == 0, r.stderr[-2000:]; u = resource.getrusage(resource.RUSAGE_CHILDREN); "
            f"print(w, u.ru_utime + u.ru_stime, u.ru_maxrss)")
    # A fresh parent per import, so the children's peak is this import's alone.
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1")).stdout.split()
    return float(out[0]), float(out[1]), int(out[2]) / 1024


def run() -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        big = _source(folder / "big.csv", ROWS)
        small = _source(folder / "small.csv", SMALL)
        size_mib = big.stat().st_size / (1 << 20)
        small_s, small_cpu, small_mib = _import(small, folder / "small.jsonl")
        big_s, big_cpu, big_mib = _import(big, folder / "big.jsonl")
        lines = sum(1 for _ in (folder / "big.jsonl").open("rb"))
        assert lines == ROWS, lines
    growth = big_mib / small_mib
    per_row = (big_mib - small_mib) * (1 << 20) / (ROWS - SMALL)
    load = os.getloadavg()[0]
    return [
        {"name": f"cfkit cases import, {ROWS:,} CSV rows", "value": big_cpu, "unit": "s", "target": "≤ 300 s",
         "met": big_cpu <= 300, "note": f"CPU time of one run, a {size_mib:.0f} MiB file; {ROWS / big_cpu:,.0f} rows "
                                        f"a second of CPU; wall {big_s:.0f} s with load average {load:.1f} on "
                                        f"{os.cpu_count()} CPUs (other work shared them)"},
        {"name": f"cfkit cases import, {SMALL:,} CSV rows", "value": small_s, "unit": "s", "target": None,
         "met": None, "note": f"one run, {small_cpu:.1f} s of CPU; {big_s / small_s:.1f}x the time "
                                            f"({big_cpu / small_cpu:.1f}x the CPU) for 10x the rows"},
        {"name": f"peak memory, {ROWS:,} rows", "value": big_mib, "unit": "MiB", "target": "≤ 1 KiB a row",
         "met": per_row <= 1024, "note": f"{per_row:,.0f} bytes a row over the {small_mib:.0f} MiB peak of {SMALL:,} "
                                         f"rows ({growth:.2f}x it for 10x the rows): the ids and image names kept "
                                         "for the duplicate check and the summary; ru_maxrss of the cfkit process"},
    ]

if __name__ == "__main__":
    for row in run():
        print(f"{row['name']:45s} {row['value']:.3f} {row['unit']}  target {row['target']}  {row['note']}")
