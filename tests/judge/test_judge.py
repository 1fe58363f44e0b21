"""``cfkit edits screen``: a judge model screens each edit; the edits it doubts are flagged, never decided.

The mini workspace's three specs get three edits: EX01 a correct classical
edit, EX02 its cue blurred away (nothing painted in its place), EX03 the wrong
thing painted in. The judge is a loopback Chat Completions server scripted as
a careful person would answer each question about those pictures; what is
tested is cfkit's side: which questions reach the judge with which picture,
how the replies are read, stored, resumed and shown.
"""

from __future__ import annotations

import base64
import io
import json
import re

import numpy as np
import pytest
from PIL import Image

from support.chat_api_server import ChatServer, Scripted, completion, user_text
from support.workspace import run_cli

CUES = {"EX01": "brown espresso", "EX02": "irises are pale yellow-green", "EX03": "cross-shaped diffraction spikes"}
REPLACEMENTS = {"EX01": "matcha latte", "EX02": "copper-orange irises", "EX03": "dark sky where"}
#: How a careful person answers about each edit (the original always shows its cue).
SEEN = {"EX01": {"cue": False, "replacement": True, "natural": True},
        "EX02": {"cue": False, "replacement": False, "natural": False},  # blurred away
        "EX03": {"cue": True, "replacement": False, "natural": True}}  # the wrong object painted in


def _picture(body: dict) -> np.ndarray:
    content = next(m["content"] for m in body["messages"] if m["role"] == "user")
    url = next(p["image_url"]["url"] for p in content if p.get("type") == "image_url")
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).convert("RGB"))


def _is_original(body: dict, originals: dict[str, np.ndarray], spec: str) -> bool:
    picture, original = _picture(body), originals[spec]
    return picture.shape == original.shape and np.array_equal(picture, original)


def _spec_of(body: dict, originals: dict[str, np.ndarray]) -> str:
    """The spec whose original the (whole) picture is an edit of: the one of its size closest to it."""
    picture = _picture(body).astype(float)
    same = {s: o for s, o in originals.items() if o.shape == picture.shape}
    return min(same, key=lambda s: np.abs(same[s] - picture).mean())


def judge_script(originals: dict[str, np.ndarray], asked: list[tuple[str, str]]):
    def script(body: dict, n: int) -> Scripted:
        text = user_text(body)
        spec = next((s for s in CUES if CUES[s] in text or REPLACEMENTS[s] in text), None)
        if spec is None:
            spec = _spec_of(body, originals)
        if "natural photograph" in text:
            about, yes = "natural", SEEN[spec]["natural"]
        elif CUES[spec] in text:
            about = "cue"
            yes = True if _is_original(body, originals, spec) else SEEN[spec]["cue"]
        else:
            about, yes = "replacement", SEEN[spec]["replacement"]
        asked.append((spec, about))
        return Scripted(body=completion("Yes" if yes else "No.", model=body["model"]))
    return script


def _import_edits(ws, tmp_path):
    """EX01 made by the classical engine; EX02 and EX03 made 'elsewhere': blurred cue, wrong paint."""
    from scipy import ndimage

    from cfkit.masks import load_mask
    from cfkit.specs import load_spec
    from cfkit.workspace import load_workspace

    assert run_cli(["-w", str(ws), "edit", "EX01", "--engine", "classical"]).exit_code == 0
    workspace = load_workspace(ws)
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    originals = {}
    for spec_id in CUES:
        spec = load_spec(workspace, spec_id).spec
        case = json.loads(next(line for line in (ws / "cases.jsonl").read_text().splitlines()
                               if json.loads(line)["id"] == spec.case))
        original = np.asarray(Image.open(ws / "images" / case["images"][0]).convert("RGB"))
        originals[spec_id] = original
        mask = load_mask(workspace, spec, (original.shape[1], original.shape[0])).array > 0
        if spec_id == "EX02":
            blurred = ndimage.gaussian_filter(original.astype(float), sigma=(9, 9, 0)).astype(np.uint8)
            edited = np.where(mask[..., None], blurred, original)
        elif spec_id == "EX03":
            edited = np.where(mask[..., None], np.array([255, 0, 255], np.uint8), original)
        else:
            continue
        Image.fromarray(edited.astype(np.uint8)).save(folder / f"{spec_id}.png")
    result = run_cli(["-w", str(ws), "edits", "import", str(folder)])
    assert result.exit_code == 0, result.stderr
    return originals


