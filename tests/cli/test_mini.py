"""examples/mini and the five documented pairs in the repository's interventions/.

The mini workspace is what a newcomer runs first, offline; the documented pairs
are what the paper describes. These tests hold both to the record formats and
to what the commands report about them.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import yaml
from PIL import Image

from support.workspace import MINI, REPO, run_cli, tree_snapshot

DOCUMENTED = {"CF01": "HB208", "CF18": "HB084", "CF20": "HB163", "CF28": "E108", "CF35": "HB075"}
MINI_SPECS = {"EX01": ("MX01", "recolor"), "EX02": ("MX02", "recolor"), "EX03": ("MX03", "remove")}


def _mini(path: Path):
    from cfkit.dataset import load_cases
    from cfkit.workspace import load_workspace

    ws = load_workspace(path)
    return ws, load_cases(ws.cases_path, ws.image_root)


def _mask(path: Path) -> np.ndarray:
    return np.asarray(Image.open(path).convert("L")) > 127


# ── the mini workspace ─────────────────────────────────────────────────────


def test_mini_specs_validate_reports_every_spec_valid(mini_ws: Path):
    before = tree_snapshot(mini_ws)
    result = run_cli(["specs", "validate", "-w", str(mini_ws)])
    assert result.exit_code == 0, result.output
    assert "3 of 3 specs valid." in result.stdout
    for spec_id in MINI_SPECS:
        assert f"{spec_id}: ok (mask " in result.stdout
    assert "error" not in result.stderr and "warning" not in result.stderr
    reports = json.loads(run_cli(["specs", "validate", "--json", "-w", str(mini_ws)]).stdout)
    assert sorted(r["spec"] for r in reports) == sorted(MINI_SPECS)
    for report in reports:
        assert report["ok"] and report["findings"] == []
        # A decisive cue is a small part of the picture, never nothing and never most of it.
        assert 0.2 < report["coverage"] < 10, report  # percent of the image, as in every --json output
    assert tree_snapshot(mini_ws) == before


def test_mini_specs_list_shows_specs_with_measured_coverage(mini_ws: Path):
    result = run_cli(["specs", "list", "-w", str(mini_ws)])
    assert result.exit_code == 0, result.output
    for spec_id, (case_id, _) in MINI_SPECS.items():
        assert spec_id in result.stdout and case_id in result.stdout
    assert "3 of 3 authored" in result.stdout
    data = json.loads(run_cli(["specs", "list", "--json", "-w", str(mini_ws)]).stdout)
    rows = {row["id"]: row for row in data["specs"]}
    assert set(rows) == set(MINI_SPECS)
    for spec_id, (case_id, _) in MINI_SPECS.items():
        assert rows[spec_id]["case"] == case_id and rows[spec_id]["problem"] is None
        # Coverage as counted directly from the mask file's white pixels.
        mask = _mask(mini_ws / "interventions" / "masks" / f"{spec_id}.png")
        assert rows[spec_id]["coverage"] == pytest.approx(100 * mask.mean(), abs=0.006)


def test_mini_specs_show_gives_question_and_gold(mini_ws: Path):
    result = run_cli(["specs", "show", "EX01", "-w", str(mini_ws)])
    assert result.exit_code == 0, result.output
    assert "matcha" in result.stdout
    assert "B. No  ← gold" in result.stdout


def test_mini_cases_follow_the_contract():
    ws, cases = _mini(MINI)
    assert len(cases) >= 6
    assert ws.pairs == len(MINI_SPECS)
    three_option = [c for c in cases if len(c.options) == 3]
    assert three_option and all(c.yes_option is None for c in three_option)
    assert any(len(c.images) == 2 for c in cases)
    two_option = [c for c in cases if len(c.options) == 2]
    for case in two_option:
        assert [(o.id, o.text) for o in case.options] == [("A", "Yes"), ("B", "No")], case.id
        assert case.yes_option == "A", case.id
    assert {c.gold for c in two_option} == {"A", "B"}, "gold should vary between Yes and No"
    for case in cases:
        prov = case.provenance
        assert prov is not None, case.id
        for field in ("title", "creator", "provider", "url", "license"):
            assert getattr(prov, field), f"{case.id}: provenance.{field} is empty"
        assert any(word in prov.license.lower() for word in ("cc0", "public domain", "no known copyright")), case.id


def test_every_mini_image_opens_and_is_small():
    from cfkit.images import open_image

    _, cases = _mini(MINI)
    seen = 0
    for case in cases:
        for path in cases.image_paths(case):
            image = open_image(path, what=f"case {case.id} image")
            assert image.mode == "RGB"
            assert max(image.size) <= 512, (path, image.size)
            seen += 1
    assert seen == sum(len(c.images) for c in cases)
    total = sum(p.stat().st_size for p in MINI.rglob("*") if p.is_file())
    assert total < 1_500_000, f"examples/mini is {total:,} bytes"


def test_mini_specs_flip_a_no_case_with_an_offline_operation():
    from cfkit.specs import load_spec

    ws, cases = _mini(MINI)
    ops = set()
    for spec_id, (case_id, op) in MINI_SPECS.items():
        spec = load_spec(ws, spec_id).spec
        case = cases.get(spec.case)
        assert spec.case == case_id
        assert case.gold == case.option_for_label("No") and spec.labels.edit == "Yes"
        assert spec.engines["classical"]["op"] == op
        ops.add(op)
        with Image.open(cases.image_paths(case)[0]) as image, Image.open(ws.interventions_dir / spec.mask) as mask:
            assert mask.size == image.size, spec_id  # exact size: no rescaling note
    assert ops == {"recolor", "remove"}


def test_every_mini_case_has_a_reviewed_human_caption():
    _, cases = _mini(MINI)
    for case in cases:
        data = yaml.safe_load((MINI / "captions" / f"{case.id}.yaml").read_text(encoding="utf-8"))
        assert data["neutral"].strip() and data["evidence"].strip(), case.id
        assert data["author"] == "human" and data["reviewed"] is True, case.id


def test_mini_captions_pass_the_leakage_lint():
    from cfkit.lint import lint_captions
    from cfkit.workspace import load_workspace

    report = lint_captions(load_workspace(MINI), all_cases=True)
    assert report.files == len(_mini(MINI)[1])
    assert report.ok, [f.describe() for f in report.findings]
    assert report.findings == []


def test_mini_modality_subset_lists_known_cases():
    ws, cases = _mini(MINI)
    path = ws.probes_dir / ws.config.probe.modality_subset
    ids = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert ids and len(ids) == len(set(ids))
    assert all(case_id in cases for case_id in ids)
    assert len(ids) < len(cases)


def test_make_images_redraws_the_committed_masks_and_images(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    spec = importlib.util.spec_from_file_location("mini_make_images", MINI / "make_images.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    written = module.build(tmp_path, force=False)
    assert {p.relative_to(tmp_path).as_posix() for p in written} == {
        p.relative_to(MINI).as_posix() for p in [*(MINI / "images").glob("*"), *(MINI / "interventions/masks").glob("*")]
    }
    for path in written:
        committed = MINI / path.relative_to(tmp_path)
        if path.suffix == ".png":
            assert np.array_equal(_mask(path), _mask(committed)), committed
        else:
            # JPEG bytes may differ between libjpeg builds; the pixels must not.
            fresh = np.asarray(Image.open(path).convert("RGB"), dtype=np.float64)
            kept = np.asarray(Image.open(committed).convert("RGB"), dtype=np.float64)
            assert fresh.shape == kept.shape and np.abs(fresh - kept).mean() < 1.0, committed
    with pytest.raises(SystemExit, match="already exist"):
        module.build(tmp_path, force=False)


def test_classical_operations_change_the_cue_and_keep_the_rest():
    classical = pytest.importorskip("cfkit.editors.classical")
    from scipy.ndimage import label
    from skimage.color import rgb2lab

    from cfkit.specs import load_spec

    ws, cases = _mini(MINI)
    for spec_id, (case_id, op) in MINI_SPECS.items():
        spec = load_spec(ws, spec_id).spec
        image = np.asarray(Image.open(cases.image_paths(cases.get(case_id))[0]).convert("RGB"))
        mask = _mask(ws.interventions_dir / spec.mask)
        if op == "recolor":
            recipe = classical.ClassicalOptions(**spec.engines["classical"])
            target = classical.hex_to_rgb(recipe.color)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # skimage notes clipped out-of-gamut Lab values
                out = classical.recolor(image, mask, target, strength=recipe.strength, feather=recipe.feather)
            # Distance of the region's chroma (a*, b* in CIE Lab) from the target colour's.
            target_ab = rgb2lab(np.array([[target]], dtype=np.uint8))[0, 0, 1:]
            before = np.median(np.linalg.norm(rgb2lab(image)[mask][:, 1:] - target_ab, axis=1))
            after = np.median(np.linalg.norm(rgb2lab(out)[mask][:, 1:] - target_ab, axis=1))
            assert before > 25 and after < 0.25 * before, (spec_id, before, after)
        else:
            out = classical.remove(image, mask)
            gray_before, gray_after = image.mean(axis=-1), out.mean(axis=-1)
            stars, n = label(mask)
            assert n == 2
            for k in range(1, n + 1):
                # Each star's bright core is gone: where it peaked, the filled sky is at most half as bright.
                core = np.unravel_index(np.argmax(np.where(stars == k, gray_before, -1)), mask.shape)
                assert gray_before[core] > 200 and gray_after[core] < 0.5 * gray_before[core], (spec_id, k)
                # … and so are its spikes: the brightest tenth of the region is far dimmer.
                high_before = np.percentile(gray_before[stars == k], 90)
                high_after = np.percentile(gray_after[stars == k], 90)
                assert high_after < 0.5 * high_before, (spec_id, k, high_before, high_after)
        far = ~_dilate(mask, 6)
        assert np.array_equal(out[far], image[far]), f"{spec_id} changed pixels far from its mask"


def _dilate(mask: np.ndarray, pixels: int) -> np.ndarray:
    from scipy.ndimage import binary_dilation

    return binary_dilation(mask, iterations=pixels)


# ── the documented pairs ───────────────────────────────────────────────────


@pytest.mark.parametrize("spec_id", sorted(DOCUMENTED))
def test_documented_pair_parses_with_its_source_case(spec_id: str):
    from cfkit.specs import load_spec_file

    spec = load_spec_file(REPO / "interventions" / f"{spec_id}.yaml").spec
    assert spec.id == spec_id and spec.case == DOCUMENTED[spec_id]
    assert (spec.labels.original, spec.labels.edit) == ("No", "Yes")
    assert spec.mask == f"masks/{spec_id}.png" and spec.regions is None
    assert "keep" in spec.prompt.lower() or "leave" in spec.prompt.lower(), "the prompt names what stays unchanged"
    assert len(spec.preserve) >= 4 and "non-target content" in spec.preserve
    assert spec.source and "AesCanvas supplement" in spec.source
    assert spec.cue.strip() and spec.replacement.strip()


def test_cf01_records_that_its_case_is_inferred():
    from cfkit.specs import load_spec_file

    spec = load_spec_file(REPO / "interventions" / "CF01.yaml").spec
    assert spec.notes and "HB208" in spec.notes and "inferred" in spec.notes
    for element in ("hanfu", "tea set", "mooncake", "lantern"):
        assert element in spec.prompt.lower()


def _repo_workspace_copy(dest: Path) -> Path:
    """The repository's workspace (cfkit.toml and the five documented specs), without any user data."""
    (dest / "interventions").mkdir(parents=True)
    shutil.copy(REPO / "cfkit.toml", dest / "cfkit.toml")
    for spec_id in DOCUMENTED:
        shutil.copy(REPO / "interventions" / f"{spec_id}.yaml", dest / "interventions")
    return dest


