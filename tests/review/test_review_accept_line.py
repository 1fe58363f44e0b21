"""`cfkit review SPEC --accept` says when the edit it accepted failed its preservation check, or has none."""

from __future__ import annotations

import json

import numpy as np

from support.edits import add_edit, box_mask, inside_change, tiny_original
from support.workspace import run_cli


def _outside_changed(original: np.ndarray) -> np.ndarray:
    """Changed inside the mask as asked, and outside it too: the preservation check fails it."""
    edited = inside_change(original)
    outside = box_mask() == 0
    edited[outside] = 255 - edited[outside]
    return edited


def test_an_accept_says_which_check_the_edit_failed(tiny_ws, monkeypatch):
    monkeypatch.delenv("CFKIT_LPIPS_BACKBONE", raising=False)
    ws = str(tiny_ws)
    original = tiny_original(tiny_ws)
    good = add_edit(tiny_ws, "TX01", inside_change(original))
    bad = add_edit(tiny_ws, "TX01", _outside_changed(original))
    for edit_id in (good, bad):
        run_cli(["check", "--edit", str(edit_id), "-w", ws])
    shown = json.loads(run_cli(["review", "TX01", "--edit", str(bad), "--json", "-w", ws]).stdout)[0]
    reasons = shown["checks"]["composite"]["reasons"]
    assert shown["checks"]["composite"]["verdict"] == "fail" and reasons
    assert any(r.startswith("SSIM outside the mask") for r in reasons)

    accepted = run_cli(["review", "TX01", "--edit", str(bad), "--accept", "-w", ws])
    line = " ".join(accepted.stderr.split())
    assert accepted.exit_code == 0, accepted.stderr
    # Before: only "TX01: edit #2 accepted". Now the metrics that failed, as the review screen shows them.
    assert line.startswith(f"TX01: edit #{bad} accepted although it failed its preservation check "
                           f"({'; '.join(reasons)}), and it now stands for the pair: if that was not meant, "
                           f"reject it with 'cfkit review TX01 --edit {bad} --reject --note WHY'."), line

    # An edit that passed its check is accepted in the plain words.
    again = run_cli(["review", "TX01", "--edit", str(good), "--accept", "-w", ws])
    assert again.exit_code == 0 and again.stderr.strip() == f"TX01: edit #{good} accepted", again.stderr


def test_an_accept_of_an_unchecked_edit_says_it_has_no_check(tiny_ws):
    ws = str(tiny_ws)
    edit_id = add_edit(tiny_ws, "TX01", inside_change(tiny_original(tiny_ws)))
    accepted = run_cli(["review", "TX01", "--edit", str(edit_id), "--accept", "-w", ws])
    line = " ".join(accepted.stderr.split())
    assert accepted.exit_code == 0, accepted.stderr
    assert line.startswith(f"TX01: edit #{edit_id} accepted without a preservation check, and it now stands for "
                           "the pair: check it with 'cfkit check TX01'"), line
