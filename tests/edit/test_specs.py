import json
from pathlib import Path

import pytest

from support.workspace import run_cli, tree_snapshot


def test_specs_list_shows_coverage_and_authored_count(tiny_ws: Path):
    result = run_cli(["specs", "list", "-w", str(tiny_ws)])
    assert result.exit_code == 0, result.output
    assert "TX01" in result.stdout
    assert "0 of 3 authored; not in this workspace: CF01–CF03; also here: TX01" in result.stdout
    data = json.loads(run_cli(["specs", "list", "--json", "-w", str(tiny_ws)]).stdout)
    assert data["specs"][0]["coverage"] == 6.25  # a quarter of each side → 1/16 of the image
    # One unit in every --json output: percent of the image.
    assert json.loads(run_cli(["specs", "validate", "--json", "-w", str(tiny_ws)]).stdout)[0]["coverage"] == 6.25
    shown = json.loads(run_cli(["specs", "show", "TX01", "--json", "-w", str(tiny_ws)]).stdout)
    assert shown["mask_coverage"] == 6.25
    assert all(set(o) == {"id", "text"} for o in shown["case"]["options"]) and shown["case"]["options"]
    assert json.loads(run_cli(["edit", "TX01", "--engine", "classical", "--dry-run", "--json",
                               "-w", str(tiny_ws)]).stdout)["mask_coverage"] == 6.25
    assert "0 of 3 authored; not in this workspace: CF01–CF03; also here: TX01" in result.stdout


def test_specs_validate_ok(tiny_ws: Path):
    result = run_cli(["specs", "validate", "-w", str(tiny_ws)])
    assert result.exit_code == 0, result.output
    assert "1 of 1 spec valid" in result.stdout


def test_specs_new_refuses_to_overwrite(tiny_ws: Path):
    args = ["specs", "new", "-w", str(tiny_ws), "--id", "TX01", "--case", "T001", "--title", "t",
            "--cue", "c", "--replacement", "r"]
    before = tree_snapshot(tiny_ws)
    result = run_cli(args)
    assert result.exit_code == 2
    assert "already exists" in result.stderr
    assert tree_snapshot(tiny_ws) == before


def test_specs_new_writes_a_valid_spec(tiny_ws: Path):
    result = run_cli(["specs", "new", "-w", str(tiny_ws), "--id", "CF02", "--case", "T001", "--title", "Swap",
                      "--cue", "a red hat", "--replacement", "a blue hat"])
    assert result.exit_code == 0, result.output
    text = (tiny_ws / "interventions" / "CF02.yaml").read_text()
    assert "mask: masks/CF02.png" in text
    result = run_cli(["specs", "validate", "CF02", "-w", str(tiny_ws)])
    assert result.exit_code == 2
    assert "masks/CF02.png is missing" in result.stderr


# ── validation at scale ────────────────────────────────────────────────────


def _findings(ws: Path, spec_id: str) -> list[dict]:
    [report] = json.loads(run_cli(["specs", "validate", spec_id, "--json", "-w", str(ws)]).stdout)
    return report["findings"]


def test_a_mask_over_a_quarter_of_the_image_is_a_warning(tiny_ws: Path):
    import numpy as np
    from PIL import Image

    from cfkit.masks import LOCAL_MASK_MAX

    mask = np.zeros((64, 96), np.uint8)
    mask[:40, :] = 255  # 62.5 %
    Image.fromarray(mask).save(tiny_ws / "interventions" / "masks" / "TX01.png")
    result = run_cli(["specs", "validate", "TX01", "-w", str(tiny_ws)])
    assert result.exit_code == 0  # a warning, not an error
    [warning] = [f for f in _findings(tiny_ws, "TX01") if f["level"] == "warning"]
    assert "62.5%" in warning["message"] and f"{100 * LOCAL_MASK_MAX:.0f}%" in warning["message"]
    assert "local" in warning["message"]


