"""The contact sheet: escaped, self-contained HTML and a PNG grid with the pairs' pictures."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from conftest import run_cli
from test_preserve import add_edit, inside_change, tiny_original
from cfkit.review.sheet import THUMB, collect_pairs, render_html
from cfkit.store import Store, now
from cfkit.workspace import load_workspace

EVIL = 'Is this fit for a poster? <script>alert("x")</script> & <b>more</b>'


@pytest.fixture
def sheet_ws(tiny_ws):
    cases = tiny_ws / "data" / "cases.jsonl"
    records = [json.loads(line) for line in cases.read_text().splitlines()]
    records[0]["question"] = EVIL
    cases.write_text("".join(json.dumps(r) + "\n" for r in records))
    spec = tiny_ws / "interventions" / "TX01.yaml"
    spec.write_text(spec.read_text().replace("cue: a grey block", "cue: a grey <img src=x onerror=alert(1)> block"))
    add_edit(tiny_ws, "TX01", inside_change(tiny_original(tiny_ws)))
    return tiny_ws


def add_runs(ws_root: Path) -> None:
    """Two models' counterfactual answers on TX01 (case T001: A = Yes, B = No; gold No → Yes)."""
    ws = load_workspace(ws_root)
    with Store(ws.db_path) as store, store.transaction() as conn:
        for run_id, model, before, after in (("r1", "openai:m-good", "B", "A"), ("r2", "hf:m-stuck", "B", "B")):
            conn.execute("INSERT INTO runs (id, model, suite, cfkit_version, started_at, status) "
                         "VALUES (?, ?, 'counterfactual', '0', ?, 'done')", (run_id, model, now()))
            for condition, answer in (("original", before), ("edit", after)):
                conn.execute("INSERT INTO replies (run_id, case_id, pair_id, condition, answer, parse, created_at) "
                             "VALUES (?, 'T001', 'TX01', ?, ?, 'json', ?)", (run_id, condition, answer, now()))


def test_html_escapes_case_and_spec_text(sheet_ws, tmp_path):
    out = tmp_path / "sheet.html"
    result = run_cli(["sheet", "--output", str(out), "-w", str(sheet_ws)])
    assert result.exit_code == 0, result.stderr
    page = out.read_text()
    assert "<script" not in page.lower() and "<img src=x" not in page and "onerror=alert(1)>" not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &lt;b&gt;more&lt;/b&gt;" in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    # Self-contained: every image is inline data, nothing is fetched from elsewhere.
    sources = re.findall(r'src="([^"]*)"', page)
    assert len(sources) == 3 and all(s.startswith("data:image/png;base64,") for s in sources)
    assert not re.search(r'(href|src)="(https?:|/|file:)', page)
    original = np.asarray(Image.open(__import__("io").BytesIO(base64.b64decode(sources[0].split(",", 1)[1]))))
    assert original.shape == (round(THUMB * 64 / 96), THUMB, 3)
    assert "no stored counterfactual probe runs yet" in result.stderr


def test_png_grid_holds_the_pictures(sheet_ws, tmp_path):
    out = tmp_path / "s.html"
    assert run_cli(["sheet", "--output", str(out), "-w", str(sheet_ws)]).exit_code == 0
    png = np.asarray(Image.open(out.with_suffix(".png")).convert("RGB")).astype(float)
    original = np.asarray(Image.open(sheet_ws / "data" / "images" / "T001.png").convert("RGB")).astype(float)
    h = round(THUMB * 64 / 96)
    # The first picture sits at (2·gap, gap) = (16, 8); its mean colour is the original's (resampling tolerance 2).
    tile = png[8: 8 + h, 16: 16 + THUMB]
    np.testing.assert_allclose(tile.reshape(-1, 3).mean(0), original.reshape(-1, 3).mean(0), atol=2)
    # The difference picture (third) is black where nothing changed: its top-left corner.
    diff = png[8: 8 + 20, 16 + 2 * (THUMB + 8): 16 + 2 * (THUMB + 8) + 20]
    assert diff.max() == 0