@pytest.fixture
def screened(mini_ws, tmp_path):
    originals = _import_edits(mini_ws, tmp_path)
    asked: list[tuple[str, str]] = []
    with ChatServer(judge_script(originals, asked)) as server:
        first = run_cli(["-w", str(mini_ws), "edits", "screen", "--judge", "openai:judge-model", "-o",
                         f"base_url={server.url}", "-o", "max_retries=1", "--json"], env={"OPENAI_API_KEY": "sk-x"})
        again = run_cli(["-w", str(mini_ws), "edits", "screen", "--judge", "openai:judge-model", "-o",
                         f"base_url={server.url}", "-o", "max_retries=1"], env={"OPENAI_API_KEY": "sk-x"})
        bodies = list(server.requests)
    return mini_ws, first, again, asked, bodies


def test_blurred_and_wrong_object_edits_are_flagged_and_the_correct_one_is_not(screened):
    _, first, again, asked, _ = screened
    assert first.exit_code == 0, first.stderr
    states = {r["spec"]: r for r in json.loads(first.stdout)["edits"]}
    assert states["EX01"]["state"] == "clear" and states["EX01"]["doubts"] == []
    assert states["EX02"]["state"] == "doubted"
    assert set(states["EX02"]["doubts"]) >= {"edit-shows-replacement", "region-shows-replacement", "edit-looks-natural"}
    assert states["EX03"]["state"] == "doubted"
    assert set(states["EX03"]["doubts"]) >= {"edit-lacks-cue", "edit-shows-replacement"}
    assert "2 doubted, 1 clear" in first.stderr and "never accepts or rejects" in first.stderr
    # Six questions per edit, each asked once: the second run found every answer stored and sent nothing.
    assert len(asked) == 18
    assert again.exit_code == 0 and "2 doubted, 1 clear" in again.stderr


def test_the_judge_sees_one_picture_and_no_model_or_verdict(screened):
    _, _, _, _, bodies = screened
    for body in bodies:
        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        assert sum(1 for part in user if part.get("type") == "image_url") == 1
        assert body["max_tokens"] <= 16 or body.get("max_completion_tokens", 0) <= 16
        text = json.dumps(body)
        assert "baseline" not in text and "gold" not in text.lower()


def test_stored_answers_name_their_judge_and_prompt_version(screened):
    ws = screened[0]
    from cfkit.store import open_store, screens

    with open_store(ws / ".cfkit" / "cfkit.db") as store:
        answers = screens.answers(store)
    assert len(answers) == 18
    assert {a.judge for a in answers} == {"openai:judge-model"}
    assert len({a.prompt_version for a in answers}) == 1 and re.fullmatch(r"[0-9a-f]{12}", answers[0].prompt_version)
    assert {a.server_model for a in answers} == {"judge-model"}
    assert all(a.raw in ("Yes", "No.") and a.answer in ("Yes", "No") for a in answers)


def test_edits_list_shows_the_flags(screened):
    ws = screened[0]
    listing = json.loads(run_cli(["-w", str(ws), "edits", "list", "--json"]).stdout)
    by_spec = {e["spec_id"]: e for e in listing if e["selected"] or e["spec_id"] == "EX01"}
    assert by_spec["EX02"]["judge"] == "doubted" and by_spec["EX02"]["doubted_by"] == ["openai:judge-model"]
    assert by_spec["EX01"]["judge"] == "clear"


def test_edited_questions_are_a_new_prompt_version(screened):
    ws = screened[0]
    from cfkit.judge.questions import load_questions
    from cfkit.workspace import load_workspace

    before = load_questions(load_workspace(ws)).version
    (ws / "probes" / "templates").mkdir(parents=True, exist_ok=True)
    from importlib import resources
    text = (resources.files("cfkit") / "templates" / "judge-screen.yaml").read_text()
    (ws / "probes" / "templates" / "judge-screen.yaml").write_text(text.replace("natural photograph", "real photograph"))
    assert load_questions(load_workspace(ws)).version != before


@pytest.mark.parametrize("bad, message", [
    ("questions: []\n", "no 'questions' list"),
    ("questions:\n  - {id: a, image: sideways, region: whole, ask: 'x {cue}', expected: 'Yes'}\n", "image 'sideways'"),
    ("questions:\n  - {id: a, image: edit, region: whole, ask: 'x', expected: 'Maybe'}\n", "expected 'Maybe'"),
    ("questions: [1, 2\n", "not valid YAML"),
])
def test_a_broken_question_file_is_one_line_before_anything_is_asked(mini_ws, bad, message):
    (mini_ws / "probes" / "templates").mkdir(parents=True, exist_ok=True)
    (mini_ws / "probes" / "templates" / "judge-screen.yaml").write_text(bad)
    result = run_cli(["-w", str(mini_ws), "edits", "screen", "--judge", "openai:judge-model", "-o",
                      "base_url=http://127.0.0.1:9/v1"], env={"OPENAI_API_KEY": "sk-x"})
    assert result.exit_code == 2 and message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_a_judge_that_cannot_see_images_is_refused(mini_ws):
    result = run_cli(["-w", str(mini_ws), "edits", "screen", "--judge", "baseline:always-yes"])
    assert result.exit_code == 2 and "cannot see images" in result.stderr