def test_a_mask_at_another_size_is_a_warning(tiny_ws: Path):
    import numpy as np
    from PIL import Image

    mask = np.zeros((32, 48), np.uint8)  # half the image's size, same aspect ratio
    mask[8:16, 12:24] = 255
    Image.fromarray(mask).save(tiny_ws / "interventions" / "masks" / "TX01.png")
    [warning] = [f for f in _findings(tiny_ws, "TX01") if f["level"] == "warning"]
    assert "48x32" in warning["message"] and "96x64" in warning["message"] and "redraw" in warning["message"]


def _mask_files() -> dict[str, "object"]:
    """TX01's box (a quarter of each side) saved in the formats people export masks in, as PIL images."""
    import numpy as np
    from PIL import Image

    box = np.zeros((64, 96), bool)
    box[16:32, 24:48] = True
    white = np.where(box, 255, 0).astype(np.uint8)
    openai_own = np.full((64, 96, 4), 255, np.uint8)  # cfkit's OpenAI editor: white, transparent where edit
    openai_own[..., 3] = np.where(box, 0, 255)
    openai_black = np.zeros((64, 96, 4), np.uint8)  # black sheet with the edit cut out
    openai_black[..., 3] = np.where(box, 0, 255)
    opaque = np.stack([white, white, white, np.full_like(white, 255)], axis=-1)
    palette = Image.new("P", (96, 64))
    palette.putpalette([0, 0, 0, 255, 255, 255] + [0] * 762)
    palette.putdata(box.astype(np.uint8).ravel().tolist())
    return {"grey": Image.fromarray(white), "one-bit": Image.fromarray(white).convert("1"),
            "16-bit": Image.fromarray(white.astype(np.uint16) * 257), "palette": palette,
            "opaque RGBA": Image.fromarray(opaque, "RGBA"), "OpenAI white": Image.fromarray(openai_own, "RGBA"),
            "OpenAI black": Image.fromarray(openai_black, "RGBA")}


def test_every_mask_format_reads_as_the_same_edit_region(tiny_ws: Path):
    for name, image in _mask_files().items():
        image.save(tiny_ws / "interventions" / "masks" / "TX01.png")
        result = run_cli(["specs", "validate", "TX01", "--json", "-w", str(tiny_ws)])
        assert result.exit_code == 0, (name, result.output)
        assert json.loads(result.stdout)[0]["coverage"] == 6.25, name


def test_white_on_transparent_masks_are_refused_not_read_inverted(tiny_ws: Path):
    """White drawn on a transparent layer reads as white = edit and as transparent = edit (OpenAI's):
    cfkit refuses to guess, in every format that carries transparency, and edits nothing."""
    import numpy as np
    from PIL import Image

    box = np.zeros((64, 96), bool)
    box[16:32, 24:48] = True
    white = np.where(box, 255, 0).astype(np.uint8)
    palette = Image.new("P", (96, 64))
    palette.putpalette([0, 0, 0, 255, 255, 255] + [0] * 762)
    palette.putdata(box.astype(np.uint8).ravel().tolist())
    drawings = {"RGBA": Image.fromarray(np.stack([white] * 4, axis=-1), "RGBA"),
                "LA": Image.fromarray(np.stack([white, white], axis=-1), "LA"),
                "palette": (palette, {"transparency": 0})}
    for name, drawing in drawings.items():
        image, extra = drawing if isinstance(drawing, tuple) else (drawing, {})
        image.save(tiny_ws / "interventions" / "masks" / "TX01.png", **extra)
        validated = run_cli(["specs", "validate", "TX01", "-w", str(tiny_ws)])
        assert validated.exit_code == 2, name
        assert "reads two opposite ways" in validated.stderr and "Save it without transparency" in validated.stderr
        before = tree_snapshot(tiny_ws)
        edited = run_cli(["edit", "TX01", "--engine", "classical", "-w", str(tiny_ws)])
        assert edited.exit_code == 2, (name, edited.output)
        assert "reads two opposite ways" in edited.stderr and "Traceback" not in edited.stderr
        assert tree_snapshot(tiny_ws) == before, name


