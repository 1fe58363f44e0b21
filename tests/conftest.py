"""Shared fixtures (the helpers they build on live in tests/support/). Tests never touch the network or
download weights."""

from __future__ import annotations

import os

# Set before any test imports huggingface libraries.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.pop("OPENAI_API_KEY", None)
os.environ.pop("OPENAI_BASE_URL", None)
os.environ.pop("CFKIT_WORKSPACE", None)
os.environ.pop("CFKIT_LPIPS_BACKBONE", None)
# A developer's own weights (cfkit's cache, torch's hub) must not change what the tests see.
_ISOLATED = __import__("tempfile").mkdtemp(prefix="cfkit-tests-")
os.environ["CFKIT_WEIGHTS_DIR"] = os.path.join(_ISOLATED, "cfkit-weights")
os.environ["TORCH_HOME"] = os.path.join(_ISOLATED, "torch-home")

import shutil  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
from click.testing import CliRunner  # noqa: E402

from support.workspace import MINI, write_workspace  # noqa: E402


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def tiny_ws(tmp_path: Path) -> Path:
    """Path of a fresh tiny workspace (see :func:`write_workspace`)."""
    return write_workspace(tmp_path / "ws")


@pytest.fixture
def mini_ws(tmp_path: Path) -> Path:
    """A private copy of examples/mini."""
    if not (MINI / "cfkit.toml").is_file():
        pytest.skip("examples/mini is not in this checkout")
    dest = tmp_path / "mini"
    shutil.copytree(MINI, dest, ignore=shutil.ignore_patterns(".cfkit"))
    return dest

