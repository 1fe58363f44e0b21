"""``cfkit edit`` holds an edit's data once: each file decoded once, one store connection, checks from arrays."""

from __future__ import annotations

from pathlib import Path

import pytest

from cfkit.workspace import load_workspace
from support.counters import cases_reads, counted  # noqa: F401  (fixtures)


@pytest.mark.parametrize("spec_id", ["EX01", "EX03"])
def test_an_edit_decodes_each_file_once_and_opens_the_store_once(mini_ws, counted, spec_id):
    from cfkit.edit import make_edit

    decodes, opens = counted
    ws = load_workspace(mini_ws)
    make_edit(ws, spec_id, engine="classical")  # the store exists from now on
    decodes.clear()
    opens.clear()
    outcome = make_edit(ws, spec_id, engine="classical", again=True)
    [record] = outcome.records
    assert opens == [ws.db_path]
    assert decodes, "nothing was decoded: the counters see no image"
    assert all(n == 1 for n in decodes.values()), decodes
    written = {Path(p).name for p in (record.raw_path, record.composite_path)}
    assert not written & set(decodes), "an output just written was decoded again to check it"
    # The verdicts come from the checks just stored, one per output.
    assert {c.variant for c in outcome.checks[record.id]} == {"raw", "composite"}
    assert outcome.verdicts == {record.id: next(c.label for c in outcome.checks[record.id] if c.variant == "composite")}


def test_checking_the_arrays_stores_what_checking_the_files_measures(mini_ws):
    """The arrays cfkit edit checks are the pixels its PNG files hold: a check of the files agrees to the bit."""
    from cfkit.edit import make_edit
    from cfkit.edit_files import check_edit
    from cfkit.store import Store

    ws = load_workspace(mini_ws)
    for spec_id in ("EX01", "EX02", "EX03"):
        outcome = make_edit(ws, spec_id, engine="classical")
        [record] = outcome.records
        with Store(ws.db_path) as store:
            again = check_edit(ws, store, record.id)
        first = {c.variant: (c.metrics, c.verdict, c.reasons) for c in outcome.checks[record.id]}
        assert first == {c.variant: (c.metrics, c.verdict, c.reasons) for c in again}


def test_a_check_that_cannot_run_leaves_the_edit_saved(mini_ws, monkeypatch):
    """A check failing on its inputs is reported with the edit (exit 1 in the CLI), never loses the files."""
    from cfkit.edit import make_edit
    from cfkit.errors import SpecError

    def refuse(*args, **kwargs):
        raise SpecError("the mask plus its margin covers the whole image")

    monkeypatch.setattr("cfkit.edit.check_images", refuse)
    ws = load_workspace(mini_ws)
    outcome = make_edit(ws, "EX01", engine="classical")
    [record] = outcome.records
    assert outcome.checks == {} and isinstance(outcome.check_error, SpecError)
    assert (ws.store_dir / record.composite_path).is_file()
    assert outcome.check_failures() == {record.id: ["not checked (the mask plus its margin covers the whole image)"]}


def test_a_batch_reads_the_cases_and_opens_the_store_once_for_all_its_edits(mini_ws, counted, cases_reads):
    """``cfkit edit A B C`` shares one session: one store connection, one read of the cases file, and each
    spec's own files decoded once."""
    from cfkit.edit import make_edit
    from cfkit.edit_batch import make_edits

    decodes, opens = counted
    loads = cases_reads
    ws = load_workspace(mini_ws)
    make_edit(ws, "EX01", engine="classical")  # the store exists from now on (its accepts are read per spec)
    decodes.clear(), opens.clear(), loads.clear()
    batch = make_edits(ws, ["EX01", "EX02", "EX03"], engine="classical", again=True)
    assert [len(r.outcome.records) for r in batch.results] == [1, 1, 1], [r.error for r in batch.results]
    assert opens == [ws.db_path]
    assert loads == [ws.cases_path]
    assert len(decodes) == 6 and all(n == 1 for n in decodes.values()), decodes  # 3 sources and 3 masks


def test_a_dry_run_of_a_batch_reads_the_cases_once_and_opens_no_store(mini_ws, counted, cases_reads):
    from support.workspace import run_cli

    decodes, opens = counted
    result = run_cli(["edit", "--all", "--dry-run", "--engine", "classical", "-w", str(mini_ws)])
    assert result.exit_code == 0, result.stderr
    assert all(spec_id in result.stdout for spec_id in ("EX01", "EX02", "EX03"))
    assert cases_reads == [load_workspace(mini_ws).cases_path]
    assert opens == [] and not (mini_ws / ".cfkit" / "cfkit.db").exists()


@pytest.mark.parametrize("command", [["check", "--all"], ["sheet"]])
def test_commands_over_every_stored_edit_read_the_cases_once(mini_ws, cases_reads, command, tmp_path):
    """Reading stored edits back (check, the contact sheet) reads the cases file once, not once per edit."""
    from cfkit.edit_batch import make_edits
    from support.workspace import run_cli

    ws = load_workspace(mini_ws)
    make_edits(ws, ["EX01", "EX02", "EX03"], engine="classical")
    cases_reads.clear()
    extra = ["--output", str(tmp_path / "sheet.html")] if command == ["sheet"] else []
    result = run_cli([*command, *extra, "-w", str(mini_ws)])
    assert result.exit_code in (0, 1), result.stderr  # 1: an edit failed its check, which is not the point here
    shown = (tmp_path / "sheet.html").read_text(encoding="utf-8") if extra else result.stdout
    assert all(spec_id in shown for spec_id in ("EX01", "EX02", "EX03"))
    assert cases_reads == [ws.cases_path]
