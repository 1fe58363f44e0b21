"""While a run sends, the objects made before it (plan, cases, modules) are frozen out of the garbage collector's
passes and its youngest generation is collected less often; both are given back when the run ends, however it
ends; a cycle made during the run is still collected."""

from __future__ import annotations

import gc
import weakref

import pytest

from cfkit.probe import probe_suite
from cfkit.probe.sending import SENDING_GC_THRESHOLD
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

    before = gc.get_threshold()
    thresholds = []

    def script(body, n):
        seen.append(gc.get_freeze_count())
        thresholds.append(gc.get_threshold())
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
    assert set(thresholds) == {(SENDING_GC_THRESHOLD, *before[1:])} and gc.get_threshold() == before


def test_a_collector_turned_off_stays_off_while_a_run_sends(tiny_ws):
    ws = load_workspace(tiny_ws)
    before = gc.get_threshold()
    thresholds = []

    def script(body, n):
        thresholds.append(gc.get_threshold()[0])
        return scripted_answer(body, n)

    gc.set_threshold(0, *before[1:])
    try:
        with ChatServer(script) as server, Store(ws.db_path) as store:
            probe_suite(ws, store, "openai:test-model", "contextcanvas", options={"base_url": server.url})
        assert thresholds == [0, 0, 0] and gc.get_threshold()[0] == 0
    finally:
        gc.set_threshold(*before)


def test_a_run_that_fails_gives_the_frozen_objects_back(tiny_ws):
    ws = load_workspace(tiny_ws)

    before = gc.get_threshold()

    def refuse(body, n):
        return Scripted(401, error_body("Incorrect API key provided"))

    with ChatServer(refuse) as server, Store(ws.db_path) as store:
        with pytest.raises(Exception):
            probe_suite(ws, store, "openai:test-model", "contextcanvas", options={"base_url": server.url})
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == before