def test_a_mask_painted_only_in_dark_grey_says_so_rather_than_empty(tiny_ws: Path):
    import numpy as np
    from PIL import Image

    mask = np.zeros((64, 96), np.uint8)
    mask[16:32, 24:48] = 100  # a 40 % brush: under the edit level
    Image.fromarray(mask).save(tiny_ws / "interventions" / "masks" / "TX01.png")
    for args in (["specs", "validate", "TX01"], ["edit", "TX01", "--engine", "classical"]):
        result = run_cli(args + ["-w", str(tiny_ws)])
        assert result.exit_code == 2, result.output
        assert "384 grey pixels (at most 100 of 255) and none above 127" in result.stderr, result.stderr
        assert "no white pixels" not in result.stderr
    Image.fromarray(np.zeros((64, 96), np.uint8)).save(tiny_ws / "interventions" / "masks" / "TX01.png")
    assert "no white pixels" in run_cli(["specs", "validate", "TX01", "-w", str(tiny_ws)]).stderr


def test_specs_new_checks_the_case_and_its_gold(tiny_ws: Path):
    before = tree_snapshot(tiny_ws)
    base = ["specs", "new", "-w", str(tiny_ws), "--id", "CF05", "--title", "t", "--cue", "c", "--replacement", "r"]
    missing = run_cli(base + ["--case", "NOPE"])
    assert missing.exit_code == 2 and "case 'NOPE' is not in" in missing.stderr
    answered_yes = run_cli(base + ["--case", "T002"])  # T002's gold is Yes
    assert answered_yes.exit_code == 2 and "gold answer is 'Yes' but labels.original is 'No'" in answered_yes.stderr
    three_options = run_cli(base + ["--case", "T003"])
    assert three_options.exit_code == 2 and "not a Yes/No case" in three_options.stderr
    assert tree_snapshot(tiny_ws) == before
    incomplete = run_cli(["specs", "new", "-w", str(tiny_ws), "--id", "CF05", "--case", "T001"])
    assert incomplete.exit_code == 2 and "--title, --cue, --replacement" in incomplete.stderr


SPECS_YAML = """\
- id: CF05
  case: T001
  title: Red to green
  cue: a red block
  replacement: a green block
  preserve: [background, framing]
- id: CF06
  case: T001
  title: Boxed
  cue: a corner
  replacement: another corner
  prompt: Change only the corner.
  regions: [{box: [0.5, 0.5, 0.75, 0.75]}]
  checks: {ssim_out_min: 0.8}
"""

SPECS_CSV = """\
id,case,title,cue,replacement,preserve,labels.original,labels.edit,checks.lpips_out_max,engines.classical.op
CF07,T001,Winter to summer,"snow, on the roofs",green foliage,roofs;sky,No,Yes,0.2,remove
CF08,T001,Night to day,a dark sky,a bright sky,,,,,
"""


def test_specs_new_from_a_yaml_list_and_a_csv(tiny_ws: Path, tmp_path: Path):
    from cfkit.specs import load_spec
    from cfkit.workspace import load_workspace

    listed = tmp_path / "pairs.yaml"
    listed.write_text(SPECS_YAML)
    result = run_cli(["specs", "new", "--from", str(listed), "-w", str(tiny_ws)])
    assert result.exit_code == 0, result.stderr
    ws = load_workspace(tiny_ws)
    cf05, cf06 = load_spec(ws, "CF05").spec, load_spec(ws, "CF06").spec
    assert cf05.mask == "masks/CF05.png" and cf05.preserve == ["background", "framing"]
    assert cf05.prompt.startswith("Replace a red block with a green block.")
    assert cf06.mask is None and cf06.regions and cf06.checks.ssim_out_min == 0.8

    table = tmp_path / "pairs.csv"
    table.write_text(SPECS_CSV)
    result = run_cli(["specs", "new", "--from", str(table), "-w", str(tiny_ws)])
    assert result.exit_code == 0, result.stderr
    cf07 = load_spec(ws, "CF07").spec
    assert cf07.cue == "snow, on the roofs" and cf07.preserve == ["roofs", "sky"]
    assert cf07.checks.lpips_out_max == 0.2 and cf07.engines == {"classical": {"op": "remove"}}
    assert load_spec(ws, "CF08").spec.labels.original == "No"
    assert "CF05" in run_cli(["specs", "list", "-w", str(tiny_ws)]).stdout


