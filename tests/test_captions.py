"""Captions: the four modality conditions, the templates, and the leakage lint."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from cfkit.captions import Caption
from cfkit.lint import VERDICT_TERMS, find_terms, lint_caption, lint_captions
from cfkit.prompts import CONDITIONS, Prompt, load_templates, render_prompt, templates_sha256
from cfkit.subsets import workspace_cases
from cfkit.cases import Case
from cfkit.errors import CaptionError, InputError
from cfkit.workspace import load_workspace
from chat_api_server import ChatServer, Scripted, completion, error_body
from conftest import gradient_image, run_cli, tree_snapshot, write_workspace

TEMPLATES = Path(__file__).resolve().parent.parent / "cfkit" / "templates"

YES_NO = [{"id": "A", "text": "Yes"}, {"id": "B", "text": "No"}]

CASES = [
    {"id": "T001", "images": ["T001.png"], "question": "Is this print suitable for a surf shop's summer poster?",
     "options": YES_NO, "gold": "B", "yes_option": "A", "rationale": "RATIONALE-SECRET-1",
     "provenance": {"title": "The Great Wave off Kanagawa", "creator": "Katsushika Hokusai",
                    "provider": "PROVIDER-SECRET", "url": "https://example.org/URL-SECRET", "license": "CC0"}},
    {"id": "T002", "images": ["T002.png"], "question": "Is this photograph suitable for a children's hospital ward?",
     "options": YES_NO, "gold": "A", "yes_option": "A", "rationale": "RATIONALE-SECRET-2",
     "provenance": {"title": "Night Watch Study", "creator": "Unknown"}},
    {"id": "T003", "images": ["T003.png"], "question": "Which celebration does this poster belong to?",
     "options": [{"id": "A", "text": "A Mid-Autumn festival"}, {"id": "B", "text": "A Diwali celebration"},
                 {"id": "C", "text": "A harvest fair"}], "gold": "A"},
    {"id": "T004", "images": ["T004a.png", "T004b.png"], "question": "Which image suits a quiet reading room?",
     "options": [{"id": "A", "text": "The first image"}, {"id": "B", "text": "The second image"}], "gold": "B",
     "yes_option": "A"},
]

CLEAN = {
    "T001": {"neutral": "A woodblock print: a towering blue wave curls over three narrow boats, with a small "
                        "snow-capped mountain in the distance.",
             "evidence": "The boats are being swamped and the rowers crouch low against the breaking wave."},
    "T002": {"neutral": "A dim photograph of a long corridor; a figure in a dark coat stands at the far end.",
             "evidence": "The figure's face is hidden and the light flickers over a stained wall."},
    "T003": {"neutral": "A poster with round lanterns, a full moon and small round pastries on a plate.",
             "evidence": "The pastries are round mooncakes beneath a full moon."},
    "T004": {"neutral": "Two photographs of rooms: one has a loud neon sign, the other soft lamps and armchairs.",
             "evidence": "In the second photograph, the lamps are dimmed and the armchairs face a bookshelf."},
}


def write_caption(ws_root: Path, case_id: str, **fields) -> Path:
    import yaml

    data = {"author": "human", "reviewed": True, **fields}
    path = ws_root / "captions" / f"{case_id}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    return path


def make_caption_ws(root: Path) -> Path:
    """The conftest workspace with provenance, a three-option case, a paired-image case and clean captions."""
    write_workspace(root)
    images = root / "data" / "images"
    for name, seed in (("T004a.png", 4), ("T004b.png", 5)):
        Image.fromarray(gradient_image(48, 32, seed)).save(images / name)
    (root / "data" / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in CASES))
    for case_id, fields in CLEAN.items():
        write_caption(root, case_id, **fields)
    return root


@pytest.fixture
def cws(tmp_path: Path) -> Path:
    return make_caption_ws(tmp_path / "cws")


def case_by_id(case_id: str) -> Case:
    return Case.model_validate(next(c for c in CASES if c["id"] == case_id))


# ---------------------------------------------------------------------------
# The lint: leaks are caught with the right rule


LEAKS = [
    # (case, neutral, extra caption fields, rule, offending words)
    ("T001", "A scene much like The Great Wave off Kanagawa, with boats below.", {}, "identity",
     ["The Great Wave off Kanagawa"]),
    ("T001", "A print in the style of Katsushika Hokusai: boats under a wave.", {}, "identity",
     ["Katsushika Hokusai"]),
    ("T001", "A HOKUSAI print of a wave over boats.", {}, "identity", ["HOKUSAI"]),  # different case
    ("T001", "Boats under a wave (Hokusai), a mountain behind.", {}, "identity", ["Hokusai"]),  # punctuation
    ("T001", "A wave over boats; Hokusai's mountain behind.", {}, "identity", ["Hokusai"]),  # possessive
    ("T001", "A Hokusai-inspired wave curls over the boats.", {}, "identity", ["Hokusai"]),  # hyphenated word
    ("T001", "Pikachu rides a curling wave.", {"identity_terms": ["Pikachu", "Pokémon"]}, "identity", ["Pikachu"]),
    ("T001", "A pokemon-themed surfboard under a wave.", {"identity_terms": ["Pokémon"]}, "identity", ["pokemon"]),
    ("T003", "A poster for a mid-autumn festival, with lanterns.", {}, "identity", ["mid-autumn festival"]),
    ("T001", "A calm blue wave, suitable for a summer poster.", {}, "verdict", ["suitable"]),
    ("T001", "A bright wave that would be ideal for a surf shop.", {}, "verdict", ["ideal"]),
    ("T001", "The palette is well-suited to summer.", {}, "verdict", ["well-suited"]),
    ("T001", "The colours are well suited to summer.", {}, "verdict", ["well suited"]),
    ("T001", "A wave that fits a beach party.", {}, "verdict", ["fits"]),
    ("T001", "This print is fit for a shop window.", {}, "verdict", ["fit for"]),
    ("T001", "A mismatch between the stormy sea and a party.", {}, "verdict", ["mismatch"]),
    ("T001", "Readers should see a wave; it is Perfect for posters.", {}, "verdict", ["should", "Perfect for"]),
    ("T001", "An Inappropriate, stormy sea.", {}, "verdict", ["Inappropriate"]),
    ("T001", "Boats that shouldn't be on a poster.", {}, "verdict", ["shouldn't"]),
]


@pytest.mark.parametrize("case_id, neutral, extra, rule, words", LEAKS, ids=[f"{r}:{n[:30]}" for _, n, _, r, _ in LEAKS])
def test_leaky_neutral_caption_is_caught_with_the_right_rule(case_id, neutral, extra, rule, words):
    caption = Caption(neutral=neutral, evidence="The boats are swamped by the breaking wave.", reviewed=True, **extra)
    findings = lint_caption(caption, case_by_id(case_id), Path(f"captions/{case_id}.yaml"))
    assert [(f.field, f.rule, f.level) for f in findings] == [("neutral", rule, "error")]
    assert list(findings[0].words) == words
    assert findings[0].describe().startswith(f"captions/{case_id}.yaml: neutral: {rule}:")


@pytest.mark.parametrize("case_id", sorted(CLEAN))
def test_clean_captions_pass(case_id):
    caption = Caption(**CLEAN[case_id], reviewed=True)
    assert lint_caption(caption, case_by_id(case_id), Path("x.yaml")) == []


@pytest.mark.parametrize("text", [
    "A woman with a shawl over her shoulder.",               # "should"
    "She wears a fitted bodice and a long skirt.",           # "fits"
    "Idealised figures stand in a garden.",                  # "ideal"
    "A suitcase rests against the wall.",                    # "suitable" / "suits"
    "A fitness class in a park, people stretching.",         # "fit"
    "A matchbox and a candle on the table.",                 # "mismatch"
    "A great wave of colour sweeps across the sky.",         # part of the title only
    "Boats on the open sea at Kanagawa-like dusk.",          # one title word is not the title
    "A yes-or-no sign hangs by the door, second from left.",  # generic option words
])
def test_innocent_words_are_not_flagged(text):
    caption = Caption(neutral=text, evidence="A detail the neutral text leaves out.", reviewed=True)
    assert lint_caption(caption, case_by_id("T001"), Path("x.yaml")) == []
    assert lint_caption(caption, case_by_id("T004"), Path("x.yaml")) == []


def test_find_terms_reports_the_words_as_written():
    assert find_terms("The Dürer-like engraving; DURER's monogram.", ["Durer"]) == ["Dürer", "DURER"]
    assert find_terms("a shoulder, a fitted coat", ["should", "fits", "fit for"]) == []
    assert find_terms("Well - suited", ["well-suited"]) == ["Well - suited"]


@pytest.mark.parametrize("evidence, rule", [
    (None, "evidence-missing"),
    ("   ", "evidence-missing"),
    ("A towering blue wave curls over three narrow boats.", "evidence-copy"),
    ("A TOWERING blue wave curls over three narrow boats, with a small snow-capped mountain in the distance",
     "evidence-copy"),
    ("The stormy sea makes it unsuitable for a cheerful shop.", "verdict"),
])
def test_evidence_rules(evidence, rule):
    caption = Caption(neutral=CLEAN["T001"]["neutral"], evidence=evidence, reviewed=True)
    findings = lint_caption(caption, case_by_id("T001"), Path("x.yaml"))
    assert [(f.field, f.rule, f.level) for f in findings] == [("evidence", rule, "error")]


def test_evidence_may_name_what_the_neutral_text_may_not():
    # The identity rule is for the neutral text; the evidence states the cue.
    caption = Caption(neutral=CLEAN["T003"]["neutral"], evidence="The pastries are mooncakes of a Mid-Autumn festival.",
                      reviewed=True)
    assert lint_caption(caption, case_by_id("T003"), Path("x.yaml")) == []


def test_unreviewed_model_draft_is_a_warning_not_an_error():
    draft = Caption(**CLEAN["T001"], author="openai:gpt-5.5", reviewed=False)
    findings = lint_caption(draft, case_by_id("T001"), Path("x.yaml"))
    assert [(f.rule, f.level) for f in findings] == [("unreviewed-draft", "warning")]
    assert lint_caption(Caption(**CLEAN["T001"], author="human", reviewed=False), case_by_id("T001"), Path("x")) == []


def test_allow_terms_exempts_a_descriptive_title_word_but_not_verdicts():
    case = case_by_id("T002")  # title "Night Watch Study"
    text = "A night watch study: a guard walks a corridor; it is suitable."
    plain = Caption(neutral=text, evidence="The guard's lamp is out.", reviewed=True)
    assert {f.rule for f in lint_caption(plain, case, Path("x"))} == {"identity", "verdict"}
    allowed = Caption(neutral=text, evidence="The guard's lamp is out.", reviewed=True, allow_terms=["night watch study"])
    assert {f.rule for f in lint_caption(allowed, case, Path("x"))} == {"verdict"}


def test_verdict_list_is_documented_and_extendable_from_the_workspace(cws):
    assert {"suitable", "unsuitable", "appropriate", "ideal", "recommend", "should", "fits", "mismatch"} <= set(VERDICT_TERMS)
    ws = load_workspace(cws)
    write_caption(cws, "T002", neutral="A corridor with a gloomy figure at the end.", evidence="The face is hidden.")
    assert lint_captions(ws).ok
    (cws / "probes" / "verdict-words.txt").write_text("# house list\ngloomy  # judgmental here\n")
    report = lint_captions(ws)
    assert [(f.case, f.rule, f.words) for f in report.errors] == [("T002", "verdict", ("gloomy",))]


# ---------------------------------------------------------------------------
# The lint over a workspace


def test_workspace_lint_subset_missing_malformed_and_unknown(cws):
    ws = load_workspace(cws)
    (cws / "captions" / "T003.yaml").unlink()
    (cws / "captions" / "T004.yaml").write_text("neutral: [unclosed\n")
    (cws / "captions" / "ZZ9.yaml").write_text("neutral: A plain grey field.\nevidence: It is grey.\n")
    report = lint_captions(ws)
    got = {(f.case, f.rule, f.level) for f in report.findings}
    assert got == {("T003", "caption-missing", "error"), ("T004", "malformed", "error"),
                   ("ZZ9", "unknown-case", "warning")}
    # A subset narrows the check to its cases; a missing caption there is still an error.
    (cws / "probes" / "sub.txt").write_text("# two cases\nT001\nT003\n")
    report = lint_captions(ws, subset="sub.txt")
    assert report.cases == ["T001", "T003"]
    assert [(f.case, f.rule) for f in report.findings] == [("T003", "caption-missing")]


def test_modality_subset_file_is_the_default_selection(cws):
    ws = load_workspace(cws)
    (cws / "captions" / "T003.yaml").unlink()
    (cws / "probes" / "modality-100.txt").write_text("T001\nT002\n")
    assert lint_captions(ws).ok  # T003 is outside the subset, so its missing caption is fine


def test_subset_file_errors_name_file_and_line(cws):
    ws = load_workspace(cws)
    (cws / "probes" / "bad.txt").write_text("T001\nNOPE\n")
    with pytest.raises(InputError, match=r"bad\.txt:2: case 'NOPE'"):
        lint_captions(ws, subset="bad.txt")


# ---------------------------------------------------------------------------
# Rendering the four conditions


def test_four_conditions_differ_only_in_the_visual_slot(cws):
    ws = load_workspace(cws)
    case = workspace_cases(ws).get("T001")
    prompts = {c: render_prompt(ws, case, c) for c in CONDITIONS}
    assert all(isinstance(p, Prompt) for p in prompts.values())
    assert len({p.system for p in prompts.values()}) == 1
    # What differs is exactly the slot text each condition's template defines, filled from the caption.
    slot = {name: (TEMPLATES / f"visual-{name}.txt").read_text().strip() for name in ("text", "neutral", "evidence", "image")}
    neutral, evidence = CLEAN["T001"]["neutral"], CLEAN["T001"]["evidence"]
    expected = {
        "text": slot["text"],
        "neutral": slot["neutral"].replace("{neutral}", neutral),
        "evidence": slot["evidence"].replace("{neutral}", neutral).replace("{evidence}", evidence),
        "image": slot["image"],
    }
    around = set()
    for c in CONDITIONS:
        user = prompts[c].user
        assert user.count(expected[c]) == 1
        head, tail = user.split(expected[c])
        around.add((head, tail))
    assert len(around) == 1  # everything outside the slot is identical across the four conditions
    [(head, tail)] = around
    shared = head + tail
    assert not any(expected[c] in shared for c in CONDITIONS)
    # The shared part carries the question and the options as "A. Yes" lines, once.
    assert shared.count(case.question) == 1
    assert "\nA. Yes\nB. No\n" in shared
    assert '"answer"' in shared and '"reason"' in shared and '"confidence"' in shared
    assert [p.images for p in prompts.values()] == [(), (), (), (ws.image_root / "T001.png",)]


def test_gold_rationale_and_provenance_never_reach_the_prompt(cws):
    ws = load_workspace(cws)
    raw = dict(CASES[0])
    case = Case.model_validate(raw)
    flipped = Case.model_validate(raw | {"gold": "A", "rationale": "other", "provenance": None})
    for condition in CONDITIONS:
        prompt = render_prompt(ws, case, condition)
        text = prompt.system + "\n" + prompt.user
        for secret in ("RATIONALE-SECRET", "PROVIDER-SECRET", "URL-SECRET", "Kanagawa", "Hokusai", "gold", "CC0"):
            assert secret not in text
        assert render_prompt(ws, flipped, condition) == prompt  # gold and provenance change nothing


def test_paired_image_case_carries_two_labelled_images(cws):
    ws = load_workspace(cws)
    case = workspace_cases(ws).get("T004")
    prompt = render_prompt(ws, case, "image")
    assert prompt.images == (ws.image_root / "T004a.png", ws.image_root / "T004b.png")
    assert "first image" in prompt.user and "second image" in prompt.user
    assert "A. The first image\nB. The second image" in prompt.user


def test_image_override_replaces_the_case_images(cws, tmp_path):
    ws = load_workspace(cws)
    case = workspace_cases(ws).get("T001")
    edited = tmp_path / "CF01-composite.png"
    prompt = render_prompt(ws, case, "image", images=[edited])
    assert prompt.images == (edited,)
    assert prompt.user == render_prompt(ws, case, "image").user
    with pytest.raises(InputError, match="images are given only to the image condition"):
        render_prompt(ws, case, "text", images=[edited])
    with pytest.raises(InputError, match="1 or 2 images, got 3"):
        render_prompt(ws, case, "image", images=[edited] * 3)


def test_missing_or_empty_caption_is_a_caption_error_naming_the_file(cws):
    ws = load_workspace(cws)
    case = workspace_cases(ws).get("T001")
    (cws / "captions" / "T001.yaml").unlink()
    with pytest.raises(CaptionError, match=r"captions/T001\.yaml: no caption for case T001"):
        render_prompt(ws, case, "neutral")
    assert render_prompt(ws, case, "text").images == ()  # text and image need no caption
    write_caption(cws, "T001", neutral="A wave.", evidence="")
    with pytest.raises(CaptionError, match="field 'evidence' is missing or empty"):
        render_prompt(ws, case, "evidence")
    (cws / "captions" / "T001.yaml").write_text("neutral: A wave.\ncolour: blue\n")
    with pytest.raises(CaptionError, match=r"T001\.yaml: unknown field 'colour'"):
        render_prompt(ws, case, "neutral")


def test_workspace_templates_override_defaults_and_change_the_hash(cws):
    ws = load_workspace(cws)
    case = workspace_cases(ws).get("T001")
    before = templates_sha256(ws)
    default_user = render_prompt(ws, case, "neutral").user
    folder = cws / "probes" / "templates"
    folder.mkdir()
    (folder / "visual-neutral.txt").write_text("Here is what the picture shows: {neutral}\n")
    prompt = render_prompt(ws, case, "neutral")
    assert f"Here is what the picture shows: {CLEAN['T001']['neutral']}" in prompt.user
    assert prompt.user != default_user
    assert render_prompt(ws, case, "text").user == render_prompt(ws, case, "text").user
    after = templates_sha256(ws)
    assert after != before and len(after) == 64
    assert load_templates(ws).sources["visual-neutral.txt"] == folder / "visual-neutral.txt"
    assert load_templates(ws).sources["user.txt"] == TEMPLATES / "user.txt"
    # Same bytes, same hash.
    (folder / "visual-neutral.txt").write_text((TEMPLATES / "visual-neutral.txt").read_text())
    assert templates_sha256(ws) == before


def test_a_template_without_its_slot_is_refused(cws):
    ws = load_workspace(cws)
    folder = cws / "probes" / "templates"
    folder.mkdir()
    (folder / "user.txt").write_text("Question: {question}\n{options}\n")
    with pytest.raises(InputError, match=r"user\.txt: must contain exactly 1 of '\{visual\}' \(found 0\)"):
        load_templates(ws)


def test_question_text_with_braces_is_not_expanded(cws):
    ws = load_workspace(cws)
    case = Case.model_validate(CASES[0] | {"question": "Does {options} or {visual} appear here?"})
    user = render_prompt(ws, case, "text").user
    assert "Question: Does {options} or {visual} appear here?" in user


# ---------------------------------------------------------------------------
# The command line


def test_cli_lint_passes_on_clean_workspace(cws):
    result = run_cli(["-w", str(cws), "captions", "lint"])
    assert result.exit_code == 0, result.output
    assert "4 cases, 4 caption files: 0 errors, 0 warnings" in result.stderr


def test_cli_lint_fails_on_a_leaky_copy_naming_the_file(cws, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(cws, copy)
    write_caption(copy, "T002", neutral="A corridor scene that would be ideal for a ward.", evidence="The face is hidden.")
    before = tree_snapshot(copy)
    result = run_cli(["-w", str(copy), "captions", "lint"])
    assert result.exit_code == 1
    assert "captions/T002.yaml: neutral: verdict: 'ideal'" in result.stdout
    assert "caption lint found 1 errors" in result.stderr
    assert "Traceback" not in result.output
    assert tree_snapshot(copy) == before  # the lint changes nothing

    as_json = run_cli(["-w", str(copy), "captions", "lint", "--json"])
    assert as_json.exit_code == 1
    data = json.loads(as_json.stdout)
    assert data["ok"] is False and data["errors"] == 1
    assert data["findings"] == [{"case": "T002", "file": "captions/T002.yaml", "field": "neutral", "rule": "verdict",
                                 "level": "error", "words": ["ideal"],
                                 "message": "leave the judgment to the model; describe only what is visible."}]


def test_cli_lint_unknown_case_is_bad_input(cws):
    result = run_cli(["-w", str(cws), "captions", "lint", "NOPE"])
    assert result.exit_code == 2
    assert "case 'NOPE' is not in" in result.stderr


def test_cli_build_writes_four_conditions_per_case(cws, tmp_path):
    out = tmp_path / "conditions.jsonl"
    result = run_cli(["-w", str(cws), "captions", "build", "--output", str(out)])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["case"], r["condition"]) for r in rows] == [(c, k) for c in ("T001", "T002", "T003", "T004") for k in CONDITIONS]
    assert set(rows[0]) == {"case", "condition", "system", "user", "images"}
    pair = next(r for r in rows if r["case"] == "T004" and r["condition"] == "image")
    assert pair["images"] == ["data/images/T004a.png", "data/images/T004b.png"]
    again = run_cli(["-w", str(cws), "captions", "build", "--output", str(out)])
    assert again.exit_code == 2 and "already exists" in again.stderr
    to_stdout = run_cli(["-w", str(cws), "captions", "build", "T002", "--condition", "text"])
    assert [json.loads(line)["condition"] for line in to_stdout.stdout.splitlines()] == ["text"]


def test_cli_build_refuses_when_captions_are_missing(cws):
    (cws / "captions" / "T003.yaml").unlink()
    result = run_cli(["-w", str(cws), "captions", "build"])
    assert result.exit_code == 2
    assert "1 of 4 selected cases have no caption" in result.stderr and "T003" in result.stderr
    assert run_cli(["-w", str(cws), "captions", "build", "--condition", "image"]).exit_code == 0


def test_cli_show_prints_the_prompt_as_sent(cws):
    ws = load_workspace(cws)
    result = run_cli(["-w", str(cws), "captions", "show", "T004"])
    assert result.exit_code == 0, result.output
    for condition in CONDITIONS:
        prompt = render_prompt(ws, workspace_cases(ws).get("T004"), condition)
        assert prompt.user in result.stdout
    assert "T004a.png, T004b.png" in result.stdout
    one = run_cli(["-w", str(cws), "captions", "show", "T001", "--condition", "evidence", "--json"])
    [record] = json.loads(one.stdout)
    assert record["condition"] == "evidence" and CLEAN["T001"]["evidence"] in record["user"]


def test_cli_show_without_caption_shows_the_rest_and_fails(cws):
    (cws / "captions" / "T001.yaml").unlink()
    result = run_cli(["-w", str(cws), "captions", "show", "T001"])
    assert result.exit_code == 2
    assert "T001 · text" in result.stdout and "T001 · image" in result.stdout
    assert "T001 · neutral" not in result.stdout
    assert "captions/T001.yaml: no caption" in result.stderr


def test_cli_import_stays_light():
    import subprocess
    import sys

    code = ("import sys, cfkit.cli.captions; "
            "print(sorted(m for m in ('torch','diffusers','transformers','openai','lpips','skimage') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# ---------------------------------------------------------------------------
# examples/mini


def test_examples_mini_passes_the_lint(mini_ws):
    result = run_cli(["-w", str(mini_ws), "captions", "lint"])
    assert result.exit_code == 0, result.output


def test_examples_mini_with_one_leaky_caption_fails(mini_ws):
    ws = load_workspace(mini_ws)
    files = sorted(ws.captions_dir.glob("*.yaml"))
    if not files:
        pytest.skip("examples/mini has no captions")
    import yaml

    target = files[0]
    data = yaml.safe_load(target.read_text())
    data["neutral"] = data["neutral"].rstrip() + " It would be ideal for the occasion."
    target.write_text(yaml.safe_dump(data, sort_keys=False))
    result = run_cli(["-w", str(mini_ws), "captions", "lint"])
    assert result.exit_code == 1
    assert f"captions/{target.name}" in result.stdout


# ---------------------------------------------------------------------------
# Drafting, against a real HTTP server speaking the Chat Completions wire format


def scripted(replies: list[tuple[int, str]]):
    """A script for the loopback server: each (status, text) answers one request, then a plain description."""
    replies = list(replies)

    def script(body: dict, n: int) -> Scripted:
        status, content = replies.pop(0) if replies else (200, "A plain grey picture.")
        if status == 200:
            return Scripted(body=completion(content, model=body["model"]))
        return Scripted(status, error_body(content, kind="server_error"))

    return script


@pytest.fixture
def chat():
    servers: list[ChatServer] = []

    def start(replies):
        servers.append(ChatServer(scripted(replies)).__enter__())
        return servers[-1]

    yield start
    for s in servers:
        s.__exit__(None, None, None)


def draft_cli(ws_root: Path, server: ChatServer, *args: str):
    return run_cli(["-w", str(ws_root), "captions", "draft", "--model", "openai:tiny-vlm",
                    "-o", f"base_url={server.url}", "-o", "max_retries=0", *args])


def test_draft_writes_an_unreviewed_model_caption_and_keeps_human_ones(cws, chat):
    import base64

    import yaml

    (cws / "captions" / "T001.yaml").unlink()
    human = (cws / "captions" / "T002.yaml").read_bytes()
    server = chat([(200, '"Description: A blue wave curls over three small boats under a pale sky."')])
    result = draft_cli(cws, server, "T001", "T002")
    assert result.exit_code == 0, result.output
    assert len(server.requests) == 1  # T002 has a human caption: no request, file untouched
    assert (cws / "captions" / "T002.yaml").read_bytes() == human
    assert "T002: kept the human caption." in result.stdout
    saved = yaml.safe_load((cws / "captions" / "T001.yaml").read_text())
    assert saved == {"neutral": "A blue wave curls over three small boats under a pale sky.",
                     "author": "openai:tiny-vlm", "reviewed": False}
    # The model saw the image and instructions against names and verdicts, and nothing of the case.
    body = server.requests[0]
    system, user = body["messages"][0]["content"], body["messages"][1]["content"]
    assert "Never identify" in system and "Never judge" in system
    image_url = user[1]["image_url"]["url"]
    assert image_url.startswith("data:image/png;base64,")
    assert base64.b64decode(image_url.split(",", 1)[1]) == (cws / "data" / "images" / "T001.png").read_bytes()
    sent = json.dumps(body)
    for secret in ("surf shop", "Kanagawa", "Hokusai", "RATIONALE", "Yes"):
        assert secret not in sent
    # The lint now flags the draft as unreviewed and asks for evidence.
    lint = lint_captions(load_workspace(cws), ["T001"])
    assert {(f.rule, f.level) for f in lint.findings} == {("unreviewed-draft", "warning"), ("evidence-missing", "error")}


def test_draft_reports_leaks_in_the_draft(cws, chat):
    (cws / "captions" / "T001.yaml").unlink()
    server = chat([(200, "A Hokusai-style wave over boats; it would be ideal for a poster.")])
    result = draft_cli(cws, server, "T001")
    assert result.exit_code == 0, result.output
    assert "captions/T001.yaml: neutral: identity: 'Hokusai'" in result.stdout
    assert "captions/T001.yaml: neutral: verdict: 'ideal'" in result.stdout


def test_redraft_replaces_only_unreviewed_drafts(cws, chat):
    import yaml

    (cws / "captions" / "T001.yaml").unlink()
    server = chat([(200, "First draft of a wave."), (200, "Second draft of a wave.")])
    assert draft_cli(cws, server, "T001").exit_code == 0
    kept = draft_cli(cws, server, "T001")
    assert "kept the unreviewed draft by openai:tiny-vlm; pass --redraft" in kept.stdout
    assert len(server.requests) == 1
    assert draft_cli(cws, server, "T001", "T002", "--redraft").exit_code == 0
    assert len(server.requests) == 2  # T002 is human: never asked about, even with --redraft
    assert yaml.safe_load((cws / "captions" / "T001.yaml").read_text())["neutral"] == "Second draft of a wave."


def test_draft_sends_both_images_of_a_paired_case(cws, chat):
    (cws / "captions" / "T004.yaml").unlink()
    server = chat([(200, "Two rooms: one lit by neon, the other by lamps.")])
    assert draft_cli(cws, server, "T004").exit_code == 0
    user = server.requests[0]["messages"][1]["content"]
    assert [part["type"] for part in user] == ["text", "image_url", "image_url"]
    assert "first image" in user[0]["text"] and "second image" in user[0]["text"]


def test_draft_failure_writes_nothing_and_exits_1(cws, chat):
    (cws / "captions" / "T001.yaml").unlink()
    server = chat([(500, "model crashed")])
    result = draft_cli(cws, server, "T001")
    assert result.exit_code == 1
    assert "T001: not drafted: the request failed: HTTP 500" in result.stdout
    assert "1 drafts failed" in result.stderr
    assert not (cws / "captions" / "T001.yaml").exists()
    empty = chat([(200, "   ")])
    result = draft_cli(cws, empty, "T001")
    assert result.exit_code == 1 and "not drafted: openai:tiny-vlm returned an empty reply." in result.stdout
    assert not (cws / "captions" / "T001.yaml").exists()


def test_draft_refuses_a_backend_without_images(cws):
    pytest.importorskip("cfkit.backends.baseline", reason="the backends are not in this checkout")
    result = run_cli(["-w", str(cws), "captions", "draft", "--model", "baseline:always-no", "T001"])
    assert result.exit_code == 2
    assert "cannot see images" in result.stderr
    no_model = run_cli(["-w", str(cws), "captions", "draft", "T001"])
    assert no_model.exit_code == 2 and "no model given" in no_model.stderr


def test_unreadable_files_become_one_line_errors(cws):
    ws = load_workspace(cws)
    (cws / "captions" / "T001.yaml").write_bytes(b"neutral: caf\xe9 au lait\n")
    (cws / "captions" / "T002.yaml").write_text("neutral: [unclosed\n")
    report = lint_captions(ws, ["T001", "T002"])
    messages = {f.case: f.message for f in report.findings if f.rule == "malformed"}
    assert "T001.yaml is not UTF-8 text" in messages["T001"]
    assert "T002.yaml:2: not valid YAML (did not find expected ',' or ']')" in messages["T002"]
    result = run_cli(["-w", str(cws), "captions", "show", "T001", "--condition", "neutral"])
    assert result.exit_code == 2 and "is not UTF-8 text" in result.stderr and "Traceback" not in result.output
    (cws / "probes" / "sub.txt").write_text("T003\n")
    both = run_cli(["-w", str(cws), "captions", "lint", "T001", "--subset", "sub.txt"])
    assert both.exit_code == 2 and "not both" in both.stderr


_TERMS = ["Hokusai", "should", "fits", "well-suited", "fit for", "Mid-Autumn festival", "Dürer"]
_SEPARATORS = st.sampled_from([" ", ", ", ". ", " (", ") ", "; ", " - ", "-", " \u2014 ", "\n", "'s ", '"', ": "])


@settings(max_examples=150, deadline=None)
@given(term=st.sampled_from(_TERMS), before=_SEPARATORS, after=_SEPARATORS,
       upper=st.booleans(), glued=st.sampled_from(["", "ing", "er", "x"]))
def test_term_matching_is_whole_word_whatever_the_punctuation(term, before, after, upper, glued):
    written = term.upper() if upper else term
    text = f"Boats on a grey sea{before}{written}{glued}{after}under a pale sky."
    found = find_terms(text, [term])
    if glued:  # letters stuck to the end make another word: never a match
        assert found == []
    else:
        assert found == [written]
