"""Foundation bad-input table: each bad input gets one clear line, exit 2, and changes no file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from support.workspace import run_cli, tree_snapshot

SPEC = "interventions/TX01.yaml"


def _replace(ws: Path, rel: str, old: str, new: str) -> None:
    path = ws / rel
    text = path.read_text()
    assert old in text, f"{old!r} not in {rel}"
    path.write_text(text.replace(old, new))


def _edit_cases(ws: Path, change) -> None:
    path = ws / "data" / "cases.jsonl"
    cases = [json.loads(line) for line in path.read_text().splitlines()]
    change(cases)
    path.write_text("".join(json.dumps(c) + "\n" for c in cases))


def _mask(ws: Path, array: np.ndarray) -> None:
    Image.fromarray(array).save(ws / "interventions" / "masks" / "TX01.png")


def malformed_yaml(ws):
    _replace(ws, SPEC, "title: Test edit", "title: [unclosed")


def unknown_field(ws):
    (ws / SPEC).write_text((ws / SPEC).read_text() + "colour_mood: warm\n")


def key_in_the_wrong_case(ws):
    _replace(ws, SPEC, "case:", "Case:")


def nested_key_misspelt(ws):
    _replace(ws, SPEC, "labels: {original:", "labels: {orignal:")


def unknown_case(ws):
    _replace(ws, SPEC, "case: T001", "case: T999")


def missing_image(ws):
    (ws / "data" / "images" / "T001.png").unlink()


def corrupt_image(ws):
    (ws / "data" / "images" / "T001.png").write_bytes(b"\x89PNG\r\n\x1a\n this is not a png body")


def mask_wrong_size(ws):
    _mask(ws, np.full((50, 50), 255, np.uint8))


def empty_mask(ws):
    _mask(ws, np.zeros((64, 96), np.uint8))


def full_mask(ws):
    _mask(ws, np.full((64, 96), 255, np.uint8))


def escaping_path(ws):
    _replace(ws, SPEC, "mask: masks/TX01.png", "mask: ../../secret.png")


def duplicate_case(ws):
    _edit_cases(ws, lambda cases: cases.append(dict(cases[0])))


def gold_not_an_option(ws):
    _edit_cases(ws, lambda cases: cases[0].update(gold="Z"))


def yes_option_on_three_options(ws):
    _edit_cases(ws, lambda cases: cases[2].update(yes_option="A"))


def label_disagrees_with_gold(ws):
    _replace(ws, SPEC, "labels: {original: 'No', edit: 'Yes'}", "labels: {original: 'Yes', edit: 'No'}")


def bad_region(ws):
    _replace(ws, SPEC, "mask: masks/TX01.png", "regions: [{box: [0.5, 0.2, 0.1, 0.9]}]")


def id_differs_from_file(ws):
    _replace(ws, SPEC, "id: TX01", "id: TX02")


def bad_config(ws):
    (ws / "cfkit.toml").write_text((ws / "cfkit.toml").read_text().replace("pairs = 3", "pairs = 0"))


def unknown_config_key(ws):
    (ws / "cfkit.toml").write_text((ws / "cfkit.toml").read_text().replace("[workspace]", "[workspace]\nstores = 'x'"))


CASES = [
    (malformed_yaml, "TX01.yaml:", "not valid YAML"),
    (unknown_field, "TX01.yaml:", "unknown field 'colour_mood'"),
    (key_in_the_wrong_case, "TX01.yaml:", "unknown field 'Case' (did you mean 'case'?); rename it."),
    (nested_key_misspelt, "TX01.yaml:", "unknown field 'labels.orignal' (did you mean 'original'?)"),
    (unknown_case, "TX01.yaml:", "'T999' is not in"),
    (missing_image, "T001.png", "not found"),
    (corrupt_image, "T001.png", "not a readable image"),
    (mask_wrong_size, "TX01.png", "is 50x50 but the image is 96x64"),
    (empty_mask, "TX01.yaml", "the mask is empty"),
    (full_mask, "TX01.yaml", "covers the whole image"),
    (escaping_path, "../../secret.png", "outside the workspace"),
    (duplicate_case, "cases.jsonl:4", "duplicate case id 'T001'"),
    (gold_not_an_option, "cases.jsonl:1", "gold 'Z' is not among the option ids"),
    (yes_option_on_three_options, "cases.jsonl:3", "yes_option is only for two-option cases"),
    (label_disagrees_with_gold, "labels.original", "gold is 'No'"),
    (bad_region, "regions.0", "needs x0 < x1"),
    (id_differs_from_file, "TX01.yaml", "make them agree"),
]


@pytest.mark.parametrize("break_it, where, what", CASES, ids=[c[0].__name__ for c in CASES])
def test_specs_validate_reports_bad_input(tiny_ws: Path, break_it, where: str, what: str):
    break_it(tiny_ws)
    before = tree_snapshot(tiny_ws)
    result = run_cli(["specs", "validate", "-w", str(tiny_ws)])
    assert result.exit_code == 2, result.output
    assert where in result.stderr and what in result.stderr, result.stderr
    assert "Traceback" not in result.output
    assert tree_snapshot(tiny_ws) == before


@pytest.mark.parametrize("break_it, what", [(bad_config, "greater than or equal to 1"),
                                            (unknown_config_key, "field 'workspace.stores'")])
def test_bad_config_is_one_line(tiny_ws: Path, break_it, what: str):
    break_it(tiny_ws)
    result = run_cli(["specs", "list", "-w", str(tiny_ws)])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "cfkit.toml" in lines[0] and what in lines[0], result.stderr


def test_debug_shows_the_traceback(tiny_ws: Path):
    unknown_case(tiny_ws)
    from click.testing import CliRunner

    from cfkit.cli import cli
    from cfkit.errors import SpecError

    result = CliRunner().invoke(cli, ["--debug", "specs", "show", "NOPE", "-w", str(tiny_ws)])
    assert isinstance(result.exception, SpecError)


def test_no_workspace_found(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = run_cli(["specs", "list"])
    assert result.exit_code == 2
    assert "No cfkit.toml in" in result.stderr and "cfkit init DIR" in result.stderr
