"""Prompts: the four modality conditions rendered from one set of templates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cfkit.cases import parse_case
from cfkit.errors import CaptionError, InputError
from cfkit.prompts import CONDITIONS, Prompt, load_templates, render_prompt, templates_sha256
from cfkit.subsets import workspace_cases
from cfkit.workspace import load_workspace
from support.caption_workspace import CASES, CLEAN, TEMPLATES, make_caption_ws, write_caption
from support.workspace import run_cli


@pytest.fixture
def cws(tmp_path: Path) -> Path:
    return make_caption_ws(tmp_path / "cws")



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
    case = parse_case(raw)
    flipped = parse_case(raw | {"gold": "A", "rationale": "other", "provenance": None})
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
    case = parse_case(CASES[0] | {"question": "Does {options} or {visual} appear here?"})
    user = render_prompt(ws, case, "text").user
    assert "Question: Does {options} or {visual} appear here?" in user

def test_cli_build_writes_four_conditions_per_case(cws, tmp_path):
    out = tmp_path / "conditions.jsonl"
    result = run_cli(["-w", str(cws), "captions", "build", "--all-cases", "--output", str(out)])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["case"], r["condition"]) for r in rows] == [(c, k) for c in ("T001", "T002", "T003", "T004") for k in CONDITIONS]
    assert set(rows[0]) == {"case", "condition", "system", "user", "images"}
    pair = next(r for r in rows if r["case"] == "T004" and r["condition"] == "image")
    assert pair["images"] == ["data/images/T004a.png", "data/images/T004b.png"]
    again = run_cli(["-w", str(cws), "captions", "build", "--all-cases", "--output", str(out)])
    assert again.exit_code == 2 and "already exists" in again.stderr
    to_stdout = run_cli(["-w", str(cws), "captions", "build", "T002", "--condition", "text"])
    assert [json.loads(line)["condition"] for line in to_stdout.stdout.splitlines()] == ["text"]


def test_cli_build_refuses_when_captions_are_missing(cws):
    (cws / "captions" / "T003.yaml").unlink()
    result = run_cli(["-w", str(cws), "captions", "build", "--all-cases"])
    assert result.exit_code == 2
    assert "1 of 4 selected cases has no caption" in result.stderr and "T003" in result.stderr
    assert run_cli(["-w", str(cws), "captions", "build", "--all-cases", "--condition", "image"]).exit_code == 0


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


def test_packaged_templates_read_as_importlib_resources_reads_them():
    """The packaged defaults are read from the package's folder without importlib.resources (a cost before a run's
    first request); text and file must be what importlib.resources gives, for every template a probe uses."""
    from importlib import resources

    from cfkit.prompts import PROBE_TEMPLATES, _packaged_template

    for name in PROBE_TEMPLATES:
        ref = resources.files("cfkit") / "templates" / name
        text, path = _packaged_template(name)
        assert text == ref.read_text(encoding="utf-8") and text.strip(), name
        assert path == Path(str(ref)) and path.is_file(), name


def test_fill_slots_is_one_pass_of_the_slot_pattern():
    """fill_slots cuts a template at its slots once and keeps the cut; what it writes must be what one pass of
    re.sub over the slot pattern writes (a value holding a slot's name is not expanded again; an unknown slot and
    a slot without a value stay as written)."""
    import re

    from hypothesis import given, settings
    from hypothesis import strategies as st

    from cfkit.prompts import fill_slots

    slots = ("visual", "question", "options", "neutral", "evidence", "images")
    pattern = re.compile(r"\{(" + "|".join(slots) + r")\}")
    piece = st.one_of(st.sampled_from([f"{{{s}}}" for s in slots] + ["{", "}", "{other}", "{{options}}", "\n"]),
                      st.text(max_size=8))
    templates = st.lists(piece, max_size=12).map("".join)
    values = st.dictionaries(st.sampled_from(slots), st.one_of(st.text(max_size=6), st.just("{options}")))

    @settings(max_examples=400, deadline=None)
    @given(templates, values)
    def agrees(template, given_values):
        expected = pattern.sub(lambda m: given_values.get(m.group(1), m.group(0)), template)
        assert fill_slots(template, given_values) == expected
        assert fill_slots(template, given_values) == expected  # the cut, kept, gives the same again

    agrees()