def test_the_report_names_the_pairs_whose_edit_the_judge_doubts(screened):
    ws = screened[0]
    assert run_cli(["-w", str(ws), "probe", "run", "-m", "baseline:always-no", "-s", "counterfactual"]).exit_code == 0
    result = run_cli(["-w", str(ws), "report", "--format", "json", "--resamples", "200"])
    assert result.exit_code in (0, 1), result.stderr
    notes = json.loads(result.stdout)["notes"]
    doubt = [n for n in notes if "doubts the edit" in n]
    assert doubt and "EX02" in doubt[0] and "EX03" in doubt[0] and "EX01" not in doubt[0]
    assert "openai:judge-model" in doubt[0]


def test_the_view_shows_the_judges_doubts_on_the_pairs_page(screened, tmp_path):
    ws = screened[0]
    out = tmp_path / "site"
    assert run_cli(["view", "-w", str(ws), "--export", str(out)]).exit_code == 0
    page = (out / "pairs.html").read_text()
    ex02 = page[page.index('id="EX02"'):page.index('id="EX03"')]
    ex01 = page[page.index('id="EX01"'):page.index('id="EX02"')]
    assert "judge model doubts this edit" in ex02 and "edit-looks-natural" in ex02
    assert "judge model doubts" not in ex01


def test_the_contact_sheet_shows_the_judges_doubts(screened, tmp_path):
    ws = screened[0]
    html_path = tmp_path / "sheet.html"
    assert run_cli(["-w", str(ws), "sheet", "--output", str(html_path)]).exit_code == 0
    page = html_path.read_text()
    ex02 = page[page.index("id='EX02'"):page.index("id='EX03'")]
    assert "openai:judge-model doubts this edit" in ex02 and "edit-looks-natural (No)" in ex02
    assert "doubts this edit" not in page[page.index("id='EX01'"):page.index("id='EX02'")]
    assert html_path.with_suffix(".png").is_file()  # the PNG is written beside the page
    from cfkit.review.sheet import collect_pairs
    from cfkit.review.sheet_png import plan
    from cfkit.store import open_store
    from cfkit.workspace import load_workspace

    with open_store(ws / ".cfkit" / "cfkit.db") as store:
        pairs, _ = collect_pairs(load_workspace(ws), store, [])
    doubted = {p.spec_id: p.judge for p in pairs}
    assert doubted["EX01"] is None and doubted["EX02"] and doubted["EX03"]
    heights = {t.pair.spec_id: t.height for t in plan(pairs).tiles}
    assert heights["EX02"] > heights["EX01"] - 1  # the doubt line has its room in the tile


@pytest.mark.parametrize(("width", "height"), [(80, 24), (160, 50)])
def test_the_review_screen_shows_the_judges_doubts(screened, width, height):
    import io

    from rich.console import Console

    from cfkit.review.loop import load_view_data
    from cfkit.review.view import EditView
    from cfkit.store import open_store
    from cfkit.workspace import load_workspace

    ws = screened[0]
    shown = {}
    with open_store(ws / ".cfkit" / "cfkit.db") as store:
        for spec in ("EX01", "EX02"):
            data = load_view_data(load_workspace(ws), store, spec)
            screen = Console(file=io.StringIO(), record=True, width=width, height=height)
            screen.print(EditView(data, max_height=height))
            shown[spec] = screen.export_text()
    # At 80 columns the line is cut at the edge with an ellipsis; at 160 it holds every doubted question.
    assert "judge: openai:judge-model doubts this edit: edit-looks-natural (No)" in shown["EX02"]
    if width >= 160:
        assert "region-shows-replacement (No) (a flag, not a verdict)" in shown["EX02"]
    assert "judge:" not in shown["EX01"]
    assert all(len(line) <= width for text in shown.values() for line in text.splitlines())


