"""The audit workspace each test module of the audit starts from: two models' runs, built once per module."""

from __future__ import annotations

import shutil

import pytest

from cfkit.audit.plan import plan_audit
from cfkit.store import Store
from cfkit.workspace import load_workspace
from support import audit_workspace as aw


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    root = aw.build(tmp_path_factory.mktemp("audit") / "ws")
    return root, aw.run_models(root)


@pytest.fixture
def audited(source, tmp_path):
    """A private copy of the module's workspace with an audit planned over both runs: (workspace, run ids)."""
    root, run_ids = source
    shutil.copytree(root, tmp_path / "ws")
    ws = load_workspace(tmp_path / "ws")
    with Store(ws.db_path) as store:
        plan_audit(ws, store, list(run_ids.values()))
    return ws, run_ids
