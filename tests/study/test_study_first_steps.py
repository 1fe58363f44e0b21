"""A new researcher's first study, in a workspace that has made nothing yet: each problem says how to go on."""

from __future__ import annotations

import pytest

from support.probe_runs import _accepted_edit
from support.workspace import run_cli

pytestmark = pytest.mark.timeout(300)


def test_a_counterfactual_suite_before_any_edit_says_how_to_make_the_edits(tiny_ws):
    path = tiny_ws / "study.toml"
    path.write_text("[models.majority]\nmodel = 'baseline:majority'\n[suites.counterfactual]\n")
    assert not (tiny_ws / ".cfkit").exists()  # nothing made yet: no store
    checked = run_cli(["-w", str(tiny_ws), "study", "validate", str(path)])
    assert checked.exit_code == 1
    # Before: "the counterfactual suite needs the store, to find each pair's edit." — and no word on how to make one.
    line = next(x for x in checked.stderr.splitlines() if x.startswith("warning: majority on counterfactual"))
    assert f"has no requests in {tiny_ws}: no edit is recorded yet" in line
    assert "make the edits with 'cfkit edit --pending', then run again" in line
    dry = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "baseline:majority", "-s", "counterfactual",
                   "--dry-run"])
    assert dry.exit_code == 2 and "'cfkit edit --pending'" in dry.stderr
    assert not (tiny_ws / ".cfkit").exists()  # validating and a dry run write nothing
    _accepted_edit(tiny_ws)  # as 'cfkit edit --pending' and a review would record it
    assert run_cli(["-w", str(tiny_ws), "study", "validate", str(path)]).exit_code == 0
