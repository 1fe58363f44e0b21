"""What ``study run`` shows: its live lines' headline, and the words of its last lines, as ``study status``
gives them."""

from __future__ import annotations

from cfkit.cli.study_display import display_lines
from cfkit.probe import RunProgress
from cfkit.study.jobs import StudyRun


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
    assert display_lines([_run("c", "swap", "planning")], 80, 24)[0] == "study: 0/1 runs done"


def test_the_headline_of_a_large_study_says_whose_requests_it_counts_in_80_columns():
    runs = [_run(f"m{i}", "counterfactual", "sending", RunProgress(total=12040, done=9999)) for i in range(30)]
    runs += [_run(f"w{i}", "counterfactual", "waiting") for i in range(70)]
    head = display_lines(runs, 80, 24)[0]
    assert head == "study: 0/100 runs done, 299970/361200 requests of the 30 runs started" and len(head) <= 80
