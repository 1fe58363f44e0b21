"""The audit's commands driven as a user would: plan, blinded items, decisions typed at the prompt."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cfkit.store import Store, audits
from support import audit_workspace as aw
from support.workspace import run_cli


@pytest.fixture
def ws(source, tmp_path):
    root, run_ids = source
    shutil.copytree(root, tmp_path / "ws")
    return tmp_path / "ws", run_ids


def cli(ws: Path, *args: str, code: int | None = 0):
    result = run_cli(["-w", str(ws), *args])
    if code is not None:
        assert result.exit_code == code, (result.stdout, result.stderr)
    return result


def plan(ws: Path, run_ids: dict[str, str]) -> str:
    result = cli(ws, "audit", "plan", "--run", run_ids[aw.GPT], "--run", run_ids[aw.QWEN], "--json")
    data = json.loads(result.stdout)
    assert (data["items"], data["models"], data["cases"]) == (18, 2, 9)
    return data["audit"]


def blind(text: str, run_ids: dict[str, str]) -> bool:
    lowered = text.lower()
    return not any(w in lowered for w in aw.FORBIDDEN) and not any(r.lower() in lowered for r in run_ids.values())


#: What each annotator decides, by (model, case): (cue, link). They disagree on a few.
def decision(name: str, model: str, case: str) -> tuple[bool, bool]:
    cue = case not in ("AU04", "AU08")
    link = case not in ("AU06",) and not (model == aw.QWEN and case == "AU02")
    if name == "bob":
        if case == "AU01" and model == aw.GPT:
            cue = False
        if case in ("AU05", "AU07"):
            link = not link
        if case == "AU04" and model == aw.QWEN:
            cue = True
    return cue, link


def yn(flag: bool) -> str:
    return "yes" if flag else "no"


def _items(ws: Path) -> dict[str, tuple[str, str]]:
    """Item id -> (model, case), read from the store as only the test may."""
    with Store(ws / ".cfkit" / "cfkit.db") as store:
        return {i.id: (i.model, i.case_id) for i in audits.items(store, audits.find_plan(store).id)}
