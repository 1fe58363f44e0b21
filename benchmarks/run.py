"""Run every benchmark and rewrite benchmarks/README.md with the figures.

    python benchmarks/run.py            # all of them: the whole file is rewritten
    python benchmarks/run.py report     # only bench_report.py: its section is replaced, the others kept

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
    if unit == "MiB":
        return f"{value:.0f} MiB"
    return f"{value:.3g} {unit}"


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=HERE).stdout.strip() or "?"
    except OSError:
        return "?"


def _replace_sections(text: str, sections: dict[str, str]) -> str:
    """``text`` (the README) with each ``## name`` section in ``sections`` replaced (appended when new)."""
    head, *parts = text.split("\n## ")
    kept = {part.split("\n", 1)[0].strip(): "## " + part.rstrip("\n") for part in parts}
    kept.update(sections)
    return head.rstrip("\n") + "\n\n" + "\n\n".join(kept[name] for name in sorted(kept)) + "\n"


def main(selected: list[str]) -> int:
    files = sorted(HERE.glob("bench_*.py"))
    if selected:
        files = [f for f in files if f.stem.removeprefix("bench_") in selected]
    sections: dict[str, str] = {}
    failures = 0
    commit = _commit()
    for path in files:
        start = time.perf_counter()
        print(f"running {path.name} …", file=sys.stderr)
        try:
            rows = _load(path).run()
        except Exception as exc:  # a broken benchmark is reported, the others still run
            rows = [{"name": path.stem, "value": float("nan"), "unit": "", "target": None, "met": False,
                     "note": f"benchmark failed: {type(exc).__name__}: {exc}"}]
        took = time.perf_counter() - start
        name = path.stem.removeprefix("bench_")
        lines = [f"## {name}", "",
                 f"`python benchmarks/{path.name}` ({took:.0f} s to run, at commit {commit})", "",
                 "| measure | value | target | met | note |", "|---|---|---|---|---|"]
        for r in rows:
            met = "—" if r.get("met") is None else ("yes" if r["met"] else "**no**")
            failures += r.get("met") is False
            lines.append(f"| {r['name']} | {_fmt(r['value'], r['unit'])} | {r.get('target') or '—'} | {met} | {r.get('note') or ''} |")
        sections[name] = "\n".join(lines)
        print("\n".join(lines[4:]), file=sys.stderr)
    readme = HERE / "README.md"
    if not selected or not readme.is_file():
        header = (f"{INTRO}\nLast full run: {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC at commit {commit}.  \n"
                  f"Machine: {_machine()}.\n")
        readme.write_text(header + "\n" + "\n\n".join(sections[name] for name in sorted(sections)) + "\n")
    else:  # a partial run replaces its own sections; each section names the commit it was measured at
        readme.write_text(_replace_sections(readme.read_text(), sections))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
