"""Blinding holds across the whole command line while an audit is under way.

The rule: no command shows a model, a run, or another annotator's label or
note for an audit whose labelling is not complete, unless the person asks
with a flag that says it un-blinds (``--unblind``, ``--reveal``).

The test walks Click's command tree: every command whose module mentions the
audit must be listed in ``INVOCATIONS`` (a new one fails here until it is), and
each is run in every output format its options offer against an audit where
alice has labelled every item and bob only some, each with a traceable note.
"""

from __future__ import annotations

import inspect
import json
import shutil
from pathlib import Path

import click
import pytest

from support import audit_workspace as aw
from support.workspace import run_cli

ALICE_NOTE, BOB_NOTE = "alice-tracer-note", "bob-tracer-note"
BOB_LABELLED = 5

#: Command path -> the argument lists to run it with (ITEM: an item bob labelled; SHEET: alice's worksheet).
#: ``None``: not run, with the reason in EXEMPT.
INVOCATIONS: dict[str, list[list[str]] | None] = {
    "audit plan": None,
    "audit status": [[]],
    "audit annotate": [["--as", "alice"]],
    "audit items": [["--as", "alice"], ["--reveal"]],
    "audit label": [["ITEM", "--as", "alice", "--cue", "yes", "--link", "no", "--note", ALICE_NOTE]],
    "audit export": [["--as", "alice"]],
    "audit import": [["SHEET", "--as", "alice"]],
    "audit agreement": [[]],
    "audit adjudicate": [["--as", "carol"]],
    "audit resolve": [["ITEM", "--as", "carol", "--cue", "yes", "--link", "no", "--note", "n"],
                      ["ITEM", "--as", "carol", "--cue", "yes", "--link", "no", "--note", "n", "--force"]],
    "audit guideline": [[]],
    "audit prelabel": [["--judge", "baseline:always-yes"]],  # refused (cannot see images): says nothing of the items
    "report": [[], ["--ega"], ["--ega", "--units"], ["--ega", "--reference"]],
    "view": [["--export", "SITE"]],
}
EXEMPT = {"audit plan": "prints only the runs its caller names to plan a new audit"}
#: The flags that un-blind, and an invocation each that must then show what the others hide.
UNBLINDING = [("audit agreement", ["--unblind", "--json"], BOB_NOTE),
              ("audit items", ["--reveal", "--unblind", "--json"], "contextcanvas-"),
              ("report", ["--ega", "--unblind", "--format", "json"], "gpt"),
              ("report", ["--ega", "--unblind", "--format", "csv"], "gpt"),
              ("report", ["--ega", "--unblind"], "gpt")]


def _leaves(command: click.Command, path: str = "") -> dict[str, click.Command]:
    if isinstance(command, click.Group):
        ctx = click.Context(command)
        found = {}
        for name in command.list_commands(ctx):
            found.update(_leaves(command.get_command(ctx, name), f"{path} {name}".strip()))
        return found
    return {path: command}


def _format_variants(command: click.Command) -> list[list[str]]:
    """Every output format the command's options offer: --json on and off, each --format choice."""
    variants: list[list[str]] = [[]]
    for param in command.params:
        if param.name == "as_json":
            variants = [v + extra for v in variants for extra in ([], ["--json"])]
        elif param.name == "fmt" and isinstance(param.type, click.Choice):
            variants = [v + extra for v in variants for extra in [[]] + [["--format", c] for c in param.type.choices]]
    return variants


#: Flags whose name says they un-blind: the only ones allowed to.
UNBLINDING_FLAGS = {"--unblind", "--reveal"}


def _flag_variants(command: click.Command) -> list[list[str]]:
    """No extra flag, then each boolean flag of the command on its own (but those that say they un-blind):
    a flag like '--force' must not un-blind, whatever else it does."""
    flags = [[p.opts[0]] for p in command.params if isinstance(p, click.Option) and p.is_flag
             and p.name not in ("as_json", "debug") and p.opts[0] not in UNBLINDING_FLAGS]
    return [[]] + flags


def _mentions_audit(command: click.Command) -> bool:
    return "audit" in inspect.getsource(inspect.getmodule(command.callback)).lower()


def cli(ws: Path, *args: str):
    return run_cli(["-w", str(ws), *args])


@pytest.fixture(scope="module")
def audit_under_way(source, tmp_path_factory):
    """Alice has labelled every item, bob five: labelling is not complete."""
    root, run_ids = source
    ws = tmp_path_factory.mktemp("under-way") / "ws"
    shutil.copytree(root, ws)
    assert cli(ws, "audit", "plan", "--run", run_ids[aw.GPT], "--run", run_ids[aw.QWEN]).exit_code == 0
    rows = json.loads(cli(ws, "audit", "items", "--as", "alice", "--json").stdout)
    for n, row in enumerate(rows):
        assert cli(ws, "audit", "label", row["item"], "--as", "alice", "--cue", "yes", "--link", "yes",
                   "--note", ALICE_NOTE).exit_code == 0
        if n < BOB_LABELLED:  # bob disagrees on the link of each of his
            assert cli(ws, "audit", "label", row["item"], "--as", "bob", "--cue", "yes", "--link", "no",
                       "--note", BOB_NOTE).exit_code == 0
    sheet = ws / "alice.jsonl"
    sheet.write_text(cli(ws, "audit", "export", "--as", "alice").stdout)
    return ws, run_ids, [r["item"] for r in rows], {"ITEM": rows[0]["item"], "SHEET": str(sheet),
                                                    "SITE": str(ws.parent / "site")}


