"""An edit's files changed after it was made: its source image replaced, or an output overwritten.

The check, the contact sheet (and so the browser's pairs page), the review and
the counterfactual probe all read an edit back from its files. A file that is
no longer the one the edit was made from or wrote must not be measured, shown
or sent as that edit in silence: the check and the review refuse it in one
line, the sheet says it on the pair, the probe leaves the pair out and says why.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from cfkit.store import Store, edits
from cfkit.workspace import load_workspace
from support.workspace import run_cli


def _edited(ws_root: Path, spec_id: str = "TX01") -> edits.EditRecord:
    made = run_cli(["edit", spec_id, "--engine", "classical", "-w", str(ws_root)])
    assert made.exit_code == 0, made.stderr
    ws = load_workspace(ws_root)
    with Store(ws.db_path) as store:
        return edits.newest_ok(store, spec_id)


def _overwrite_composite(ws_root: Path, record: edits.EditRecord) -> None:
    """Another image under the edit's composite file name (as a user copying files about might leave it)."""
    image = np.asarray(Image.open(record.composite_path).convert("RGB")).copy()
    image[:8, :8] = 255 - image[:8, :8]  # outside the mask: a real check of this file would fail it
    Image.fromarray(image).save(record.composite_path)


def _replace_source(ws_root: Path, record: edits.EditRecord) -> None:
    """The case's image replaced by another picture under the same name."""
    path = ws_root / "data" / "images" / "T001.png"
    image = np.asarray(Image.open(path).convert("RGB")).copy()
    image[-8:, -8:] = 0
    Image.fromarray(image).save(path)


CHANGES = {"composite": (_overwrite_composite, "composite image", "is not the file it wrote"),
           "source": (_replace_source, "source image", "has changed since edit")}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_check_refuses_an_edit_whose_files_changed_and_stores_no_verdict(tiny_ws, change):
    record = _edited(tiny_ws)
    ws = load_workspace(tiny_ws)
    with Store(ws.db_path) as store:
        from cfkit.store import checks

        before = checks.latest(store, record.id, "composite")
    alter, what, said = CHANGES[change]
    alter(tiny_ws, record)

    result = run_cli(["check", "TX01", "-w", str(tiny_ws)])

    assert result.exit_code == 2, result.stdout + result.stderr
    [line] = [ln for ln in result.stderr.splitlines() if ln.startswith("error:")]
    assert what in line and said in line and "cfkit edit TX01" in line, line
    with Store(ws.db_path) as store:
        from cfkit.store import checks

        assert checks.latest(store, record.id, "composite") == before  # nothing measured of the other image


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_the_sheet_says_it_on_the_pair_instead_of_showing_another_image(tiny_ws, tmp_path, change):
    from cfkit.review.sheet import collect_pairs

    record = _edited(tiny_ws)
    alter, what, said = CHANGES[change]
    alter(tiny_ws, record)

    ws = load_workspace(tiny_ws)
    with Store(ws.db_path) as store:
        [pair], _ = collect_pairs(ws, store, ["TX01"])
    assert what in pair.problem and said in pair.problem, pair.problem
    assert not pair.pictures
    assert pair.verdict and pair.verdict.startswith("pass")  # the check it had stands; it had read "not checked"
    result = run_cli(["sheet", "-w", str(tiny_ws), "--output", str(tmp_path / "sheet.html")])
    assert result.exit_code == 0, result.stderr
    assert said in (tmp_path / "sheet.html").read_text()


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_the_counterfactual_probe_leaves_the_pair_out_and_says_why(tiny_ws, change):
    record = _edited(tiny_ws)
    asked = run_cli(["probe", "run", "-m", "baseline:always-yes", "-s", "counterfactual", "-w", str(tiny_ws)])
    assert asked.exit_code == 0, asked.stderr
    alter, what, said = CHANGES[change]
    alter(tiny_ws, record)

    result = run_cli(["probe", "run", "-m", "baseline:always-no", "-s", "counterfactual", "-w", str(tiny_ws)])

    # TX01 is the workspace's only pair: nothing is left to ask, and the line says why.
    assert result.exit_code == 2, result.stdout + result.stderr
    assert "TX01" in result.stderr and what in result.stderr and said in result.stderr, result.stderr


def test_an_unchanged_edit_is_checked_and_probed_as_before(tiny_ws):
    """The comparison is of the files' bytes as recorded: an edit left alone passes through every step."""
    _edited(tiny_ws)
    assert run_cli(["check", "TX01", "-w", str(tiny_ws)]).exit_code == 0
    from cfkit.review.sheet import collect_pairs

    ws = load_workspace(tiny_ws)
    with Store(ws.db_path) as store:
        [pair], _ = collect_pairs(ws, store, ["TX01"])
    assert pair.problem is None and pair.pictures
    result = run_cli(["probe", "run", "-m", "baseline:always-no", "-s", "counterfactual", "-w", str(tiny_ws)])
    assert result.exit_code == 0 and "skipped" not in result.stderr, result.stderr


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_an_edit_whose_files_changed_can_still_be_rejected(tiny_ws, change):
    """A decision is about the edit in the store: it is taken without reading the files it cannot show."""
    record = _edited(tiny_ws)
    alter, _, _ = CHANGES[change]
    alter(tiny_ws, record)

    result = run_cli(["review", "TX01", "--edit", str(record.id), "--reject", "--note", "file replaced",
                      "-w", str(tiny_ws)])

    assert result.exit_code == 0, result.stderr
    assert f"TX01: edit #{record.id} rejected" in result.stderr
    ws = load_workspace(tiny_ws)
    with Store(ws.db_path) as store:
        from cfkit.store import reviews

        assert reviews.on_edit(store, record.id).decision == "reject"
    shown = run_cli(["review", "TX01", "--edit", str(record.id), "--json", "-w", str(tiny_ws)])
    assert shown.exit_code == 2 and "cfkit edit TX01" in shown.stderr  # showing it still says why it cannot


