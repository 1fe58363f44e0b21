"""``runs rm --drop-cached``: a run removed with the responses it was answered with is asked again.

Without it the response cache answers the same command again, reply for reply,
which is what a user wants after removing a run by mistake, and not what they
want after a server answered as another model: then the same replies come back.
"""

from __future__ import annotations

import json

from cfkit.store import Store
from support.chat_api_server import ChatServer
from support.probe_runs import openai_run, scripted_answer
from support.store_sql import table_rows
from support.workspace import run_cli


def test_a_run_removed_with_its_cached_responses_is_asked_again_and_others_keep_theirs(tiny_ws):
    with ChatServer(scripted_answer) as server:
        run_id = json.loads(openai_run(tiny_ws, server.url, "contextcanvas", "--json").stdout)["run_id"]
        other = json.loads(openai_run(tiny_ws, server.url, "swap", "--json").stdout)["run_id"]
        asked = server.count
        db = tiny_ws / ".cfkit" / "cfkit.db"
        with Store(db):
            cached = len(table_rows(db, "responses"))

        kept = run_cli(["-w", str(tiny_ws), "runs", "rm", run_id])
        assert kept.exit_code == 0 and "cached responses stay" in kept.stderr
        again = json.loads(openai_run(tiny_ws, server.url, "contextcanvas", "--json").stdout)
        assert again["sent"] == 0 and server.count == asked  # the cache answered every request

        dropped = run_cli(["-w", str(tiny_ws), "runs", "rm", again["run_id"], "--drop-cached"])
        assert dropped.exit_code == 0, dropped.stderr
        n = again["total"]
        assert f"dropped {n} cached responses: the same command asks the model again" in dropped.stderr
        assert len(table_rows(db, "responses")) == cached - n  # the swap run's responses stay
        fresh = json.loads(openai_run(tiny_ws, server.url, "contextcanvas", "--json").stdout)
        assert fresh["sent"] == n and server.count == asked + n
        swap = json.loads(openai_run(tiny_ws, server.url, "swap", "--json").stdout)
        assert swap["run_id"] == other and swap["sent"] == 0