def _ega_rows(text: str) -> list[str]:
    """The audited models that a report's EGA section names, in any of its formats."""
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        return [r["model"] for r in data.get("ega", [])] + [p["model"] for p in data.get("ega_pending", [])]
    return [m for m in aw.MODELS if f"ega,{m}" in text or f"{m}: case " in text or any(
        line.lstrip("│| ").startswith(m) and ("Evidence-grounded" in text or "tableS8" in text)
        for line in text.split("Evidence-grounded", 1)[-1].splitlines()[1:])]


def _leaks(result, *, audit_view: bool, annotator: str | None, run_ids: dict[str, str], items: list[str]) -> list[str]:
    """What a command's output gives away. An audit view names no model or run at all; any other (the report,
    which names models in its own tables) names no audited item and shows no EGA row."""
    text = result.stdout + result.stderr
    lowered = text.lower()
    found = []
    if audit_view:
        found += [w for w in aw.FORBIDDEN if w in lowered] + [r for r in run_ids.values() if r.lower() in lowered]
    else:
        found += [f"item {i}" for i in items if i in text]
        found += [f"EGA row of {m}" for m in set(_ega_rows(result.stdout) + _ega_rows(result.stderr))]
    for name, note in (("alice", ALICE_NOTE), ("bob", BOB_NOTE)):
        if note in text and annotator != name:
            found.append(f"{name}'s note")
    return found


def test_every_command_that_reads_the_audit_is_in_the_table():
    from cfkit.cli import cli as root

    leaves = _leaves(root)
    missing = [path for path, command in leaves.items() if _mentions_audit(command) and path not in INVOCATIONS]
    assert not missing, f"commands that read the audit but are not checked for blinding: {missing}"
    assert set(INVOCATIONS) <= set(leaves)
    assert {path for path, runs in INVOCATIONS.items() if runs is None} == set(EXEMPT)


def test_no_command_or_format_names_a_model_run_or_other_label_while_labelling_is_under_way(audit_under_way):
    from cfkit.cli import cli as root

    ws, run_ids, items, values = audit_under_way
    leaves = _leaves(root)
    checked, leaks = 0, []
    for path, invocations in INVOCATIONS.items():
        for args in invocations or []:
            variants = [f + v for f in _flag_variants(leaves[path]) for v in _format_variants(leaves[path])]
            for variant in variants:
                argv = [*path.split(), *[values.get(a, a) for a in args], *variant]
                result = cli(ws, *argv)
                annotator = args[args.index("--as") + 1] if "--as" in args else None
                audit_view = path.startswith("audit")
                found = _leaks(result, audit_view=audit_view, annotator=annotator,
                               run_ids=run_ids, items=items)
                if found:
                    leaks.append((" ".join(argv), found))
                assert "Traceback" not in result.stderr, argv
                checked += 1
    assert not leaks, leaks
    assert checked >= 150  # every flag and format of every invocation ran (170 when written)


def test_the_refusals_say_how_to_follow_progress_and_how_to_un_blind(audit_under_way):
    ws, _, _, values = audit_under_way
    for argv in (["audit", "agreement"], ["report", "--ega"],
                 ["audit", "resolve", values["ITEM"], "--as", "carol", "--cue", "yes", "--link", "no", "--note", "n"]):
        result = cli(ws, *argv)
        assert result.exit_code == 1, argv
        assert "'cfkit audit status'" in result.stderr and "--unblind" in result.stderr, result.stderr


@pytest.mark.parametrize("path, args, shows", UNBLINDING)
def test_the_un_blinding_flags_show_what_is_otherwise_held_back(audit_under_way, path, args, shows):
    """The leak check above can see a leak: the same audit, un-blinded on purpose, shows it, and says so."""
    ws, run_ids, items, _ = audit_under_way
    result = cli(ws, *path.split(), *args)
    assert result.exit_code in (0, 1), result.stderr
    assert shows in (result.stdout + result.stderr).lower()
    assert _leaks(result, audit_view=path.startswith("audit"), annotator=None,
                  run_ids=run_ids, items=items)
    if "--unblind" in args and path != "audit items":  # --reveal says so itself
        assert "un-blinded" in result.stderr
    if path == "report":  # the EGA rows themselves are seen, in every format
        assert set(_ega_rows(result.stdout) + _ega_rows(result.stderr)) == set(aw.MODELS), result.stdout


def test_the_views_pages_hold_no_audit_item_and_its_audit_page_only_progress(audit_under_way, tmp_path):
    """cfkit view shows runs and replies (not blinded), but nothing of an audit under way beyond its progress."""
    ws, run_ids, items, _ = audit_under_way
    site = tmp_path / "site"
    assert cli(ws, "view", "--export", str(site)).exit_code == 0
    audit_page = (site / "audit.html").read_text().lower()
    assert "still being labelled" in audit_page
    assert not [w for w in aw.FORBIDDEN if w in audit_page] and not [r for r in run_ids.values() if r.lower() in audit_page]
    for page in site.iterdir():
        text = page.read_text(errors="replace")
        assert not [i for i in items if i in text], page.name
        assert ALICE_NOTE not in text and BOB_NOTE not in text, page.name
