"""A hostile Batch API server (tests/support/batch_api_server.py, ``hostile=``) costs no paid result and no traceback.

Each mode is a way a proxy or a provider can misbehave: a malformed line in
an output file, an HTML page with status 200 (upload, create, status, file),
one batch id for every batch, a result repeated with another answer, a batch
id that is a path, an output file sent a byte at a time. In each, what was
answered is stored, what was not is a failure that the next ``probe run``
sends again, and the user reads one line.
"""

from __future__ import annotations

import json
import time

import pytest

from cfkit.store import Store, batches
from support.batch_api_server import HOSTILE, BatchServer
from support.probe_runs import FAST, replies, scripted_answer
from support.store_sql import add_schema_5_batch, store_as_of, table_rows
from support.workspace import run_cli

#: Time allowed beyond a deadline for the event loop and closing the socket, on a loaded machine.
SLACK_S = 3.0


def batch_run(ws, url, *extra):
    return run_cli(["-w", str(ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas",
                    "--base-url", url, *FAST, "--batch", "--json", *extra])


def live_run(ws, url):
    return run_cli(["-w", str(ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas",
                    "--base-url", url, *FAST, "--json"])


def collect(ws, run_id, *extra):
    return run_cli(["-w", str(ws), "probe", "collect", run_id, *extra])


def one_line(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert "Traceback" not in result.stderr and "bug in cfkit" not in result.stderr, result.stderr
    assert len(lines) == 1, result.stderr
    return lines[0]


def _submitted(ws, server):
    result = batch_run(ws, server.url)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)["run_id"]


def test_every_hostile_mode_has_a_case_here():
    tested = {"malformed_line", "html_upload", "html_create", "html_get", "html_content", "reused_id",
              "duplicate_id", "path_id", "drip_content"}
    assert tested == set(HOSTILE)


def test_a_malformed_result_line_fails_only_its_request_which_the_next_run_sends_again(tiny_ws):
    with BatchServer(scripted_answer, polls=1, hostile="malformed_line") as server:
        run_id = _submitted(tiny_ws, server)
        result = collect(tiny_ws, run_id, "--json")
        assert result.exit_code == 1 and "Traceback" not in result.stderr
        data = json.loads(result.stdout)
        assert (data["stored"], data["failed"], data["waiting"]) == (3, 1, [])
        assert any("line 1 is not a result line" in p for p in data["problems"])
        assert any("line 4 is not a result line" in p for p in data["problems"])  # the HTML line
        stored = {r["case_id"]: r for r in replies(tiny_ws)}
        failed = [r for r in stored.values() if r["error"] == "transport"]
        assert len(failed) == 1 and "line 1 of its results is not a JSON object" in failed[0]["detail"]
        assert sum(r["answer"] is not None for r in stored.values()) == 2
        assert [r["collected_at"] is not None for r in table_rows(tiny_ws, "batches", "collected_at")] == [True]
        # The run is no longer in flight: the same command sends the one failed request live.
        again = live_run(tiny_ws, server.url)
        assert again.exit_code == 0, again.stderr
        assert json.loads(again.stdout)["sent"] == 1 and server.calls("POST", "/chat/completions") == 1


@pytest.mark.parametrize("mode", ["html_upload", "html_create"])
def test_an_html_page_with_status_200_at_submission_is_one_line(tiny_ws, mode):
    with BatchServer(scripted_answer, polls=1, hostile=mode) as server:
        result = batch_run(tiny_ws, server.url)
        assert result.exit_code == 1
        line = one_line(result)
        assert "with HTTP 200 but not JSON (text/html: '<html><body>Please log in" in line and server.url in line
        assert table_rows(tiny_ws, "runs", "status") == [{"status": "incomplete"}]
        server.hostile = None
        assert live_run(tiny_ws, server.url).exit_code == 0  # nothing was lost on the way


@pytest.mark.parametrize("mode", ["html_get", "html_content"])
def test_an_html_page_with_status_200_while_collecting_is_one_line_and_collect_goes_on_later(tiny_ws, mode):
    with BatchServer(scripted_answer, polls=1) as server:
        run_id = _submitted(tiny_ws, server)
        server.hostile = mode
        result = collect(tiny_ws, run_id)
        assert result.exit_code == 1
        line = one_line(result)
        assert "with HTTP 200 but not JSON" in line or "is not a result file ('<html><body>Please" in line
        assert replies(tiny_ws) == [] and table_rows(tiny_ws, "batches", "collected_at")[0]["collected_at"] is None
        server.hostile = None
        result = collect(tiny_ws, run_id, "--json")
        assert result.exit_code == 0, result.stderr
        assert json.loads(result.stdout)["stored"] == 3


def test_a_reused_batch_id_is_kept_apart_here_and_each_batch_is_collected(tiny_ws):
    with BatchServer(scripted_answer, polls=1, hostile="reused_id") as server:
        first = _submitted(tiny_ws, server)
        assert collect(tiny_ws, first).exit_code == 0
        second_run = batch_run(tiny_ws, server.url, "--max-tokens", "77")  # other settings: another run
        assert second_run.exit_code == 0, second_run.stderr
        second = json.loads(second_run.stdout)
        assert second["batch_ids"] == ["batch_reused~2"] and second["run_id"] != first
        result = collect(tiny_ws, second["run_id"], "--json")
        assert result.exit_code == 0, result.stderr
    kept = table_rows(tiny_ws, "batches", "id, server_id, run_id", order_by="rowid")
    assert [(r["id"], r["server_id"]) for r in kept] == [("batch_reused", "batch_reused"),
                                                         ("batch_reused~2", "batch_reused")]
    assert len(replies(tiny_ws, second["run_id"])) == 3


def test_a_result_answered_twice_keeps_the_first_answer_and_says_so(tiny_ws):
    with BatchServer(scripted_answer, polls=1, hostile="duplicate_id") as server:
        run_id = _submitted(tiny_ws, server)
        result = collect(tiny_ws, run_id, "--json")
        assert result.exit_code == 0, result.stderr
        data = json.loads(result.stdout)
        assert (data["stored"], data["failed"]) == (3, 0)
        assert len(data["problems"]) == 1 and "answered already; the first answer is kept" in data["problems"][0]
        shown = collect(tiny_ws, run_id)  # and in the text output
    assert all(r["answer"] is not None for r in replies(tiny_ws))
    assert not any("a second, different answer" in (r["raw"] or "") for r in replies(tiny_ws))
    assert shown.exit_code == 0


def test_a_batch_id_that_is_a_path_never_reaches_a_request_path(tiny_ws):
    with BatchServer(scripted_answer, polls=1, hostile="path_id") as server:
        result = batch_run(tiny_ws, server.url)
        assert result.exit_code == 1
        line = one_line(result)
        assert "a batch id that is not a plain id ('../files/file_" in line
        # Nothing was asked at a path the server chose (only the model list, before the upload).
        assert [path for method, path, _ in server.log if method == "GET"] == ["/v1/models"]
        assert table_rows(tiny_ws, "batches") == []
        assert table_rows(tiny_ws, "runs", "status") == [{"status": "incomplete"}]


@pytest.mark.parametrize("bad", ["../x", "..", "a/b", "a?b", "a#b", "a%2Fb", "a\nb", "", "a" * 300, 7, None])
def test_server_ids_are_checked_before_they_are_used(bad):
    from cfkit.backends.openai_batch import server_id
    from cfkit.errors import TransportError

    with pytest.raises(TransportError, match="not a plain id"):
        server_id(bad, "batch", "http://x")
    assert server_id("batch_6721abc-DEF.1", "batch", "http://x") == "batch_6721abc-DEF.1"


def test_an_output_file_that_drips_ends_at_the_download_deadline_and_keeps_nothing_partial(tiny_ws):
    with BatchServer(scripted_answer, polls=1, hostile="drip_content", drip_s=0.5) as server:
        run_id = _submitted(tiny_ws, server)
        started = time.perf_counter()
        result = collect(tiny_ws, run_id, "--timeout", "2")
        elapsed = time.perf_counter() - started
        assert result.exit_code == 1
        assert "2 s" in one_line(result) and elapsed < 2 + SLACK_S
        assert replies(tiny_ws) == []  # nothing half-read was stored
        server.hostile = None
        assert collect(tiny_ws, run_id).exit_code == 0
    assert len(replies(tiny_ws)) == 3


def test_a_schema_5_store_with_batches_keeps_them_readable(tmp_path):
    path = tmp_path / "cfkit.db"
    with Store(path):
        pass
    store_as_of(path, 5)
    add_schema_5_batch(path, "batch_old", "r1")
    with Store(path) as store:
        [old] = batches.for_run(store, "r1")
        assert (old.id, old.provider_id) == ("batch_old", "batch_old")
        assert batches.add(store, "batch_old", "r2", endpoint=None, input_file_id="f", input_path=None,
                           requests=[], status="validating") == "batch_old~2"