def test_validate_at_repo_root_names_each_missing_mask(tmp_path: Path):
    root = _repo_workspace_copy(tmp_path / "repo")
    before = tree_snapshot(root)
    result = run_cli(["specs", "validate", "-w", str(root)])
    assert result.exit_code == 2
    assert "0 of 5 specs valid." in result.stdout
    for spec_id in DOCUMENTED:
        assert f"masks/{spec_id}.png is missing" in result.stderr
    assert "Traceback" not in result.output
    assert tree_snapshot(root) == before


def test_validate_in_the_checkout_itself_reports_missing_masks():
    """The same, run on the repository as cloned (skipped once a user has added data or masks)."""
    from cfkit.workspace import load_workspace

    ws = load_workspace(REPO)
    if ws.cases_path.exists() or any((ws.interventions_dir / "masks" / f"{i}.png").exists() for i in DOCUMENTED):
        pytest.skip("this checkout has ContextCanvas data or masks of its own")
    result = run_cli(["specs", "validate", *sorted(DOCUMENTED), "-w", str(REPO)])
    assert result.exit_code == 2
    for spec_id in DOCUMENTED:
        assert f"interventions/masks/{spec_id}.png is missing" in result.stderr


def test_pair_prefix_is_checked_and_drives_the_authored_count(mini_ws: Path):
    config = mini_ws / "cfkit.toml"
    text = config.read_text(encoding="utf-8")
    config.write_text(text.replace('pair_prefix = "EX"', 'pair_prefix = "CF"'), encoding="utf-8")
    result = run_cli(["specs", "list", "-w", str(mini_ws)])
    assert "0 of 3 authored; not in this workspace: CF01–CF03; also here: EX01–EX03" in result.stdout
    config.write_text(text.replace('pair_prefix = "EX"', 'pair_prefix = "1X"'), encoding="utf-8")
    result = run_cli(["specs", "list", "-w", str(mini_ws)])
    assert result.exit_code == 2
    assert "field 'workspace.pair_prefix'" in result.stderr and "Traceback" not in result.output
