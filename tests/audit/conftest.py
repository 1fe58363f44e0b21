"""The audit workspace each test module of the audit starts from: two models' runs, built once per module."""

from __future__ import annotations

import pytest

from support import audit_workspace as aw


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    root = aw.build(tmp_path_factory.mktemp("audit") / "ws")
    return root, aw.run_models(root)
