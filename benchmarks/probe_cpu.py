"""The probe run's wall and CPU time against the floor's, in one run, for this tree and (optionally) another.

    python benchmarks/probe_cpu.py [--rounds 5] [--concurrency 16 64] [--other-tree DIR] [--one-core]

Built on bench_probe.py's workload (probe_workload.py: 1,204 requests, one
640x640 JPEG each, a loopback server answering after 50 ms). Each round runs,
back to back at each concurrency: the floor (the lean aiohttp client), the
same client with pybase64's encoder, this tree's ``probe_suite`` in a fresh
store, and, with ``--other-tree``, the same call made by a child process that
imports cfkit from that tree (e.g. an export of an earlier commit: ``git
archive COMMIT | tar -x -C DIR``), which stays up across rounds so that
neither pays its imports in a timed run. CPU time is this process's (or the
child's) user + system time over the run, so the server's share is not in
it. Each figure is a ratio to the floor taken within its round, then the
median over rounds, so the machine's load changing between rounds does not
enter it. Nothing is written to benchmarks/README.md: this is the tool for
timing a change before the full ``python benchmarks/run.py probe``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
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

from probe_workload import floor, pin_to_one_core, start_server, write_workspace  # noqa: E402

CASES = 1204


def _cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def probe_once(ws_root: Path, url: str, concurrency: int) -> tuple[float, float]:
    """(wall, CPU) seconds of one ``probe_suite`` in a fresh store (the store's opening not counted)."""
    from cfkit.probe import probe_suite
    from cfkit.store import open_store
    from cfkit.workspace import load_workspace

    ws = load_workspace(ws_root)
    for path in ws.store_dir.glob("cfkit.db*"):
        path.unlink()
    with open_store(ws.db_path) as store:
        cpu, wall = _cpu(), time.perf_counter()
        summary = probe_suite(ws, store, "openai:bench-model", "contextcanvas", options={"base_url": url},
                              concurrency=concurrency)
        wall, cpu = time.perf_counter() - wall, _cpu() - cpu
    assert summary.sent == CASES and summary.errors == 0, summary
    return wall, cpu


def _child(ws_root: str, url: str) -> None:
    """A probe runner for another tree: one line in (a concurrency), one line out (wall and CPU)."""
    import cfkit

    print(f"the other tree's cfkit: {Path(cfkit.__file__).parent}", file=sys.stderr, flush=True)
    for line in sys.stdin:
        wall, cpu = probe_once(Path(ws_root), url, int(line))
        print(json.dumps([wall, cpu]), flush=True)


def _timed_floor(url: str, jobs, concurrency: int, encode=None) -> tuple[float, float]:
    cpu = _cpu()
    wall = asyncio.run(floor(url, jobs, concurrency, *(() if encode is None else (encode,))))
    return wall, _cpu() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--other-tree", type=Path, help="a tree to import cfkit from for a second probe run")
    parser.add_argument("--one-core", action="store_true", help="pin this process and its child to CPU 0")
    args = parser.parse_args()

    import pybase64

    from cfkit.backends import load_backend
    from cfkit.probe import plan_suite
    from cfkit.workspace import load_workspace

    server, url = start_server()
    if args.one_core:
        pin_to_one_core(server.pid)  # the children inherit it
    child = None
    try:
        with tempfile.TemporaryDirectory() as tmp:
            ws_root = write_workspace(Path(tmp) / "ws", CASES)
            ws = load_workspace(ws_root)
            plan = plan_suite(ws, "contextcanvas", load_backend("openai:bench-model", {"base_url": url}).capabilities)
            jobs = [(i.request.system, i.request.user, ws.image_root / i.case.images[0]) for i in plan.items]
            if args.other_tree is not None:
                other_ws = write_workspace(Path(tmp) / "other", CASES)  # its own store; the same images
                env = {**os.environ, "PYTHONPATH": str(args.other_tree.resolve())}
                child = subprocess.Popen([sys.executable, __file__, "--child", str(other_ws), url], env=env,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            rows: dict[tuple[str, int], list[tuple[float, float]]] = {}
            for concurrency in args.concurrency:  # once each, untimed: imports and first-use costs
                probe_once(ws_root, url, concurrency)
                if child is not None:
                    child.stdin.write(f"{concurrency}\n")
                    child.stdin.flush()
                    child.stdout.readline()
            for round_ in range(args.rounds):
                for concurrency in args.concurrency:
                    rows.setdefault(("floor", concurrency), []).append(_timed_floor(url, jobs, concurrency))
                    rows.setdefault(("floor, pybase64", concurrency), []).append(
                        _timed_floor(url, jobs, concurrency, pybase64.b64encode))
                    rows.setdefault(("probe run", concurrency), []).append(probe_once(ws_root, url, concurrency))
                    if child is not None:
                        child.stdin.write(f"{concurrency}\n")
                        child.stdin.flush()
                        rows.setdefault(("other tree", concurrency), []).append(
                            tuple(json.loads(child.stdout.readline())))
                print(f"round {round_ + 1} of {args.rounds} done", file=sys.stderr, flush=True)
    finally:
        if child is not None:
            child.stdin.close()
            child.wait()
        server.terminate()
        server.wait()
    load = os.getloadavg()[0]
    print(f"{CASES} requests; medians over {args.rounds} rounds of ratios taken within each round; load average "
          f"{load:.1f} on {os.cpu_count()} CPUs{'; one core' if args.one_core else ''}")
    for concurrency in args.concurrency:
        floors = rows[("floor", concurrency)]
        for name in ("floor", "floor, pybase64", "probe run", "other tree"):
            own = rows.get((name, concurrency))
            if not own:
                continue
            wall = statistics.median(w / f[0] for (w, _), f in zip(own, floors))
            cpu = statistics.median(c / f[1] for (_, c), f in zip(own, floors))
            print(f"  {concurrency:>3} in flight  {name:16s} wall {statistics.median(w for w, _ in own):6.2f} s "
                  f"({wall:.2f}x the floor)  CPU {statistics.median(c for _, c in own):6.2f} s ({cpu:.2f}x)  "
                  f"{statistics.median(c for _, c in own) / CASES * 1e6:5.0f} us a request")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        _child(sys.argv[2], sys.argv[3])
    else:
        main()
