"""What ``study run`` shows: its live lines' headline, and the words of its last lines, as ``study status``
gives them."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from cfkit.cli.study_display import display_lines
from cfkit.probe import RunProgress
from cfkit.study.jobs import StudyRun
from support.chat_api_server import ChatServer, first_option, listing
from support.probe_runs import many_cases

pytestmark = pytest.mark.timeout(300)


def _run(name: str, suite: str, state: str, progress: RunProgress | None = None) -> StudyRun:
    run = StudyRun(name, suite, name, "x", state=state)
    run.progress = progress
    return run


def test_the_headline_counts_the_requests_of_the_runs_started_and_says_so_while_others_wait():
    """Runs waiting their turn have no count yet: '63/65 requests' read as the whole study's (it was 4 runs')."""
    runs = [_run("a", "contextcanvas", "done", RunProgress(total=30, done=30)),
            _run("a", "swap", "sending", RunProgress(total=20, done=18)),
            _run("b", "contextcanvas", "done", RunProgress(total=10, done=10)),
            _run("b", "swap", "sending", RunProgress(total=5, done=5)),
            _run("c", "contextcanvas", "waiting"), _run("c", "swap", "waiting")]
    head = display_lines(runs, 80, 24)[0]
    assert head == "study: 2/6 runs done, 63/65 requests of the 4 runs started"
    for run in runs[4:]:  # every run counted: the requests are the study's
        run.state, run.progress = "sending", RunProgress(total=60, done=0)
    assert display_lines(runs, 80, 24)[0] == "study: 2/6 runs done, 63/185 requests"
    assert display_lines([_run("c", "swap", "planning")], 80, 24)[0] == "study: 0/1 run done"


def test_the_headline_of_a_large_study_says_whose_requests_it_counts_in_80_columns():
    runs = [_run(f"m{i}", "counterfactual", "sending", RunProgress(total=12040, done=9999)) for i in range(30)]
    runs += [_run(f"w{i}", "counterfactual", "waiting") for i in range(70)]
    head = display_lines(runs, 80, 24)[0]
    assert head == "study: 0/100 runs done, 299970/361200 requests of the 30 runs started" and len(head) <= 80


@pytest.mark.parametrize("stop", ["sending", "planning"])
def test_a_run_a_stop_left_unbegun_is_named_as_study_status_names_it(tmp_path, stop):
    """Ctrl-C while model a's first suite is sent (its second waits its turn), or while the second is planned:
    the second was called interrupted, and 'study status' says it is not started."""
    from cfkit.store import open_store
    from cfkit.study import load_study
    from cfkit.study.running import run_study
    from cfkit.study.state import study_status
    from cfkit.workspace import load_workspace

    ws = load_workspace(many_cases(tmp_path / "ws", 6))
    released = threading.Event()

    def first_only(body, n):  # the first request answered, the rest held until the study has stopped
        if n > 1:
            released.wait(60)
        return first_option(body, n)

    with ChatServer(first_only) as chat:
        chat.models = listing("model-a")
        path = tmp_path / "study.toml"
        path.write_text(f"[models.a]\nmodel = 'openai:model-a'\nendpoint = '{chat.url}'\n"
                        "[suites.contextcanvas]\n[suites.swap]\n")
        study = load_study(path)

        stopped = []

        def update(runs) -> None:
            first, second = runs
            if stop == "sending" and first.progress is not None and first.progress.done and not stopped:
                stopped.append(first.progress.done)
                os.kill(os.getpid(), signal.SIGINT)  # as Ctrl-C: the event loop takes it and stops the sending
            if stop == "planning" and second.state == "planning":
                raise KeyboardInterrupt

        with open_store(ws.db_path) as store:
            try:
                result = run_study(ws, study, store, on_update=update)
            finally:
                released.set()
            said = {r.suite: r.state for r in result.runs}
            status = {x.suite: x.state for x in study_status(ws, study, store)}
    assert result.interrupted
    assert said["swap"] == status["swap"] == "not started"
    if stop == "sending":  # sent in part ('study status' says incomplete, interrupted by Ctrl-C)
        assert said["contextcanvas"] == "interrupted" and status["contextcanvas"] == "incomplete"
    else:
        assert said["contextcanvas"] == status["contextcanvas"] == "not started"