def test_specs_new_says_the_next_step_that_applies(tiny_ws: Path, tmp_path: Path):
    """Specs that give regions (or name a mask already drawn) need no mask file: the last line does not ask for one."""
    regions = tmp_path / "regions.yaml"
    regions.write_text("".join(f"- id: {i}\n  case: T001\n  title: t\n  cue: c\n  replacement: r\n"
                               "  regions: [{box: [0.1, 0.1, 0.5, 0.5]}]\n" for i in ("CF10", "CF11"))
                       + "- id: CF12\n  case: T001\n  title: t\n  cue: c\n  replacement: r\n"
                         "  mask: masks/TX01.png\n")
    done = run_cli(["specs", "new", "--from", str(regions), "-w", str(tiny_ws)])
    assert done.exit_code == 0, done.stderr
    # Before: "Next: draw the masks (white = edit) …", for specs that have no mask file to draw.
    assert done.stdout.strip().splitlines()[-1] == (
        "Next: no mask to draw (the specs give regions or their masks are there): run 'cfkit specs validate', "
        "then 'cfkit edit CF10 CF11 CF12'.")
    assert run_cli(["specs", "validate", "-w", str(tiny_ws)]).exit_code == 0
    # Of several, the line names only the specs whose mask is still to draw.
    listed = tmp_path / "pairs.yaml"
    listed.write_text(SPECS_YAML)
    mixed = run_cli(["specs", "new", "--from", str(listed), "-w", str(tiny_ws)])
    assert mixed.exit_code == 0, mixed.stderr
    assert mixed.stdout.strip().splitlines()[-1] == (
        "Next: draw the mask of CF05 (white = edit) or derive it from edited images made elsewhere "
        "('cfkit edits import DIR --derive-masks'), then 'cfkit specs validate'.")
    one = run_cli(["specs", "new", "--id", "CF13", "--case", "T001", "--title", "t", "--cue", "c",
                   "--replacement", "r", "-w", str(tiny_ws)])
    assert one.stdout.strip().splitlines()[-1].startswith("Next: draw the mask (white = edit)")
    assert one.stdout.strip().endswith("then 'cfkit specs validate CF13'.")


def test_specs_new_from_a_file_writes_nothing_unless_every_spec_is_valid(tiny_ws: Path, tmp_path: Path):
    bad = tmp_path / "pairs.yaml"
    bad.write_text(SPECS_YAML + "- id: CF09\n  case: T002\n  title: t\n  cue: c\n  replacement: r\n"
                   "- id: CF05\n  case: T001\n  title: again\n  cue: c\n  replacement: r\n  colour: red\n")
    before = tree_snapshot(tiny_ws)
    result = run_cli(["specs", "new", "--from", str(bad), "-w", str(tiny_ws)])
    assert result.exit_code == 2
    assert "nothing was written" in result.stderr
    assert "unknown field 'colour'" in result.stderr and "CF09" in result.stderr and "gold answer is 'Yes'" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert tree_snapshot(tiny_ws) == before


def test_specs_new_from_a_file_refuses_existing_specs_unless_forced(tiny_ws: Path, tmp_path: Path):
    listed = tmp_path / "pairs.yaml"
    listed.write_text("- id: TX01\n  case: T001\n  title: Replaced\n  cue: c\n  replacement: r\n")
    before = tree_snapshot(tiny_ws)
    refused = run_cli(["specs", "new", "--from", str(listed), "-w", str(tiny_ws)])
    assert refused.exit_code == 2 and "TX01.yaml already exists" in refused.stderr and "--force" in refused.stderr
    assert tree_snapshot(tiny_ws) == before
    forced = run_cli(["specs", "new", "--from", str(listed), "--force", "-w", str(tiny_ws)])
    assert forced.exit_code == 0 and "(replaced)" in forced.stdout
    assert "title: Replaced" in (tiny_ws / "interventions" / "TX01.yaml").read_text()
    mixed = run_cli(["specs", "new", "--from", str(listed), "--id", "X", "-w", str(tiny_ws)])
    assert mixed.exit_code == 2 and "leave out --id" in mixed.stderr


