"""The contact sheet: escaped, self-contained HTML and a PNG grid with the pairs' pictures."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from cfkit.review.sheet import THUMB, collect_pairs, render_html
from cfkit.review.sheet_png import BOX_COLOURS, BOX_H, plan
from cfkit.store import Store, now, reviews
from cfkit.workspace import load_workspace
from support.edits import add_edit, inside_change, tiny_original
from support.store_sql import insert_rows
from support.workspace import run_cli

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
    with Store(ws.db_path) as store:
        for run_id, model, before, after in (("r1", "openai:m-good", "B", "A"), ("r2", "hf:m-stuck", "B", "B")):
            insert_rows(store.path, "runs", [{"id": run_id, "model": model, "suite": "counterfactual",
                                              "cfkit_version": "0", "started_at": now(), "status": "done"}])
            insert_rows(store.path, "replies", [
                {"run_id": run_id, "case_id": "T001", "pair_id": "TX01", "condition": condition, "answer": answer,
                 "parse": "json", "created_at": now()}
                for condition, answer in (("original", before), ("edit", after))])


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


def test_png_holds_the_pictures_where_the_layout_puts_them(sheet_ws, tmp_path):
    out = tmp_path / "s.html"
    assert run_cli(["sheet", "--output", str(out), "-w", str(sheet_ws)]).exit_code == 0
    png = np.asarray(Image.open(out.with_suffix(".png")).convert("RGB")).astype(float)
    original = np.asarray(Image.open(sheet_ws / "data" / "images" / "T001.png").convert("RGB")).astype(float)
    ws = load_workspace(sheet_ws)
    with Store(ws.db_path) as store:
        pairs, _ = collect_pairs(ws, store, [])
    [tile] = plan(pairs).tiles
    h = round(THUMB * 64 / 96)
    # The original sits where the layout says; its mean colour is the original's (resampling tolerance 2).
    x, y = tile.pictures["original"]
    np.testing.assert_allclose(png[y: y + h, x: x + THUMB].reshape(-1, 3).mean(0), original.reshape(-1, 3).mean(0),
                               atol=2)
    # The edit beside it differs only inside the edited box: its top-left corner is the original's.
    ex, ey = tile.pictures["edit"]
    assert (ex, ey) == (x + THUMB + 8, y)
    np.testing.assert_allclose(png[ey: ey + 20, ex: ex + 20], png[y: y + 20, x: x + 20], atol=0)


def test_answers_before_and_after_come_from_stored_runs(sheet_ws):
    add_runs(sheet_ws)
    ws = load_workspace(sheet_ws)
    with Store(ws.db_path) as store:
        reviews.record(store, "TX01", 1, "reject", "a <wall> moved")
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
    with Store(ws_root / ".cfkit" / "cfkit.db") as store:
        reviews.record(store, "TX01", edit_id, "accept")


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


def test_sheets_made_within_one_second_each_get_a_name_of_their_own(sheet_ws):
    """The default name is stamped to the second: a 'cfkit sheet' in the second of an earlier sheet must not be
    refused over a file name nobody gave, nor replace that sheet."""
    from datetime import datetime, timedelta, timezone

    sheets = sheet_ws / ".cfkit" / "sheets"
    sheets.mkdir(parents=True, exist_ok=True)
    start = datetime.now(timezone.utc)
    earlier = [sheets / f"sheet-{(start + timedelta(seconds=k)).strftime('%Y%m%d-%H%M%S')}.html" for k in range(5)]
    for path in earlier:  # the sheets of this second and the next four, as if made just now
        path.write_text("earlier sheet")
        path.with_suffix(".png").write_bytes(b"earlier png")
    made = run_cli(["sheet", "-w", str(sheet_ws)])
    assert made.exit_code == 0, made.stderr
    assert all(p.read_text() == "earlier sheet" and p.with_suffix(".png").read_bytes() == b"earlier png"
               for p in earlier)
    new = [p for p in sheets.glob("*.html") if p not in earlier]
    assert len(new) == 1 and new[0].with_suffix(".png").is_file() and new[0].name.endswith("-2.html")


def test_spec_without_edit_is_listed_without_pictures(tiny_ws, tmp_path):
    out = tmp_path / "empty.html"
    result = run_cli(["sheet", "--output", str(out), "-w", str(tiny_ws)])
    assert result.exit_code == 0, result.stderr
    page = out.read_text()
    assert "no edit yet" in page and "data:image" not in page


# ── Figure S8 from predictions files ───────────────────────────────────────

HOSTILE_MODEL = "<script>alert('m')</script>"
S8_MODELS = ["GPT-5.2", "Gemini 3.1 Pro", "Qwen3.7-Plus", "ArtiMuse", HOSTILE_MODEL]
#: Per pair: each model's answer on the original and on the edit (A = Yes, B = No; gold No → Yes).
S8_ANSWERS = {
    "CF20": ["BA", "AA", "BA", "BB", "AA"],
    "CF18": ["BA", "BA", "BA", "BA", "AA"],
    "CF28": ["BB", "BB", "BB", "BB", "AB"],
    "CF35": ["BA", "BA", "BA", "BA", "AA"],
}
SHAPES = {"CF20": (64, 128), "CF18": (80, 120), "CF28": (96, 64), "CF35": (90, 90)}  # height, width


def s8_workspace(root: Path) -> tuple[Path, Path]:
    """Four No→Yes pairs on pictures of different shapes, with accepted edits, and a predictions file."""
    from support.workspace import gradient_image

    (root / "data" / "images").mkdir(parents=True)
    (root / "interventions").mkdir()
    yes_no = [{"id": "A", "text": "Yes"}, {"id": "B", "text": "No"}]
    cases = []
    for k, (spec, (h, w)) in enumerate(SHAPES.items()):
        case = f"HB{k:03d}"
        Image.fromarray(gradient_image(w, h, k)).save(root / "data" / "images" / f"{case}.png")
        question = (EVIL if spec == "CF18" else
                    "Is this image suitable for a children's book page about kindness and helping one another?")
        cases.append({"id": case, "images": [f"{case}.png"], "question": question, "options": yes_no, "gold": "B",
                      "yes_option": "A"})
        (root / "interventions" / f"{spec}.yaml").write_text(
            f"id: {spec}\ncase: {case}\ntitle: Pair {spec}\ncue: the distressing letter in her hand\n"
            "replacement: an open lesson book shared with the children, who lean in and smile\n"
            "prompt: Replace it.\nregions: [{box: [0.2, 0.2, 0.6, 0.6]}]\nlabels: {original: 'No', edit: 'Yes'}\n")
    (root / "data" / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    (root / "cfkit.toml").write_text('[dataset]\ncases = "data/cases.jsonl"\nimages = "data/images"\n')
    lines = []
    for k, spec in enumerate(SHAPES):
        original = np.asarray(Image.open(root / "data" / "images" / f"HB{k:03d}.png").convert("RGB"))
        edited = original.copy()
        h, w = original.shape[:2]
        edited[h // 5: 3 * h // 5, w // 5: 3 * w // 5] = (40, 160, 60)
        edit_id = add_edit(root, spec, edited)
        _accept_edit(root, spec, edit_id)
        for model, (before, after) in zip(S8_MODELS, S8_ANSWERS[spec]):
            # ArtiMuse answered CF35's edit on an earlier edit than the one now shown: stale.
            shown_on = edit_id + 100 if (spec, model) == ("CF35", "ArtiMuse") else edit_id
            for condition, answer in (("original", before), ("edit", after)):
                record = {"model": model, "suite": "counterfactual", "case": f"HB{k:03d}", "pair": spec,
                          "condition": condition, "answer": answer}
                if condition == "edit":
                    record["edit_id"] = shown_on
                lines.append(json.dumps(record))
    predictions = root / "published.jsonl"
    predictions.write_text("\n".join(lines) + "\n")
    return root, predictions


def _accept_edit(ws_root: Path, spec: str, edit_id: int) -> None:
    with Store(ws_root / ".cfkit" / "cfkit.db") as store:
        reviews.record(store, spec, edit_id, "accept")


@pytest.fixture
def s8(tmp_path):
    return s8_workspace(tmp_path / "s8")


def test_a_sheet_from_predictions_files_for_chosen_models(s8, tmp_path):
    root, predictions = s8
    out = tmp_path / "figure-s8.html"
    chosen = ["Gemini 3.1 Pro", "GPT-5.2", "ArtiMuse", HOSTILE_MODEL]
    args = ["sheet", "CF20", "CF18", "CF28", "CF35", "-w", str(root), "--predictions", str(predictions),
            "--output", str(out)]
    for model in chosen:
        args += ["--models", model]
    result = run_cli(args)
    assert result.exit_code == 0, result.stderr
    ws = load_workspace(root)
    from cfkit.predictions import load_predictions

    with Store(ws.db_path) as store:
        pairs, notes = collect_pairs(ws, store, ["CF20", "CF18", "CF28", "CF35"], models=chosen,
                                     predictions=load_predictions([predictions]))
    assert notes == []
    assert [[a.model for a in p.answers] for p in pairs] == [chosen] * 4  # the models chosen, in that order
    cf20 = {a.model: a for a in pairs[0].answers}
    # Each image judged against its own gold: Gemini is right on the edit though wrong on the original.
    assert (cf20["Gemini 3.1 Pro"].before_state, cf20["Gemini 3.1 Pro"].after_state) == ("bad", "ok")
    assert (cf20["GPT-5.2"].before_state, cf20["GPT-5.2"].after_state) == ("ok", "ok")
    assert (cf20["ArtiMuse"].before_state, cf20["ArtiMuse"].after_state) == ("ok", "bad")
    cf35 = {a.model: a for a in pairs[3].answers}
    assert cf35["ArtiMuse"].stale and cf35["ArtiMuse"].after_state == "stale"  # about another edit: neither way

    page = out.read_text()
    assert "<script" not in page.lower()
    assert "&lt;script&gt;alert(&#x27;m&#x27;)&lt;/script&gt;" in page  # the model's name, escaped
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page  # the question, escaped
    assert page.count("<td class='bad'>Yes</td>") >= 1 and "<td class='ok'>Yes</td>" in page
    assert "original · gold No" in page and "edit · gold Yes" in page

    png = np.asarray(Image.open(out.with_suffix(".png")).convert("RGB"))
    layout = plan(pairs)
    assert png.shape[:2] == (layout.size[1], layout.size[0])
    # Rows sized to their pictures: the row of two landscape pictures is shorter than the one with a portrait.
    assert [t.picture_h for t in layout.tiles] == [128, round(THUMB * 80 / 120), THUMB, THUMB]
    first_row_h = layout.tiles[2].y - layout.tiles[0].y
    assert first_row_h == max(t.height for t in layout.tiles[:2]) + 16
    assert first_row_h < layout.tiles[2].height
    # Gemini's CF20 boxes: the original's in the disagree colour, the edit's in the agree colour.
    colours = {state: fill for state, (fill, _) in BOX_COLOURS.items()}
    tile = layout.tiles[0]
    fills = _box_fills(png, tile, row=0)
    assert fills == (colours["bad"], colours["ok"])
    assert _box_fills(png, layout.tiles[3], row=2)[1] == colours["stale"]


def _box_fills(png: np.ndarray, tile, row: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The fill colours of a tile's two answer boxes on answer line ``row`` (read just inside each box)."""
    from cfkit.review.sheet_png import BOX_W, GAP, ROW, TILE_W

    name_w = TILE_W - 2 * BOX_W - 2 * GAP
    bottom = tile.y + tile.height - 16 - ROW * (len(tile.pair.answers) - row)  # the check line is last
    xs = (tile.x + name_w + GAP + 4, tile.x + name_w + BOX_W + 2 * GAP + 4)
    return tuple(tuple(int(v) for v in png[bottom + BOX_H // 2, x]) for x in xs)


def test_an_unknown_model_is_one_line_naming_those_with_answers(s8):
    root, predictions = s8
    result = run_cli(["sheet", "-w", str(root), "--predictions", str(predictions), "--models", "GPT-5.3"])
    assert result.exit_code == 2
    assert "no counterfactual answers from 'GPT-5.3'" in result.stderr and "Gemini 3.1 Pro" in result.stderr


@pytest.mark.parametrize("n_pairs", [1, 2, 5])
def test_the_colour_key_fits_the_sheet_however_few_pairs_it_has(n_pairs):
    from cfkit.review.sheet_png import KEY, MARGIN, font, render_png
    from cfkit.review.sheet_records import SheetPair

    pairs = [SheetPair(f"CF{i:02d}", "A pair", "HB001", "Suitable?", "snow", "grass", "No", "Yes", None, {},
                       None, None, None) for i in range(1, n_pairs + 1)]
    layout = plan(pairs)
    assert [label for *_, label in layout.key] == [label for _, label in KEY]
    for x, y, _, label in layout.key:  # box, gap, then the words: all inside the sheet and above the tiles
        assert MARGIN <= x and x + 20 + font(12).getlength(label) <= layout.size[0] - MARGIN, (label, layout.size)
        assert y + 14 <= layout.header_h
    assert render_png(pairs).size == layout.size
