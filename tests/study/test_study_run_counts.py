"""``study run`` says of each run where its replies came from, as ``probe run`` does of one: already stored, from
the response cache, sent (and how many failed, cut off, empty), in its --json and in one line of its summary; a
run answered from the cache is not shown as if it had been asked."""

from __future__ import annotations

import json

import pytest

from support.chat_api_server import ChatServer
from support.workspace import run_cli

pytestmark = pytest.mark.timeout(120)


def test_study_run_says_how_many_replies_came_from_the_cache_and_how_many_were_sent(tiny_ws):
    ws = tiny_ws
    path = ws / "study.toml"
    env = {"OPENAI_API_KEY": "sk-test", "COLUMNS": "400"}
    with ChatServer() as chat:
        path.write_text(f"[models.t]\nmodel = 'openai:test-model'\nendpoint = '{chat.url}'\n"
                        "[suites.contextcanvas]\n[suites.swap]\n")
        ran = run_cli(["-w", str(ws), "study", "run", str(path)], env=env)
        asked = chat.count
        done = json.loads(run_cli(["-w", str(ws), "study", "status", str(path), "--json"]).stdout)
        total = sum(r["total"] for r in done)
        # The swap suite's original-order questions are the contextcanvas suite's: the cache answered them.
        assert ran.exit_code == 0 and 0 < asked < total, ran.output
        assert (f"study 'study': {total} requests of 2 runs ended here: 0 already stored, {total - asked} from "
                f"cache, {asked} sent (0 failed).") in " ".join(ran.stderr.split())
        # The runs removed, their cached responses kept: the study's runs are made again from the cache alone.
        assert run_cli(["-w", str(ws), "runs", "rm", *[r["run_id"] for r in done]]).exit_code == 0
        cached = run_cli(["-w", str(ws), "study", "run", str(path), "--json"], env=env)
        again = run_cli(["-w", str(ws), "study", "run", str(path)], env=env)
    assert cached.exit_code == 0 and chat.count == asked  # nothing asked
    runs = {r["suite"]: r for r in json.loads(cached.stdout)}
    for r in runs.values():  # before: only 'done' and its total, as if asked
        assert (r["kept"], r["from_cache"], r["sent"]) == (0, r["total"], 0)
        assert (r["errors"], r["invalid"], r["truncated"], r["empty"]) == (0, 0, 0, 0)
    assert again.exit_code == 0
    assert f"{total} requests of 2 runs ended here: {total} already stored, 0 from cache, 0 sent" in " ".join(
        again.stderr.split())
