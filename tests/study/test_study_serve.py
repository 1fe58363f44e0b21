"""The acceptance study: two baselines, a loopback OpenAI-compatible server and a real `transformers serve`, on
four suites, from one command; killed with SIGKILL in the middle, resumed, and reported with the same numbers as
the per-run reports."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.chat_api_server import ChatServer
from support.counting_server import Counting
from support.store_sql import table_rows
from support.transformers_server import TransformersServe, save_tiny_llava, serving_missing
from support.workspace import REPO, run_cli

_missing = serving_missing()
if _missing is not None:
    pytest.skip(_missing, allow_module_level=True)
pytest.importorskip("torch")

pytestmark = pytest.mark.timeout(600)

SUITES = ("contextcanvas", "counterfactual", "modality", "swap")


def test_four_models_four_suites_kill_resume_and_report(tmp_path):
    ws = tmp_path / "demo"
    made = run_cli(["demo", "--output", str(ws)])  # examples/mini with its edits made, checked and accepted
    assert made.exit_code == 0, made.output
    models = tmp_path / "served"
    save_tiny_llava(models / "tiny-llava")
    script = Counting(0.1)
    with TransformersServe(models, "tiny-llava", models / "serve.log") as served, ChatServer(script) as chat:
        chat.models = [{"id": "loop-model", "object": "model"}]  # the model the study asks of it, as validate checks
        study = ws / "study.toml"
        study.write_text(
            f"[endpoints.loop]\nurl = '{chat.url}'\nconcurrency = 2\n"
            f"[endpoints.serve]\nurl = '{served.url}'\nconcurrency = 2\n"
            "[models.no]\nmodel = 'baseline:always-no'\ngroup = 'baselines'\n"
            "[models.majority]\nmodel = 'baseline:majority'\ngroup = 'baselines'\n"
            "[models.loop]\nmodel = 'openai:loop-model'\nendpoint = 'loop'\ngroup = 'served'\n"
            "[models.tiny]\nmodel = 'openai:tiny-llava'\nendpoint = 'serve'\nmax_tokens = 8\ngroup = 'served'\n"
            + "".join(f"[suites.{s}]\n" for s in SUITES)
            + "[report]\ncompare = [['no', 'loop']]\nresamples = 200\n")
        checked = run_cli(["-w", str(ws), "study", "validate", str(study)])
        assert checked.exit_code == 0, checked.output

        process = subprocess.Popen([sys.executable, "-m", "cfkit", "-w", str(ws), "study", "run", str(study)],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                                   env={**os.environ, "PYTHONPATH": str(REPO)})
        deadline = time.monotonic() + 240
        while len(script.bodies) < 12 and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.02)
        assert process.poll() is None, process.communicate()
        process.send_signal(signal.SIGKILL)
        process.communicate(timeout=60)
        asked_loop = len(script.bodies)
        asked_serve = served.received()
        lost = asked_loop - _stored_for(ws, "loop-model")[1]  # asked, but the reply not committed at the kill

        again = run_cli(["-w", str(ws), "study", "run", str(study), "--json"])
        outcome = json.loads(again.stdout)
        # The tiny random model talks past 8 tokens: its runs are complete but cut off, so not clean (exit 1).
        cut = {(r["model"], r["suite"]) for r in outcome if any("cut off at the token limit" in n for n in r["notes"])}
        assert {model for model, _ in cut} <= {"tiny"}
        assert again.exit_code == (1 if cut else 0), again.output
        assert {(r["model"], r["suite"], r["state"]) for r in outcome} == {
            (m, s, "done") for m in ("no", "majority", "loop", "tiny") for s in SUITES}
        # Only what was missing was asked again: each distinct request at most once more than the kill lost.
        assert len(script.bodies) - len(set(script.bodies)) <= max(lost, 0)
        assert served.received() >= asked_serve
        asked = (len(script.bodies), served.received())
        assert run_cli(["-w", str(ws), "study", "run", str(study)]).exit_code == again.exit_code
        assert (len(script.bodies), served.received()) == asked  # finished: nothing asked again

    status = run_cli(["-w", str(ws), "study", "status", str(study), "--json"])
    assert status.exit_code == 0 and {s["state"] for s in json.loads(status.stdout)} == {"done"}
    run_ids = [s["run_id"] for s in json.loads(status.stdout)]

    together = run_cli(["-w", str(ws), "study", "report", str(study), "--format", "json"])
    assert together.exit_code == 0, together.output
    joint = json.loads(together.stdout)
    assert {r["model"]: r["group"] for r in joint["contextcanvas"]} == {
        "baseline:always-no": "baselines", "baseline:majority": "baselines", "openai:loop-model": "served",
        "openai:tiny-llava": "served"}
    assert [(c["base"], c["other"]) for c in joint["compare"]] == [("baseline:always-no", "openai:loop-model")]
    for run_id in run_ids:
        alone = run_cli(["-w", str(ws), "report", "--run", run_id, "--only-named", "--format", "json",
                         "--resamples", "200"])
        assert alone.exit_code == 0, alone.output
        single = json.loads(alone.stdout)
        for section in ("contextcanvas", "counterfactual", "modality", "swap"):
            for row in single.get(section) or []:
                same = [r for r in joint[section] if r["model"] == row["model"]]
                assert len(same) == 1
                for key, value in row.items():
                    if key not in ("group",) and not key.endswith("_ci"):
                        assert same[0][key] == value, (section, row["model"], key)


    # The finished study in the browser view: every run listed, every model on the report page.
    site = tmp_path / "site"
    exported = run_cli(["view", "-w", str(ws), "--export", str(site)])
    assert exported.exit_code == 0, exported.stderr
    runs_page = (site / "index.html").read_text()
    assert all(run_id in runs_page for run_id in run_ids)
    report_page = (site / "report.html").read_text()
    assert all(model in report_page for model in ("baseline:always-no", "baseline:majority", "openai:loop-model",
                                                   "openai:tiny-llava"))


def _stored_for(ws: Path, model: str) -> tuple[int, int]:
    from cfkit.store import Store

    runs = {r["id"] for r in table_rows(ws, "runs", "id, model") if r["model"] == f"openai:{model}"}
    keys = [r["cache_key"] for r in table_rows(ws, "replies", "run_id, cache_key, error")
            if r["run_id"] in runs and r["error"] != "transport"]
    return len(keys), len({k for k in keys if k is not None})
