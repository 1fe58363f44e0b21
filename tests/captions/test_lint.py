"""The caption lint: names and verdict words are caught, innocent words are not."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cfkit.captions import Caption
from cfkit.lint import VERDICT_TERMS, find_terms, lint_caption, lint_captions
from cfkit.workspace import load_workspace
from support.caption_workspace import CLEAN, case_by_id, make_caption_ws, write_caption
from support.workspace import run_cli, tree_snapshot


@pytest.fixture
def cws(tmp_path: Path) -> Path:
    return make_caption_ws(tmp_path / "cws")



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
    assert lint_captions(ws, all_cases=True).ok
    (cws / "probes" / "verdict-words.txt").write_text("# house list\ngloomy  # judgmental here\n")
    report = lint_captions(ws, all_cases=True)
    assert [(f.case, f.rule, f.words) for f in report.errors] == [("T002", "verdict", ("gloomy",))]

# ---------------------------------------------------------------------------
# The lint over a workspace


def test_workspace_lint_subset_missing_malformed_and_unknown(cws):
    ws = load_workspace(cws)
    (cws / "captions" / "T003.yaml").unlink()
    (cws / "captions" / "T004.yaml").write_text("neutral: [unclosed\n")
    (cws / "captions" / "ZZ9.yaml").write_text("neutral: A plain grey field.\nevidence: It is grey.\n")
    report = lint_captions(ws, all_cases=True)
    got = {(f.case, f.rule, f.level) for f in report.findings}
    assert got == {("T003", "caption-missing", "error"), ("T004", "malformed", "error"),
                   ("ZZ9", "unknown-case", "warning")}
    # A subset narrows the check to its cases; a missing caption there is still an error.
    (cws / "probes" / "sub.txt").write_text("# two cases\nT001\nT003\n")
    report = lint_captions(ws, subset="sub.txt")
    assert report.cases == ["T001", "T003"]
    assert [(f.case, f.rule) for f in report.findings] == [("T003", "caption-missing")]

def test_cli_lint_passes_on_clean_workspace(cws):
    result = run_cli(["-w", str(cws), "captions", "lint", "--all-cases"])
    assert result.exit_code == 0, result.output
    assert "4 cases, 4 caption files: 0 errors, 0 warnings" in result.stderr


def test_cli_lint_fails_on_a_leaky_copy_naming_the_file(cws, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(cws, copy)
    write_caption(copy, "T002", neutral="A corridor scene that would be ideal for a ward.", evidence="The face is hidden.")
    before = tree_snapshot(copy)
    result = run_cli(["-w", str(copy), "captions", "lint", "--all-cases"])
    assert result.exit_code == 1
    assert "captions/T002.yaml: neutral: verdict: 'ideal'" in result.stdout
    assert "caption lint found 1 error;" in result.stderr
    assert "Traceback" not in result.output
    assert tree_snapshot(copy) == before  # the lint changes nothing

    as_json = run_cli(["-w", str(copy), "captions", "lint", "--all-cases", "--json"])
    assert as_json.exit_code == 1
    data = json.loads(as_json.stdout)
    assert data["ok"] is False and data["errors"] == 1
    assert data["findings"] == [{"case": "T002", "file": "captions/T002.yaml", "field": "neutral", "rule": "verdict",
                                 "level": "error", "words": ["ideal"],
                                 "message": "leave the judgment to the model; describe only what is visible."}]


CAPTION_FIELDS = {"neutral": "A wave over boats.", "evidence": "The wave curls left.", "author": "human",
                  "reviewed": True, "identity_terms": ["Hokusai"], "allow_terms": ["wave"]}


@pytest.mark.parametrize("field", sorted(CAPTION_FIELDS))
@pytest.mark.parametrize("wrong", [str.capitalize, str.upper, lambda name: name[:-1]],
                         ids=["capitalised", "upper-case", "misspelt"])
def test_cli_lint_names_a_key_in_the_wrong_case_or_misspelt_with_the_field_meant(cws, field, wrong):
    import yaml

    key = wrong(field)
    text = yaml.safe_dump({key if name == field else name: value for name, value in CAPTION_FIELDS.items()})
    (cws / "captions" / "T001.yaml").write_text(text)
    result = run_cli(["-w", str(cws), "captions", "lint", "T001"])
    assert result.exit_code == 1
    line = next(line for line in result.stdout.splitlines() if "T001.yaml" in line)
    assert f"unknown field '{key}' (did you mean '{field}'?)" in line, line
    assert "is required" not in line  # the missing field is explained by the key, not reported apart


def test_cli_lint_names_every_unknown_key_and_a_missing_field_no_key_was_meant_for(cws):
    (cws / "captions" / "T001.yaml").write_text("Neutral: A wave.\nEvidnce: It curls.\n")
    line = run_cli(["-w", str(cws), "captions", "lint", "T001"]).stdout
    assert ("unknown fields 'Neutral' (did you mean 'neutral'?) and 'Evidnce' (did you mean 'evidence'?); "
            "rename them.") in line
    (cws / "captions" / "T001.yaml").write_text("description: A wave.\n")
    line = run_cli(["-w", str(cws), "captions", "lint", "T001"]).stdout
    assert "unknown field 'description'; rename it or remove it; field 'neutral' is required, add it." in line


def test_cli_lint_unknown_case_is_bad_input(cws):
    result = run_cli(["-w", str(cws), "captions", "lint", "NOPE"])
    assert result.exit_code == 2
    assert "case 'NOPE' is not in" in result.stderr

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
