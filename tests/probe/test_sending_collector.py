"""While a run sends, the objects made before it (plan, cases, modules) are frozen out of the garbage collector's
passes, and given back when the run ends, however it ends; a cycle made during the run is still collected."""

from __future__ import annotations

import gc
import weakref

import pytest

from cfkit.probe import probe_suite
from cfkit.store import Store
from cfkit.workspace import load_workspace
from support.chat_api_server import ChatServer, Scripted, error_body
from support.probe_runs import scripted_answer


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_objects_made_before_sending_are_frozen_while_it_sends_and_given_back_after(tiny_ws):
    ws = load_workspace(tiny_ws)
    assert gc.get_freeze_count() == 0
    seen = []
    made_during = []

    def script(body, n):
        seen.append(gc.get_freeze_count())
        cycle = _Cycle()  # garbage made while the run sends: collected, not frozen
        made_during.append(weakref.ref(cycle))
        del cycle
        gc.collect()
        return scripted_answer(body, n)

    with ChatServer(script) as server, Store(ws.db_path) as store:
        summary = probe_suite(ws, store, "openai:test-model", "contextcanvas", options={"base_url": server.url})
    assert summary.sent == 3 and summary.status == "done"
    assert seen and all(count > 0 for count in seen)  # the plan and everything before it, frozen
    assert all(ref() is None for ref in made_during)
    assert gc.get_freeze_count() == 0


def test_a_run_that_fails_gives_the_frozen_objects_back(tiny_ws):
    ws = load_workspace(tiny_ws)

    def refuse(body, n):
        return Scripted(401, error_body("Incorrect API key provided"))

    with ChatServer(refuse) as server, Store(ws.db_path) as store:
        with pytest.raises(Exception):
            probe_suite(ws, store, "openai:test-model", "contextcanvas", options={"base_url": server.url})
    assert gc.get_freeze_count() == 0