def test_questions_whose_requests_fail_leave_the_edit_incomplete_and_a_rerun_asks_only_them(mini_ws, tmp_path):
    originals = _import_edits(mini_ws, tmp_path)
    asked: list[tuple[str, str]] = []
    answer = judge_script(originals, asked)
    failing = {"on": True}

    def script(body: dict, n: int) -> Scripted:
        if failing["on"] and "natural photograph" in user_text(body):
            return Scripted(400, {"error": {"message": "bad request", "type": "invalid_request_error"}})
        return answer(body, n)

    args = ["-w", str(mini_ws), "edits", "screen", "--judge", "openai:judge-model", "-o", "max_retries=0", "--json"]
    with ChatServer(script) as server:
        first = run_cli([*args, "-o", f"base_url={server.url}"], env={"OPENAI_API_KEY": "sk-x"})
        failing["on"] = False
        again = run_cli([*args, "-o", f"base_url={server.url}"], env={"OPENAI_API_KEY": "sk-x"})
    assert first.exit_code == 1 and "3 edits have questions whose requests failed" in first.stderr
    states = {r["spec"]: r for r in json.loads(first.stdout)["edits"]}
    assert {r["state"] for r in states.values()} <= {"incomplete", "doubted"}
    assert all(len(r["failed"]) == 1 and r["failed"][0].startswith("edit-looks-natural: ") for r in states.values())
    assert again.exit_code == 0, again.stderr
    assert len(asked) == 18  # five answered the first time, the natural-photograph one the second, per edit


def test_a_spec_that_could_not_be_screened_is_not_done(mini_ws):
    # An edit whose files are gone, or a spec asked for by id with no edit, was 'not screened' with exit 0; a
    # typo'd spec id said 'no edit yet; make one with cfkit edit NOPE'.
    import shutil

    assert run_cli(["-w", str(mini_ws), "edit", "EX01", "--engine", "classical"]).exit_code == 0
    env = {"OPENAI_API_KEY": "sk-x"}
    with ChatServer(lambda body, n: Scripted(body=completion("No."))) as server:
        args = ["-w", str(mini_ws), "edits", "screen", "-o", "max_retries=0"]
        url = ["-o", f"base_url={server.url}", "--judge", "openai:judge-model"]
        every = run_cli([*args, *url], env=env)  # EX02 and EX03 have no edit yet: not made, nothing failed
        assert every.exit_code == 0, every.stderr
        asked = run_cli([*args, *url, "EX02"], env=env)
        assert asked.exit_code == 1 and "1 spec could not be screened (EX02" in asked.stderr
        typo = run_cli([*args, *url, "EX01", "EX9"], env=env)
        assert typo.exit_code == 2 and typo.stderr.strip().splitlines() == [
            f"error: no spec 'EX9' in {mini_ws / 'interventions'}. (specs there: EX01, EX02, EX03). "
            "Create one with 'cfkit specs new'."]
        sent = len(server.requests)
        shutil.rmtree(mini_ws / ".cfkit" / "edits" / "EX01")
        gone = run_cli([*args, "-o", f"base_url={server.url}", "--judge", "openai:other-judge"], env=env)
        assert gone.exit_code == 1 and "EX01 edit #1: not screened" in gone.stdout
        assert "1 spec could not be screened (EX01" in gone.stderr
        assert len(server.requests) == sent  # nothing was asked about an edit that could not be read


def test_a_reply_cut_off_at_the_token_limit_is_not_read_and_is_asked_again(mini_ws, tmp_path):
    # "Yes, the edit still shows the" stopped at the token limit was read as the judge's Yes: a cut-off reply is a
    # failed question now (exit 1), asked again by the next run, whole with a larger --max-tokens.
    originals = _import_edits(mini_ws, tmp_path)
    asked: list[tuple[str, str]] = []
    answer = judge_script(originals, asked)

    def script(body: dict, n: int) -> Scripted:
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        if limit < 64 and "natural photograph" in user_text(body):
            return Scripted(body=completion("Yes, the edit looks like a", finish_reason="length"))
        return answer(body, n)

    args = ["-w", str(mini_ws), "edits", "screen", "--judge", "openai:judge-model", "-o", "max_retries=0", "--json"]
    with ChatServer(script) as server:
        first = run_cli([*args, "-o", f"base_url={server.url}"], env={"OPENAI_API_KEY": "sk-x"})
        again = run_cli([*args, "--max-tokens", "64", "-o", f"base_url={server.url}"], env={"OPENAI_API_KEY": "sk-x"})
    assert first.exit_code == 1 and "3 edits have questions whose requests failed or whose replies were cut off" \
        in first.stderr
    states = {r["spec"]: r for r in json.loads(first.stdout)["edits"]}
    assert all(r["failed"] == ["edit-looks-natural: the reply was cut off at the token limit (16 tokens), so it was "
                               "not read; raise --max-tokens (now 16) and run again"] for r in states.values())
    assert all(a["question"] != "edit-looks-natural" for r in states.values() for a in r["answers"])
    assert again.exit_code == 0, again.stderr
    assert len(asked) == 18  # five answered whole the first time, the natural-photograph one the second, per edit
    natural = {r["spec"]: [a for a in r["answers"] if a["question"] == "edit-looks-natural"]
               for r in json.loads(again.stdout)["edits"]}
    assert all(len(found) == 1 for found in natural.values())
