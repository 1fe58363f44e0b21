"""The offline demo runs end to end on a copy of examples/mini."""

from __future__ import annotations

from pathlib import Path

from support.store_sql import integrity_ok, table_rows
from support.workspace import MINI, run_cli, tree_snapshot


def test_demo_runs_offline_and_prints_the_tables(tmp_path: Path):
    before = tree_snapshot(MINI)
    out = tmp_path / "demo"
    result = run_cli(["demo", "--output", str(out)])
    assert result.exit_code == 0, result.output
    for title in ("Counterfactual pairs", "Modality conditions", "Modality changes", "ContextCanvas"):
        assert title in result.stdout
    for step in ("validate specs", "edit + check", "lint captions", "probe runs", "report + sheet"):
        assert step in result.stderr
    assert "cfkit probe run --model openai:gpt-5.5" in result.stdout
    sheets = list((out / ".cfkit" / "sheets").glob("*.html"))
    assert len(sheets) == 1 and sheets[0].with_suffix(".png").is_file()
    assert integrity_ok(out)
    edits = sum(r == {"status": "ok", "engine": "classical"} for r in table_rows(out, "edits", "status, engine"))
    runs = sum(r["status"] == "done" for r in table_rows(out, "runs", "status"))
    assert edits == 3 and runs == 12
    assert tree_snapshot(MINI) == before  # the example itself is never written to


def test_demo_refuses_a_non_empty_out(tmp_path: Path):
    (tmp_path / "keep.txt").write_text("mine")
    result = run_cli(["demo", "--output", str(tmp_path)])
    assert result.exit_code == 2
    assert "is not empty" in result.stderr
    assert (tmp_path / "keep.txt").read_text() == "mine"