def test_specs_list_marks_a_spec_whose_case_is_not_in_the_cases_file(tiny_ws: Path):
    spec = tiny_ws / "interventions" / "TX01.yaml"
    spec.write_text(spec.read_text().replace("case: T001", "case: T999"))
    listed = run_cli(["specs", "list", "-w", str(tiny_ws)], env={"COLUMNS": "200"})
    # A listing is done even when a spec is broken (exit 0, as for an invalid spec file); the row and a warning
    # on stderr say which spec and case, and how to mend it. 'specs validate' is the check that refuses.
    assert listed.exit_code == 0, listed.output
    assert "T999 (no such case)" in listed.stdout
    said = " ".join(listed.stderr.split())
    assert said.startswith("warning: 1 spec names a case that is not in ")
    assert "cases.jsonl: TX01 (case T999). Fix the spec's 'case' field or add the case" in said
    data = json.loads(run_cli(["specs", "list", "--json", "-w", str(tiny_ws)]).stdout)
    assert data["case_missing"] == ["TX01"] and data["specs"][0]["case_missing"] is True
    assert data["cases_file"].endswith("cases.jsonl")
    validated = run_cli(["specs", "validate", "-w", str(tiny_ws)])
    assert validated.exit_code == 2 and "'T999' is not in" in validated.stderr
    # Mended, nothing is marked or said.
    spec.write_text(spec.read_text().replace("case: T999", "case: T001"))
    clean = run_cli(["specs", "list", "-w", str(tiny_ws)], env={"COLUMNS": "200"})
    assert clean.exit_code == 0 and "no such case" not in clean.stdout and clean.stderr == ""
    assert json.loads(run_cli(["specs", "list", "--json", "-w", str(tiny_ws)]).stdout)["case_missing"] == []


@pytest.mark.parametrize("case, mark", [
    ("T002", "gold is 'Yes', not 'No'"),  # T002's gold is the Yes option; TX01's labels.original is No
    ("T003", "not a Yes/No case"),  # three options, no yes_option
    ("T999", "no such case"),
])
def test_specs_list_marks_every_case_specs_validate_refuses_in_its_words(tiny_ws: Path, case: str, mark: str):
    spec = tiny_ws / "interventions" / "TX01.yaml"
    spec.write_text(spec.read_text().replace("case: T001", f"case: {case}"))
    validated = run_cli(["specs", "validate", "-w", str(tiny_ws)])
    assert validated.exit_code == 2 and mark in " ".join(validated.stderr.split()), validated.stderr

    listed = run_cli(["specs", "list", "-w", str(tiny_ws)], env={"COLUMNS": "200"})

    assert listed.exit_code == 0, listed.output  # a listing is done; 'specs validate' is the check that refuses
    assert f"{case} ({mark})" in listed.stdout
    said = " ".join(listed.stderr.split())
    missing = case == "T999"  # its own line names the cases file (the test above)
    assert said.startswith("warning: 1 spec") and f"TX01 (case {case}" in said, said
    assert missing or f"(case {case}: {mark})" in said, said
    data = json.loads(run_cli(["specs", "list", "--json", "-w", str(tiny_ws)]).stdout)
    assert data["specs"][0]["case_unfit"] == mark
    assert data["case_missing"] == (["TX01"] if missing else []) and data["case_unfit"] == ([] if missing else ["TX01"])


def test_specs_list_says_when_it_could_not_check_the_cases(tiny_ws: Path):
    (tiny_ws / "data" / "cases.jsonl").unlink()
    listed = run_cli(["specs", "list", "-w", str(tiny_ws)])
    assert listed.exit_code == 0, listed.output
    assert "cases.jsonl is missing, so the specs' cases were not checked" in " ".join(listed.stderr.split())
    assert json.loads(run_cli(["specs", "list", "--json", "-w", str(tiny_ws)]).stdout)["cases_file"] is None
