"""Tables whose figures are copied from a ContextCanvas row say when that row is marked.

The compare table's Base and Other and the counterfactual table's Full are a
model's ContextCanvas accuracy. When that row is incomplete (a request failed:
its case is counted wrong) or not clean, the ContextCanvas table marks it; a
table copied on its own into a paper must say so too.
"""

from __future__ import annotations

import pytest

from support.chat_api_server import ChatServer, Scripted, error_body, user_text
from support.probe_runs import _accepted_edit, openai_run, scripted_answer
from support.workspace import run_cli

pytestmark = pytest.mark.timeout(300)


class SpringFairDown:
    """The scripted model, whose server answers 500 to every question about the spring fair poster (T001) while
    ``down``."""

    down = True

    def __call__(self, body, n) -> Scripted:
        if self.down and "spring fair poster" in user_text(body):
            return Scripted(500, error_body("overloaded", kind="server_error"))
        return scripted_answer(body, n)


@pytest.fixture
def one_failed(tiny_ws):
    """baseline:majority complete on both suites; openai:test-model with one ContextCanvas request failed."""
    _accepted_edit(tiny_ws)
    for suite in ("contextcanvas", "counterfactual"):
        assert run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "baseline:majority", "-s", suite]).exit_code == 0
    script = SpringFairDown()
    with ChatServer(script) as server:
        failed = openai_run(tiny_ws, server.url, "contextcanvas")
        assert failed.exit_code == 1, failed.output
        script.down = False
        assert openai_run(tiny_ws, server.url, "counterfactual").exit_code == 0
    return tiny_ws


def _tables(ws, *extra):
    result = run_cli(["-w", str(ws), "report", "--resamples", "50", "--format", "md",
                      "--compare", "baseline:majority=openai:test-model", *extra])
    assert result.exit_code == 0, result.output
    return {t.split("\n", 1)[0]: t for t in result.stdout.split("### ")[1:]}


def test_a_compare_pair_whose_model_has_an_incomplete_contextcanvas_row_is_marked(one_failed):
    tables = _tables(one_failed)
    canvas = next(t for title, t in tables.items() if title.startswith("ContextCanvas (as in Table 2)"))
    assert "| openai:test-model (incomplete) |" in canvas
    compare = next(t for title, t in tables.items() if title.startswith("Paired comparisons"))
    # Before: "| baseline:majority → openai:test-model | …", its Other accuracy counting the failed case wrong
    # and nothing in the table saying so.
    assert "| baseline:majority → openai:test-model (incomplete) |" in compare
    assert "Rows marked (incomplete) come from a run that did not finish" in compare


def test_the_full_column_names_the_models_whose_contextcanvas_row_is_marked(one_failed):
    tables = _tables(one_failed)
    pairs = next(t for title, t in tables.items() if title.startswith("Counterfactual pairs"))
    # The counterfactual runs are complete: their rows are not marked, but Full is the incomplete row's accuracy.
    assert "| openai:test-model |" in pairs and "| baseline:majority |" in pairs
    assert ("Full is each model's ContextCanvas accuracy, and that row is marked for openai:test-model "
            "(incomplete).") in pairs
    assert "baseline:majority (incomplete)" not in pairs


def test_complete_rows_add_no_marks_to_the_tables_built_from_them(tiny_ws):
    _accepted_edit(tiny_ws)
    for model in ("baseline:majority", "baseline:always-yes"):
        for suite in ("contextcanvas", "counterfactual"):
            assert run_cli(["-w", str(tiny_ws), "probe", "run", "-m", model, "-s", suite]).exit_code == 0
    result = run_cli(["-w", str(tiny_ws), "report", "--resamples", "50", "--format", "md",
                      "--compare", "baseline:majority=baseline:always-yes"])
    assert result.exit_code == 0, result.output
    assert "| baseline:majority → baseline:always-yes |" in result.stdout
    assert "marked for" not in result.stdout and "Rows marked" not in result.stdout
