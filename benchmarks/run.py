"""Run every benchmark and rewrite benchmarks/README.md with the figures.

    python benchmarks/run.py            # all of them
    python benchmarks/run.py report     # only bench_report.py

Each ``bench_<topic>.py`` exposes ``run() -> list[dict]`` with the keys
name, value, unit, target, met, note.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent

INTRO = """# Benchmarks

Speed and memory targets of cfkit, measured by `python benchmarks/run.py`, which
rewrites this file. Every figure below was produced by that command on the
machine described; nothing here is typed in by hand. Targets come from the
project's issues; a missed target is marked and explained in its note.
"""


def _machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        kib = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f", {kib / 1024 ** 2:.0f} GiB RAM"
    except (OSError, ValueError, IndexError):
        pass
    return f"{cpu}, {os.cpu_count()} cores{mem}; {platform.system()} {platform.release()}; Python {platform.python_version()}"


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(HERE))
    spec.loader.exec_module(module)
    return module


def _fmt(value: float, unit: str) -> str:
    if unit == "s" and value < 1:
        return f"{value * 1000:.1f} ms"
    if unit == "s":
        return f"{value:.2f} s"
    return f"{value:.3g} {unit}"


def main(selected: list[str]) -> int:
    files = sorted(HERE.glob("bench_*.py"))
    if selected:
        files = [f for f in files if f.stem.removeprefix("bench_") in selected]
    sections = []
    failures = 0
    for path in files:
        start = time.perf_counter()
        print(f"running {path.name} …", file=sys.stderr)
        try:
            rows = _load(path).run()
        except Exception as exc:  # a broken benchmark is reported, the others still run
            rows = [{"name": path.stem, "value": float("nan"), "unit": "", "target": None, "met": False,
                     "note": f"benchmark failed: {type(exc).__name__}: {exc}"}]
        took = time.perf_counter() - start
        lines = [f"## {path.stem.removeprefix('bench_')}", "",
                 f"`python benchmarks/{path.name}` ({took:.0f} s to run)", "",
                 "| measure | value | target | met | note |", "|---|---|---|---|---|"]
        for r in rows:
            met = "—" if r.get("met") is None else ("yes" if r["met"] else "**no**")
            failures += r.get("met") is False
            lines.append(f"| {r['name']} | {_fmt(r['value'], r['unit'])} | {r.get('target') or '—'} | {met} | {r.get('note') or ''} |")
        sections.append("\n".join(lines))
        print("\n".join(lines[4:]), file=sys.stderr)
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=HERE).stdout.strip()
    except OSError:
        commit = "?"
    header = (f"{INTRO}\nLast run: {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC at commit {commit}.  \n"
              f"Machine: {_machine()}.\n")
    if not selected:
        (HERE / "README.md").write_text(header + "\n" + "\n\n".join(sections) + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
