"""A run's cost, wherever it is shown, says the attempts given up after they were sent (a provider may bill them),
as ``probe run``'s summary says them: also for a priced run that stopped or failed before any priced reply came
(its stored cost was NULL, so ``runs show``/``runs list`` said "cost —" and dropped the attempts), and for a run
without prices (the count, without a dollar figure).

Three runs of one study against a real loopback server, into a real store: (a) priced, every attempt's body
thrown away (no reply); (b) priced, one question's attempts thrown away (two replies); (c) unpriced, every
attempt thrown away. Each is checked in ``runs list`` (and ``--json``), ``runs show`` (and ``--json``), ``study
status`` (and ``--json``) and the view's runs and study pages.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("aiohttp", reason="the openai extra is not installed: pip install 'cfkit-probes[openai]'")

from support.chat_api_server import ChatServer, Scripted, first_option, listing, user_text
from support.store_sql import update_rows
from support.workspace import run_cli

pytestmark = pytest.mark.timeout(120)

THROWN_AWAY = Scripted(body=[])  # a 200 whose body is no completion: read, thrown away, retried

#: What each run's cost says, long (runs show, the summaries) and short (a table's cell). 100 prompt and 20
#: completion tokens at $1,000 a million: $0.12 a reply.
SAID = {
    "allgone": ("$0.00; 6 abandoned attempts may be billed on top (no priced reply to estimate them by)",
                "$0.00 + 6 abandoned"),
    "some": ("$0.24; 2 abandoned attempts may be billed on top: up to ~$0.24", "$0.24 + up to ~$0.24 abandoned"),
    "free": ("no prices known; 6 abandoned attempts may be billed", "no prices known + 6 abandoned"),
}


def _script(body, n):
    model, text = body.get("model"), user_text(body)
    if model in ("allgone", "free") or (model == "some" and "Which event" in text):
        return THROWN_AWAY
    return first_option(body, n)


def _words(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    from support.workspace import write_workspace

    ws = write_workspace(tmp_path_factory.mktemp("cost") / "ws")
    with ChatServer(_script) as chat:
        chat.models = listing(*SAID)
        priced = "price_in = 1000, price_out = 1000, "
        models = "".join(f"[models.{name}]\nmodel = 'openai:{name}'\nendpoint = '{chat.url}'\n"
                         f"options = {{ {priced if name != 'free' else ''}backoff = 0.01, max_retries = 1 }}\n"
                         for name in SAID)
        (ws / "study.toml").write_text(models + "[suites.contextcanvas]\n")
        done = run_cli(["-w", str(ws), "study", "run", "study.toml"],
                       env={"OPENAI_API_KEY": "sk-test", "COLUMNS": "200"})
    assert done.exit_code != 0  # every run is incomplete
    assert "Traceback" not in done.output
    states = json.loads(run_cli(["-w", str(ws), "study", "status", "study.toml", "--json"]).stdout)
    return ws, {s["display"]: s for s in states}, done


def test_runs_show_and_its_json_say_what_may_be_billed(ran):
    ws, states, _ = ran
    for name, (long, _short) in SAID.items():
        run_id = states[name]["run_id"]
        shown = run_cli(["-w", str(ws), "runs", "show", run_id], env={"COLUMNS": "200"})
        assert shown.exit_code == 0, shown.output
        assert f"cost {long}" in _words(shown.stdout), (name, shown.stdout)
        cost = json.loads(run_cli(["-w", str(ws), "runs", "show", run_id, "--json"]).stdout)["cost"]
        assert cost["shown"] == long and cost["abandoned_attempts"] == int(long.split("; ")[1].split()[0])


def test_runs_list_and_its_json_say_what_may_be_billed(ran):
    ws, states, _ = ran
    listed = run_cli(["-w", str(ws), "runs", "list"], env={"COLUMNS": "300"})
    for name, (_long, short) in SAID.items():
        (row,) = [line for line in listed.stdout.splitlines() if states[name]["run_id"] in line]
        assert short in row, listed.stdout
    by_id = {r["id"]: r for r in json.loads(run_cli(["-w", str(ws), "runs", "list", "--json"]).stdout)}
    for name, (long, _short) in SAID.items():
        assert by_id[states[name]["run_id"]]["cost"]["shown"] == long
    assert by_id[states["allgone"]["run_id"]]["cost_usd"] == 0.0  # priced: $0.00 known, not no cost


def test_study_run_and_status_say_what_may_be_billed(ran):
    ws, states, done = ran
    status = run_cli(["-w", str(ws), "study", "status", "study.toml"], env={"COLUMNS": "200"})
    lines = {line.split()[0]: line for line in status.stdout.splitlines() if line.strip()}
    for name, (_long, short) in SAID.items():
        assert short in lines[name], status.stdout
        assert short in done.stdout  # study run's line of the run
    assert (states["allgone"]["cost_usd"], states["allgone"]["abandoned_attempts"]) == (0.0, 6)
    assert (states["free"]["cost_usd"], states["free"]["abandoned_attempts"]) == (None, 6)
    assert ("this invocation spent $0.24; 14 abandoned attempts may be billed on top (no priced reply to "
            "estimate them by)") in _words(done.stderr)


def test_the_views_runs_and_study_pages_say_what_may_be_billed(ran, tmp_path):
    pytest.importorskip("jinja2", reason="the view extra is not installed")
    ws, states, _ = ran
    site = tmp_path / "site"
    assert run_cli(["-w", str(ws), "view", "--study", "study.toml", "--export", str(site)]).exit_code == 0
    runs_page, study_page = (site / "index.html").read_text(), (site / "study.html").read_text()
    for name, (long, short) in SAID.items():
        row = runs_page.split(f'id="run-{states[name]["run_id"]}"')[1].split("</tr>")[0]
        cell = row.split('data-label="Cost"')[1].split("</td>")[0]
        assert long.split("; ")[1] in cell, (name, cell)
        assert short in study_page, name
    free = runs_page.split(f'id="run-{states["free"]["run_id"]}"')[1].split("</tr>")[0]
    assert "no priced reply" not in free  # the count alone, without prices


def test_a_store_whose_priced_run_kept_no_cost_still_says_it(ran, tmp_path):
    """A store an earlier cfkit wrote: the priced run with no reply kept cost_usd NULL; it reads as $0.00."""
    import shutil

    ws, states, _ = ran
    older = tmp_path / "older"
    shutil.copytree(ws, older)
    update_rows(older, "runs", {"cost_usd": None}, {"id": states["allgone"]["run_id"]})
    shown = run_cli(["-w", str(older), "runs", "show", states["allgone"]["run_id"]], env={"COLUMNS": "200"})
    assert f"cost {SAID['allgone'][0]}" in _words(shown.stdout), shown.stdout