def test_check_refuses_an_edit_made_with_another_mask_and_still_checks_the_other_specs(tiny_ws):
    """A mask redrawn after the edit: the edit kept everything outside the earlier mask, so measuring its keep
    region with the new one would report leaks that are not there (or hide real ones). The check says so, stores
    nothing for that edit, checks every other spec asked for, and exits 2."""
    (tiny_ws / "interventions" / "TX02.yaml").write_text(
        (tiny_ws / "interventions" / "TX01.yaml").read_text().replace("id: TX01", "id: TX02"))
    first, second = _edited(tiny_ws, "TX01"), _edited(tiny_ws, "TX02")
    ws = load_workspace(tiny_ws)
    with Store(ws.db_path) as store:
        from cfkit.store import checks

        before = checks.latest(store, first.id, "composite")
        other_before = checks.latest(store, second.id, "composite")
    mask = np.zeros((64, 96), np.uint8)
    mask[0:40, 0:60] = 255  # redrawn larger: the edit's own change is now inside, the old keep band too
    Image.fromarray(mask).save(tiny_ws / "interventions" / "masks" / "TX02-new.png")
    text = (tiny_ws / "interventions" / "TX01.yaml").read_text().replace("masks/TX01.png", "masks/TX02-new.png")
    (tiny_ws / "interventions" / "TX01.yaml").write_text(text)

    alone = run_cli(["check", "TX01", "-w", str(tiny_ws)])
    assert alone.exit_code == 2, alone.stdout + alone.stderr
    [line] = [ln for ln in alone.stderr.splitlines() if ln.startswith("error:")]
    assert "mask" in line and f"since edit {first.id} was made" in line and "cfkit edit TX01" in line, line

    both = run_cli(["check", "--all", "-w", str(tiny_ws)])
    assert both.exit_code == 2, both.stdout + both.stderr
    assert "TX02" in both.stdout and "Traceback" not in both.stderr
    assert "1 of 2 specs not checked (TX01)" in both.stderr
    with Store(ws.db_path) as store:
        from cfkit.store import checks

        assert checks.latest(store, first.id, "composite") == before  # nothing measured against the new mask
        assert checks.latest(store, second.id, "composite").id != other_before.id  # the other spec was checked

    # Putting the earlier mask back makes the edit checkable again.
    (tiny_ws / "interventions" / "TX01.yaml").write_text(text.replace("masks/TX02-new.png", "masks/TX01.png"))
    assert run_cli(["check", "--all", "-w", str(tiny_ws)]).exit_code == 0


def test_review_says_the_mask_outlined_is_not_the_one_the_edit_was_made_with(tiny_ws, tmp_path):
    """The review draws the spec's mask as it is now; when that is not the edit's, the screen, the saved PNG and
    --json say so (the leaks drawn are the new mask's, and check refuses the edit), and nothing else changes."""
    first = _edited(tiny_ws, "TX01")
    shown = run_cli(["review", "TX01", "--json", "-w", str(tiny_ws)])
    assert shown.exit_code == 0 and json.loads(shown.stdout)[0]["mask_changed"] is None
    mask = np.zeros((64, 96), np.uint8)
    mask[0:40, 0:60] = 255
    Image.fromarray(mask).save(tiny_ws / "interventions" / "masks" / "TX01-new.png")
    spec = tiny_ws / "interventions" / "TX01.yaml"
    spec.write_text(spec.read_text().replace("masks/TX01.png", "masks/TX01-new.png"))

    as_json = run_cli(["review", "TX01", "--json", "-w", str(tiny_ws)])
    assert as_json.exit_code == 0, as_json.stderr
    said = json.loads(as_json.stdout)[0]["mask_changed"]
    assert f"since edit {first.id} was made" in said and "'cfkit check' refuses this edit" in said, said
    assert "cfkit edit TX01" in said
    on_screen = run_cli(["review", "TX01", "--show", "-w", str(tiny_ws)])
    assert on_screen.exit_code == 0 and "mask changed:" in on_screen.stdout, on_screen.stdout
    saved = tmp_path / "view.png"
    written = run_cli(["review", "TX01", "--show", "--output", str(saved), "-w", str(tiny_ws)])
    assert written.exit_code == 0 and saved.is_file(), written.stderr
