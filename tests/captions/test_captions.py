"""Caption files: reading them, and one-line errors for unreadable ones; the command stays light."""

from __future__ import annotations

from pathlib import Path

import pytest

from cfkit.lint import lint_captions
from cfkit.workspace import load_workspace
from support.caption_workspace import make_caption_ws
from support.workspace import run_cli


@pytest.fixture
def cws(tmp_path: Path) -> Path:
    return make_caption_ws(tmp_path / "cws")



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

def test_cli_import_stays_light():
    import subprocess
    import sys

    code = ("import sys, cfkit.cli.captions; "
            "print(sorted(m for m in ('torch','diffusers','transformers','openai','lpips','skimage') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("text", [
    "neutral: A cup.\nevidence: Foam.\n",
    "neutral: '  A cup.  '\nevidence: Foam.\nauthor: openai:m\n",
    "neutral: A cup.\nauthor: openai:m\nreviewed: 'yes'\n",
    "neutral: A cup.\nevidence: Foam.\nauthor: openai:m\nreviewed: 'off'\n",
    "neutral: A cup.\nevidence: Foam.\nauthor: openai:m\nreviewed: true\nidentity_terms: [X]\n",
])
def test_the_light_reading_a_report_compares_agrees_with_the_caption_and_the_prompt(cws, text):
    """The report reads captions without pydantic (cfkit.caption_digests); what it reads must be what the
    caption's own model and the rendered prompts say: the same draft status, and digests that change exactly
    when a condition's visual text does."""
    from cfkit.caption_digests import caption_now, condition_digests
    from cfkit.captions import load_caption
    from cfkit.probe.plan import unreviewed_draft
    from cfkit.prompts import load_templates, visual_slot

    ws = load_workspace(cws)
    path = cws / "captions" / "T001.yaml"
    path.write_text(text)
    caption, now = load_caption(ws, "T001"), caption_now(path)
    assert now.unreviewed_draft == unreviewed_draft(caption)
    assert now.digests == condition_digests(caption.neutral, caption.evidence)
    templates = load_templates(ws)
    for condition in ("neutral", "evidence"):
        other = caption.model_copy(update={"evidence": "Tea."})
        shown_differs = visual_slot(templates, condition, caption=caption, n_images=1) != \
            visual_slot(templates, condition, caption=other, n_images=1)
        assert (condition_digests(other.neutral, other.evidence)[condition] != now.digests[condition]) == shown_differs
    path.write_text("neutral: [unclosed\n")
    assert caption_now(path).digests is None and "cannot be read" in caption_now(path).problem
    path.unlink()
    assert caption_now(path).problem == "does not exist now"
