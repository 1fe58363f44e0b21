"""Interleaved A/B of the probe run in two trees (e.g. main and a branch), both as child processes.

    python benchmarks/probe_ab.py TREE_A TREE_B [--rounds 10] [--concurrency 64] [--one-core]

Unlike ``probe_cpu.py --other-tree`` (this tree in-process, the other one a
child), both trees run the same way: each is a child process that imports
cfkit from its tree (``PYTHONPATH``; make one with ``git archive COMMIT | tar
-x -C DIR``) and runs ``probe_suite`` in a fresh store of its own workspace
(the same 1,204 images, probe_workload.py) against one loopback server.
Each round runs both, the order alternating between rounds; the figures are
the medians over rounds of B's wall and CPU time (the child's user + system
time, the server's not in it) over A's within each round, so the machine's
load changing between rounds does not enter them. With ``--one-core`` the
children run on CPU 0 and the server on the others. Nothing is written to
benchmarks/README.md: this is the tool for timing a change against another
tree before the full ``python benchmarks/run.py probe``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from probe_workload import pin_to_one_core, start_server, write_workspace  # noqa: E402

CASES = 1204


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs=2, type=Path, help="the two trees to import cfkit from: A, then B")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--one-core", action="store_true", help="the children on CPU 0, the server on the others")
    args = parser.parse_args()

    server, url = start_server()
    if args.one_core:
        pin_to_one_core(server.pid)  # the children inherit it
    children = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for i, tree in enumerate(args.trees):
                ws = write_workspace(Path(tmp) / f"ws{i}", CASES)
                env = {**os.environ, "PYTHONPATH": str(tree.resolve())}
                children.append(subprocess.Popen([sys.executable, str(HERE / "probe_cpu.py"), "--child", str(ws), url],
                                                 env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))

            def ask(child) -> tuple[float, float]:
                child.stdin.write(f"{args.concurrency}\n")
                child.stdin.flush()
                return tuple(json.loads(child.stdout.readline()))

            for child in children:  # once each, untimed: imports and first-use costs
                ask(child)
            rows: list[list[tuple[float, float]]] = [[], []]
            for round_ in range(args.rounds):
                for i in (0, 1) if round_ % 2 == 0 else (1, 0):
                    rows[i].append(ask(children[i]))
                print(f"round {round_ + 1}: A {rows[0][-1][0]:.2f} s, B {rows[1][-1][0]:.2f} s", file=sys.stderr,
                      flush=True)
    finally:
        for child in children:
            child.stdin.close()
            child.wait()
        server.terminate()
        server.wait()
    print(f"{CASES} requests at {args.concurrency} in flight{', one core' if args.one_core else ''}; "
          f"{args.rounds} rounds, order alternating; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    for name, tree, own in zip("AB", args.trees, rows):
        print(f"  {name} {tree}: wall {statistics.median(w for w, _ in own):.2f} s, "
              f"CPU {statistics.median(c for _, c in own) / CASES * 1e6:.0f} us a request (medians)")
    a, b = rows
    print(f"  B / A: wall {statistics.median(y[0] / x[0] for x, y in zip(a, b)):.3f}, "
          f"CPU {statistics.median(y[1] / x[1] for x, y in zip(a, b)):.3f} (medians of the rounds' ratios)")


if __name__ == "__main__":
    main()
