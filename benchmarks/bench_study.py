"""A study of 10 models x 1,204 contextcanvas cases against the 50 ms loopback server of bench_probe.py.

The 10 models sit behind two endpoints (5 each, 16 requests in flight per
endpoint, both names pointing at the one loopback server process). An
endpoint's ideal time is its requests x 50 ms / its concurrency; the endpoints
send at the same time, so the ideal study takes the longest of them, and a
shell loop of probe runs would at best take their sum. Reported: the whole
study's wall time as a ratio to each, and to the lean client of bench_probe.py
sending the same requests (on a small machine the images' encoding, not the
server, sets the pace), and the times of 'study status' and 'study report'
on the finished study.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from probe_workload import LATENCY, floor, start_server, write_workspace  # noqa: E402

CASES = 1204
MODELS = 10
CONCURRENCY = 16


def _study(path: Path, url: str) -> Path:
    text = "".join(f"[endpoints.e{e}]\nurl = '{url}'\nconcurrency = {CONCURRENCY}\n" for e in (0, 1))
    text += "".join(f"[models.m{i}]\nmodel = 'openai:bench-model-{i}'\nendpoint = 'e{i % 2}'\n" for i in range(MODELS))
    text += "[suites.contextcanvas]\n[report]\nresamples = 1000\n"
    path.write_text(text)
    return path


def _floor_s(ws, url: str) -> float:
    """The lean aiohttp client of bench_probe.py sending the same 12,040 requests, 32 in flight: what this machine
    can do at best, with no store, no parsing and no pacing."""
    import asyncio

    from cfkit.backends import load_backend
    from cfkit.probe import plan_suite

    plan = plan_suite(ws, "contextcanvas", load_backend("openai:bench-model", {"base_url": url}).capabilities)
    jobs = [(item.request.system, item.request.user, ws.image_root / item.case.images[0]) for item in plan.items]
    return asyncio.run(floor(url, jobs * MODELS, 2 * CONCURRENCY))


def run() -> list[dict]:
    from cfkit.store import Store, open_store
    from cfkit.study import load_study
    from cfkit.study.reporting import study_report
    from cfkit.study.running import run_study
    from cfkit.study.state import study_status
    from cfkit.workspace import load_workspace

    server, url = start_server()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            ws = load_workspace(write_workspace(Path(tmp) / "ws", CASES))
            for spec in (ws.root / "interventions").glob("*.yaml"):
                spec.unlink()  # the template's one spec names a case this workload replaced
            study = load_study(_study(ws.root / "study.toml", url))
            floor_s = _floor_s(ws, url)
            started = time.perf_counter()
            with open_store(ws.db_path) as store:
                result = run_study(ws, study, store)
            study_s = time.perf_counter() - started
            assert not result.incomplete, [(r.label, r.state, r.error) for r in result.incomplete]
            started = time.perf_counter()
            with Store(ws.db_path) as store:
                states = study_status(ws, study, store)
            status_s = time.perf_counter() - started
            assert {s.state for s in states} == {"done"}
            started = time.perf_counter()
            study_report(ws, study)
            report_s = time.perf_counter() - started
    finally:
        server.terminate()
        server.wait()
    per_endpoint = CASES * (MODELS // 2) * LATENCY / CONCURRENCY
    ideal_parallel, ideal_sum = per_endpoint, 2 * per_endpoint
    setting = (f"{MODELS} models x {CASES} cases = {MODELS * CASES} requests, two endpoints of {CONCURRENCY} in "
               f"flight each, {int(LATENCY * 1000)} ms server latency")
    return [
        {"name": "study run: wall time / the lean client's (the floor)", "value": study_s / floor_s, "unit": "x",
         "target": None, "met": None,
         "note": f"floor {floor_s:.1f} s: the same requests from a bare aiohttp loop, 32 in flight, nothing stored"},
        {"name": "study run: wall time / the longest ideal endpoint time", "value": study_s / ideal_parallel,
         "unit": "x", "target": None, "met": None,
         "note": f"{study_s:.1f} s; ideal {ideal_parallel:.1f} s per endpoint, the endpoints at once. {setting}"},
        {"name": "study run: wall time / the sum of the ideal endpoint times", "value": study_s / ideal_sum,
         "unit": "x", "target": None, "met": None,
         "note": f"the best a loop of probe runs, one after another, could do is {ideal_sum:.1f} s"},
        {"name": "study status on the finished study", "value": status_s, "unit": "s", "target": None, "met": None,
         "note": "10 runs: start-up checks, and each run found finished by its inputs manifest"},
        {"name": "study report on the finished study", "value": report_s, "unit": "s", "target": None, "met": None,
         "note": "status, then the report of 10 models (1,000 resamples)"},
    ]


if __name__ == "__main__":
    for row in run():
        print(row)