def test_answers_before_and_after_come_from_stored_runs(sheet_ws):
    add_runs(sheet_ws)
    ws = load_workspace(sheet_ws)
    with Store(ws.db_path) as store:
        store.conn.execute("INSERT INTO reviews (spec_id, edit_id, decision, note, created_at) "
                           "VALUES ('TX01', 1, 'reject', 'a <wall> moved', ?)", (now(),))
        pairs, notes = collect_pairs(ws, store, [])
    [pair] = pairs
    assert notes == []
    by_model = {a.model: a for a in pair.answers}
    assert (by_model["openai:m-good"].before, by_model["openai:m-good"].after) == ("No", "Yes")
    assert by_model["openai:m-good"].before_ok and by_model["openai:m-good"].after_ok
    assert by_model["hf:m-stuck"].before_ok and not by_model["hf:m-stuck"].after_ok
    assert pair.decision == "reject" and pair.verdict is None
    page = render_html(pairs)
    assert "<td class='ok'>Yes</td>" in page and "<td class='bad'>No</td>" in page
    assert "a &lt;wall&gt; moved" in page


def _accept(ws_root: Path, edit_id: int) -> None:
    with Store(ws_root / ".cfkit" / "cfkit.db") as store, store.transaction() as conn:
        conn.execute("INSERT INTO reviews (spec_id, edit_id, decision, created_at) VALUES ('TX01', ?, 'accept', ?)",
                     (edit_id, now()))


def test_a_re_edit_marks_the_answers_given_on_the_earlier_edit_stale(sheet_ws, tmp_path):
    _accept(sheet_ws, 1)
    probed = run_cli(["-w", str(sheet_ws), "probe", "run", "-m", "baseline:always-yes", "-s", "counterfactual"])
    assert probed.exit_code == 0, probed.stderr
    ws = load_workspace(sheet_ws)
    with Store(ws.db_path) as store:
        [pair], _ = collect_pairs(ws, store, [])
    [answer] = pair.answers
    assert pair.edit_id == 1 and (answer.after, answer.after_ok, answer.stale) == ("Yes", True, False)
    # A new edit, accepted: the sheet shows edit #2, and the stored answer is about edit #1.
    second = add_edit(sheet_ws, "TX01", inside_change(tiny_original(sheet_ws), seed=6))
    _accept(sheet_ws, second)
    with Store(ws.db_path) as store:
        [pair], _ = collect_pairs(ws, store, [])
    [answer] = pair.answers
    assert pair.edit_id == second == 2
    assert (answer.after_edit_id, answer.stale, answer.after_ok) == (1, True, False)  # neither right nor wrong
    assert answer.before == "Yes"  # the original did not change: its answer is shown and judged as before
    page = render_html([pair])
    assert "<td class='stale'>Yes (stale: about edit #1, not this one)</td>" in page


def test_existing_sheet_is_kept_unless_forced(sheet_ws, tmp_path):
    out = tmp_path / "keep.html"
    out.write_text("mine")
    result = run_cli(["sheet", "--output", str(out), "-w", str(sheet_ws)])
    assert result.exit_code == 2 and "already exists" in result.stderr
    assert out.read_text() == "mine"
    assert run_cli(["sheet", "--output", str(out), "--force", "-w", str(sheet_ws)]).exit_code == 0
    assert out.read_text().startswith("<!DOCTYPE html>")
    assert run_cli(["sheet", "--output", str(tmp_path / "x.png"), "-w", str(sheet_ws)]).exit_code == 2


def test_spec_without_edit_is_listed_without_pictures(tiny_ws, tmp_path):
    out = tmp_path / "empty.html"
    result = run_cli(["sheet", "--output", str(out), "-w", str(tiny_ws)])
    assert result.exit_code == 0, result.stderr
    page = out.read_text()
    assert "no edit yet" in page and "data:image" not in page
