"""While a run plans, the cycle collector is held off (the plan is many objects made at once, none in a cycle); while
it sends, the objects made before (plan, cases, modules) are frozen out of the collector's passes, and given back
when the run ends, however it ends; a cycle made during the run is still collected."""

from __future__ import annotations

import gc
import weakref

import pytest

from cfkit.errors import ImageError
from cfkit.probe import probe_suite
from cfkit.probe.job import prepare_probe
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


def test_planning_makes_no_collector_pass_and_the_collector_comes_back_however_it_ends(tiny_ws):
    ws = load_workspace(tiny_ws)
    passes: list[int] = []

    def count(phase, info):
        if phase == "start":
            passes.append(info["generation"])

    def build_while_planning(plan):  # called inside the planning, as a caller's on_plan is
        made.extend([n] for n in range(20_000))  # dozens of passes' worth of new objects, were the collector on

    made: list[list[int]] = []
    job = prepare_probe(ws, "openai:test-model", "contextcanvas", options={"base_url": "http://127.0.0.1:9/v1"})
    gc.callbacks.append(count)
    try:
        with Store(ws.db_path) as store:
            job.planned(store, on_plan=build_while_planning)
        assert len(made) == 20_000 and passes == []
        assert gc.isenabled()
        assert any(obj is made[0] for obj in gc.get_objects(generation=2))  # counted old: no pass walks them anew
        (tiny_ws / "data" / "images" / "T001.png").write_bytes(b"not an image")
        with Store(ws.db_path) as store, pytest.raises(ImageError):
            job.planned(store)
        assert gc.isenabled()  # also after the planning stopped
    finally:
        gc.callbacks.remove(count)
