"""Interleaved A/B of ``cfkit report`` in two trees (e.g. main and a branch), both as child processes.

    python benchmarks/report_ab.py TREE_A TREE_B [--rounds 10] [--models 10]

Each tree is imported by a child process (``PYTHONPATH`` and the working
directory; make one with ``git archive COMMIT | tar -x -C DIR``) that runs
``cfkit report --predictions FILE --all-cases --resamples 1000 --format json``
on bench_hotpaths.py's workspace: 1,204 cases, the modality suite (4
conditions) and contextcanvas, for one model and for ``--models``. Each round
runs all four commands, the trees' order alternating between rounds. Printed:
per tree, the medians over rounds of the wall and CPU time (the child's user +
system) and of the cost of each model beyond the first ((N models - 1 model)
/ (N - 1) within each round, what decides "10 models <= 2x one model"); then B
over A within each round, the median of those ratios. Nothing is written to
benchmarks/README.md: this is the tool for timing a report change against
another tree before ``python benchmarks/run.py hotpaths``.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_hotpaths import ENV, RESAMPLES, _predictions, _workspace  # noqa: E402


def _run(tree: Path, ws: Path, predictions: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one report in ``tree``."""
    cmd = [sys.executable, "-m", "cfkit", "-w", str(ws), "report", "--predictions", str(predictions),
           "--all-cases", "--resamples", str(RESAMPLES), "--format", "json"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=tree, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          env={**ENV, "PYTHONPATH": str(tree)})
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"{tree}: cfkit report failed ({done.returncode}): {done.stderr[-400:]}")
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs=2, type=Path, help="the two trees to import cfkit from: A, then B")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--models", type=int, default=10)
    args = parser.parse_args()
    trees = [tree.resolve() for tree in args.trees]
    for tree in trees:
        if not (tree / "cfkit" / "__init__.py").is_file():
            raise SystemExit(f"{tree} has no cfkit/ package; give a checkout or a 'git archive' of one.")
    many = args.models
    with tempfile.TemporaryDirectory() as tmp:
        ws = _workspace(Path(tmp) / "ws")
        files = {n: _predictions(Path(tmp) / f"p{n}.jsonl", n) for n in (1, many)}
        for tree in trees:  # untimed: each tree's bytecode cache
            _run(tree, ws, files[1])
        times: dict[tuple[int, int], list[tuple[float, float]]] = {(t, n): [] for t in (0, 1) for n in (1, many)}
        for number in range(args.rounds):
            for t in (0, 1) if number % 2 == 0 else (1, 0):
                for n in (1, many):
                    times[(t, n)].append(_run(trees[t], ws, files[n]))

    def per_model(t: int, kind: int) -> list[float]:
        return [(b[kind] - a[kind]) / (many - 1) for a, b in zip(times[(t, 1)], times[(t, many)])]

    for t, tree in enumerate(trees):
        for kind, what in ((0, "wall"), (1, "CPU")):
            one = statistics.median(x[kind] for x in times[(t, 1)])
            top = statistics.median(x[kind] for x in times[(t, many)])
            ratio = statistics.median(b[kind] / a[kind] for a, b in zip(times[(t, 1)], times[(t, many)]))
            print(f"{'AB'[t]} {tree}: {what} 1 model {one:.3f} s, {many} models {top:.3f} s ({ratio:.2f}x one), "
                  f"{statistics.median(per_model(t, kind)) * 1000:.1f} ms a model beyond the first")
    for n in (1, many):
        for kind, what in ((0, "wall"), (1, "CPU")):
            ratio = statistics.median(b[kind] / a[kind] for a, b in zip(times[(0, n)], times[(1, n)]))
            print(f"B/A, {n} model(s), {what}: {ratio:.3f}")
    print(f"{args.rounds} rounds; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
