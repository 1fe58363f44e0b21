"""Case subsets: the one reader every command uses."""

from __future__ import annotations

from pathlib import Path

import pytest

from caption_workspace import make_caption_ws
from cfkit.errors import InputError
from cfkit.lint import lint_captions
from cfkit.workspace import load_workspace


@pytest.fixture
def cws(tmp_path: Path) -> Path:
    return make_caption_ws(tmp_path / "cws")



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
