"""``cfkit edit`` and ``cfkit edits``: make counterfactual edits and read their provenance."""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from cfkit.cli import params
from cfkit.cli.console import err, out, print_json, warn, workspace_option
from cfkit.money import usd
from cfkit.plural import plural
from cfkit.store import edits as edits_table
from cfkit.errors import CfkitError, CheckFailed, NotFoundError, UsageError


def _rel(ws, path: Path | None) -> str:
    if path is None:
        return "—"
    try:
        return str(path.relative_to(ws.root))
    except ValueError:
        return str(path)


@click.command()
@click.argument("spec_ids", nargs=-1)
@click.option("--all", "all_specs", is_flag=True, help="Edit every spec (those with an accepted edit are kept).")
@click.option("--pending", is_flag=True, help="Edit every spec without a usable edit (none yet, or all rejected).")
@click.option("--shard", default=None, metavar="I/N",
              help="With --all, --pending or several ids: only the I-th of N disjoint parts (one process per GPU or "
                   "node: 1/N … N/N never make the same edit).")
@click.option("--engine", default=None, metavar="NAME",
              help="An engine ('cfkit edits engines' lists them) or auto. Default: cfkit.toml [edit] engine.")
@click.option("-o", "--option", "pairs", multiple=True, metavar="KEY=VALUE",
              help="An engine option (repeatable); with --engine auto write ENGINE.KEY=VALUE.")
@click.option("--model", default=None, help="The engine's model (sets -o model=…), e.g. gpt-image-2 or a diffusers folder.")
@click.option("-n", "--candidates", "n", type=params.positive(100), default=None,
              help="Candidates to make in this call (default: cfkit.toml [edit] candidates).")
@click.option("--seed", type=params.seed(), default=None, help="Seed for engines that take one (candidate i uses seed + i).")
@click.option("--input", "input_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="An edited image made elsewhere, for engines that import one (sets -o input=…).")
@click.option("--again", is_flag=True, help="Make more candidates even though an edit was accepted (it stays selected).")
@click.option("--dry-run", is_flag=True, help="Print what would be sent (prompt, sizes, mask coverage); call and write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@workspace_option
def edit(ws, spec_ids: tuple[str, ...], all_specs: bool, pending: bool, shard: str | None, engine: str | None,
         pairs: tuple[str, ...],
         model: str | None, n: int | None, seed: int | None, input_path: Path | None, again: bool, dry_run: bool,
         as_json: bool) -> None:
    """Make counterfactual edits of specs' source images, save them, record them, check them.

    Each candidate is saved twice at the source's size: the engine's raw output
    and a composite with the source's own pixels outside the (slightly dilated)
    mask. Provenance goes to the workspace store; the API key never does.
    Several specs run in one process, each on its own progress line, with a
    summary at the end; a spec that fails does not stop the others (exit 1).
    A refused key or an account without credit stops the batch (exit 2), as
    Ctrl-C (130) and SIGTERM (143) do, and a server gone or never answering
    (3 specs in a row unreached after their retries, exit 1): every edit
    received is kept, and the last lines say which were saved and what the
    calls to a paid engine came to (attempts given up once sent and a call in
    flight counted as ones that may be billed). A remote engine's server is
    tried with one connection before each call: when none opens, nothing is
    sent (exit 1; auto falls back to its next engine; --dry-run tries none).

    \b
    Examples:
      cfkit edit CF18                       auto: GPT Image 2, else local diffusers
      cfkit edit CF18 --dry-run             show the prompt, sizes and mask coverage
      cfkit edit EX01 --engine classical    offline, deterministic
      cfkit edit CF18 --engine diffusers -o steps=40 -o guidance=6
      cfkit edit CF18 --engine file --input edited.png
      cfkit edit CF01 CF02 CF03             several specs, one process
      cfkit edit --pending                  every spec without a usable edit
    """
    from cfkit.options import parse_option_pairs
    from cfkit.probe.runner import stopped_by_sigterm_as_by_ctrl_c

    options = parse_option_pairs(pairs)
    with stopped_by_sigterm_as_by_ctrl_c():  # SIGTERM stops an edit as Ctrl-C does: what was saved said, exit 143
        _edit(ws, spec_ids, all_specs=all_specs, pending=pending, shard=shard, engine=engine, model=model, n=n,
              seed=seed, input_path=input_path, options=options, again=again, dry_run=dry_run, as_json=as_json)


def _edit(ws, spec_ids: tuple[str, ...], *, all_specs: bool, pending: bool, shard: str | None, engine: str | None,
          model: str | None, n: int | None, seed: int | None, input_path: Path | None, options: dict, again: bool,
          dry_run: bool, as_json: bool) -> None:
    parts = _shard(shard) if shard is not None else None
    if parts is not None and len(spec_ids) == 1 and not (all_specs or pending):
        raise UsageError(f"--shard {shard} splits a batch; give --all, --pending or several spec ids.")
    if len(spec_ids) == 1 and not (all_specs or pending):
        _edit_one(ws, spec_ids[0], engine=engine, n=n, seed=seed, model=model, input_path=input_path,
                  options=options, again=again, dry_run=dry_run, as_json=as_json)
        return
    from cfkit.cli.edit_batch import edit_batch

    if input_path is not None:
        raise UsageError("--input names one edited image, for one spec; import a folder of edits named by spec id "
                         "with 'cfkit edits import DIR'.")
    edit_batch(ws, list(spec_ids), all_specs=all_specs, pending=pending, engine=engine, n=n, seed=seed, model=model,
               options=options, again=again, dry_run=dry_run, as_json=as_json, shard=parts)


def _shard(text: str) -> tuple[int, int]:
    """``"2/4"`` -> ``(2, 4)``; anything else is refused with the form it takes."""
    i, sep, n = text.partition("/")
    if not (sep and i.strip().isdigit() and n.strip().isdigit() and 1 <= int(i) <= int(n) <= 4096):
        raise UsageError(f"--shard {text}: write I/N with 1 <= I <= N, e.g. --shard 2/4 (the second of four parts).")
    return int(i), int(n)


def _edit_one(ws, spec_id: str, *, engine: str | None, n: int | None, seed: int | None, model: str | None,
              input_path: Path | None, options: dict, again: bool, dry_run: bool, as_json: bool) -> None:
    """One spec: the plan or the outcome in full."""
    from cfkit.cli.progress import engine_spinner
    from cfkit.edit import make_edit, plan_edit

    kwargs = dict(engine=engine, n=n, seed=seed, model=model, input_path=input_path, options=options)
    if dry_run:
        plan = plan_edit(ws, spec_id, **kwargs)
        if as_json:
            print_json({"dry_run": True, **plan.__dict__, "source_path": str(plan.source_path),
                        "mask_coverage": round(100 * plan.mask_coverage, 2)})
            return
        _print_plan(ws, plan)
        return
    from cfkit.cli.edit_batch import raise_stop, said_spend
    from cfkit.edit import EditSession

    with EditSession(ws) as session:
        try:
            outcome = make_edit(ws, spec_id, again=again, engine_call=engine_spinner, session=session, **kwargs)
        except KeyboardInterrupt as stop:  # Ctrl-C or SIGTERM: what was spent and saved, then exit 130/143
            said_spend(session.spend)
            raise_stop(stop, session.spend, "" if session.spend.saved else f" Run 'cfkit edit {spec_id}' to make it.")
        except CfkitError:  # a key refused, no credit, a server gone: what this invocation spent, then the line
            said_spend(session.spend)
            raise
    said_spend(session.spend)
    for attempt in outcome.attempts:
        if attempt.outcome != "used":
            warn(f"{attempt.engine} {attempt.outcome}: {attempt.reason}")
    if len(outcome.attempts) > 1:
        err.print(f"made with {outcome.engine} after falling back", style="dim")
    for note in outcome.notes:
        err.print(f"note: {escape(note)}", style="dim")
    lpips_note = next((r.metrics.get("lpips_note") for results in (outcome.checks or {}).values() for r in results
                       if r.metrics.get("lpips_note")), None)
    if lpips_note and lpips_note.startswith("LPIPS unavailable"):
        warn(lpips_note)
    failures = outcome.check_failures()
    if as_json:
        print_json({"engine": outcome.engine, "attempts": [a.__dict__ for a in outcome.attempts],
                    "edits": [r.as_dict() | {"check": outcome.verdicts.get(r.id), "check_failed": r.id in failures,
                                             "check_reasons": failures.get(r.id, [])} for r in outcome.records],
                    "notes": outcome.notes})
    else:
        for record in outcome.records:
            verdict = outcome.verdicts.get(record.id)
            check = "not checked" if verdict is None else verdict
            out.print(f"{record.spec_id} #{record.id}  {record.engine} {escape(record.model or '')}  "
                      f"composite {_rel(ws, record.composite_path)}  raw {_rel(ws, record.raw_path)}  check: {check}")
    spec_id = outcome.plan.spec_id
    if outcome.check_error is not None:
        made = "the new edit" if len(outcome.records) == 1 else f"the {plural(len(outcome.records), 'new edit')}"
        raise CheckFailed(f"{made} of {spec_id} {'is' if len(outcome.records) == 1 else 'are'} saved but not checked ({outcome.check_error}); fix "
                          f"that, then run 'cfkit check {spec_id}'. An unchecked edit does not stand for the pair.")
    if failures:
        # The edit is saved (a person may still look at it and accept it), but the command did not make what
        # was asked for: an edit that changes the target and keeps everything else.
        why = "; ".join(f"#{edit_id}: {', '.join(reasons)}" for edit_id, reasons in failures.items())
        raise CheckFailed(f"{len(failures)} of {plural(len(outcome.records), 'new edit')} of {spec_id} did not pass the "
                          f"preservation check ({why}). They are saved but do not stand for the pair unless a "
                          f"person accepts one in 'cfkit review {spec_id}'; or make another with "
                          f"'cfkit edit {spec_id}' (another engine, input, seed or prompt).")
    if not as_json:
        err.print(f"labelled: {outcome.records[0].label}. Next: cfkit review {spec_id}", style="dim")


def _print_plan(ws, plan) -> None:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold cyan", no_wrap=True)
    table.add_column()
    table.add_row("spec", f"{plan.spec_id} (case {plan.case_id})")
    table.add_row("prompt", escape(plan.prompt))
    table.add_row("source", f"{_rel(ws, plan.source_path)} ({plan.source_size[0]}x{plan.source_size[1]})")
    table.add_row("mask", f"{escape(plan.mask_source)}, coverage {100 * plan.mask_coverage:.1f}%")
    table.add_row("engines", " then ".join(plan.engines))
    for name, preview in plan.previews.items():
        table.add_row(name, escape(", ".join(f"{k} {v}" for k, v in preview.items())) or "—")
    table.add_row("candidates", str(plan.n))
    table.add_row("seed", "none" if plan.seed is None else str(plan.seed))
    for note in plan.notes:
        table.add_row("note", escape(note))
    out.print(table)
    err.print("dry run: nothing was sent and nothing was written.", style="dim")


@click.group()
def edits() -> None:
    """Recorded edits and their provenance."""


def _store_or_none(ws):
    from cfkit.store import Store

    # Reading must not create a store where none exists.
    return Store(ws.db_path) if ws.db_path.is_file() else None


@edits.command("list")
@click.argument("spec_ids", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@workspace_option
def list_(ws, spec_ids: tuple[str, ...], as_json: bool) -> None:
    """List recorded edits, all or of the given specs, with engine, status and check verdict.

    \b
    Example:
      cfkit edits list CF18 CF20
    """
    store = _store_or_none(ws)
    records, states = [], {}
    if store is not None:
        with store:
            records = edits_table.list_edits(store, list(spec_ids))
            states = {r.id: _state(store, r) for r in records}
    if as_json:
        print_json([r.as_dict() | states[r.id] for r in records])
        return
    if not records:
        err.print("no edits recorded yet. Make one with 'cfkit edit SPEC_ID'.")
        return
    table = Table(title=f"Edits in {ws.db_path}", title_justify="left", box=None, pad_edge=False, padding=(0, 1),
                  header_style="bold underline")
    spec_width = max(len(r.spec_id) for r in records)
    for name, width in (("id", max(2, len(str(records[-1].id)))), ("spec", spec_width), ("selected", 10),
                        ("engine / model", 10), ("status", 6), ("check", 5), ("review", 6), ("judge", 7),
                        ("finished", 11)):
        # Every column keeps its width but the engine's, which gives way with an ellipsis.
        table.add_column(name, no_wrap=True, overflow="ellipsis", min_width=width,
                         max_width=max(10, out.width - 71) if name == "engine / model" else None)
    starred = False
    for r in records:
        state = states[r.id]
        status = r.status if r.status == "ok" else f"[red]{r.status}[/]"
        check = state["check"] or "—"
        if check.endswith(" (without LPIPS)"):
            check, starred = check.removesuffix(" (without LPIPS)") + "*", True
        table.add_row(str(r.id), r.spec_id, "[green]✓ selected[/]" if state["selected"] else "",
                      escape(f"{r.engine} {r.model or ''}".strip()), status, check, state["review"] or "—",
                      "[yellow]doubted[/]" if state["judge"] == "doubted" else (state["judge"] or "—"),
                      (r.finished_at or "")[5:16].replace("T", " "))
    if starred:
        table.caption = "* checked without LPIPS"
        table.caption_justify = "left"
    out.print(table, soft_wrap=False)  # cells shortened with an ellipsis rather than the table overflowing
    err.print("selected: the edit that stands for its spec in probes, reports and sheets "
              "(accepted, else the newest that passed its check and was not rejected).", style="dim")


def _state(store, record) -> dict:
    """An edit's own check verdict and review decision, and whether it is the spec's selected edit."""
    from cfkit.store import checks, edits, reviews

    from cfkit.store import screens

    check = checks.latest(store, record.id, variant=None)
    decision = reviews.on_edit(store, record.id)
    selected = edits.selected(store, record.spec_id)
    answers = screens.answers(store, [record.id])
    doubts = sorted({a.judge for a in answers if a.doubts})
    judged = "doubted" if doubts else ("clear" if answers else None)
    return {"check": None if check is None else check.label, "review": None if decision is None else decision.decision,
            "selected": selected is not None and selected.id == record.id, "judge": judged, "doubted_by": doubts}


@edits.command()
@click.argument("target")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@workspace_option
def show(ws, target: str, as_json: bool) -> None:
    """Show the full provenance of a spec's edits (CF18) or of one edit (its number).

    \b
    Examples:
      cfkit edits show CF18
      cfkit edits show 12 --json
    """

    store = _store_or_none(ws)
    if store is None:
        raise NotFoundError(f"no edits recorded yet in {ws.db_path}. Make one with 'cfkit edit SPEC_ID'.")
    with store:
        if target.isascii() and target.isdigit():
            records = [edits_table.get(store, int(target))]
        else:
            records = edits_table.list_edits(store, [target])
            if not records:
                raise NotFoundError(f"no edits recorded for '{target}'. Make one with 'cfkit edit {target}'.")
        states = {r.id: _state(store, r) for r in records}
    if as_json:
        print_json([r.as_dict() | states[r.id] for r in records])
        return
    for r in records:
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold cyan", no_wrap=True)
        table.add_column()
        state = states[r.id]
        title = f"{r.spec_id} edit #{r.id}" + ("  [green](selected)[/]" if state["selected"] else "")
        rows = [
            ("status", r.status + (f": {r.error}" if r.error else "")),
            ("engine", f"{r.engine}" + (f" ({r.model})" if r.model else "")),
            ("candidate", str(r.candidate)), ("seed", "—" if r.seed is None else str(r.seed)),
            ("prompt", r.prompt or ""), ("params", ", ".join(f"{k}={v}" for k, v in r.params.items())),
            ("fallback", r.fallback or "—"), ("spec sha256", r.spec_sha256 or ""),
            ("source sha256", r.source_sha256 or ""), ("mask sha256", r.mask_sha256 or ""),
            ("raw", f"{_rel(ws, r.raw_path)} ({r.raw_sha256 or ''})"),
            ("composite", f"{_rel(ws, r.composite_path)} ({r.composite_sha256 or ''})"),
            ("usage", "—" if r.usage is None else ", ".join(f"{k}={v}" for k, v in r.usage.items() if v is not None)),
            ("cost", "not reported" if r.cost_usd is None else usd(r.cost_usd)),
            ("time", f"{r.started_at} → {r.finished_at or '—'}"),
            ("check", state["check"] or "—"), ("review", state["review"] or "—"),
            ("label", r.label),
        ]
        for key, value in rows:
            table.add_row(key, escape(str(value)))
        out.print(f"[bold]{title}[/]")
        out.print(table)
        out.print()


@edits.command("engines")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def engines(as_json: bool) -> None:
    """List installed image-editing engines with their options (give them as -o KEY=VALUE)."""
    from dataclasses import asdict

    from cfkit.editors import describe_editors

    infos = describe_editors()
    if as_json:
        print_json([{"name": i.name, "package": i.package, "target": i.target, "auto_rank": i.auto_rank,
                     "max_candidates": i.max_candidates, "problem": i.problem,
                     "options": [asdict(o) for o in i.options]} for i in infos])
        return
    table = Table(title="Engines (cfkit.editors entry points)", title_justify="left")
    for column in ("engine", "auto", "candidates", "package", "options"):
        table.add_column(column)
    for i in infos:
        if i.problem:
            table.add_row(i.name, "", "", i.package, f"[red]cannot load:[/] {escape(i.problem)}")
            continue
        options = ", ".join(f"{o.name}={o.default}" if o.default is not None else o.name for o in i.options)
        table.add_row(i.name, "—" if i.auto_rank is None else str(i.auto_rank), str(i.max_candidates), i.package,
                      escape(options))
    out.print(table)


@edits.command("import")
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path))
@click.option("--derive-masks", is_flag=True,
              help="Derive a mask from the edits for each spec that has none (flagged for review).")
@click.option("--force", is_flag=True, help="With --derive-masks, replace existing mask files too.")
@click.option("--again", is_flag=True, help="Import edits of specs whose edit was accepted too (it stays selected).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@workspace_option
def import_(ws, folder: Path, derive_masks: bool, force: bool, again: bool, as_json: bool) -> None:
    """Import a folder of edits made elsewhere, named by spec id: CF18.png, CF18-2.png for a second candidate.

    Each file is checked against its source image (same size, or the same
    aspect ratio: then resized), saved raw and composited, recorded and
    checked, as 'cfkit edit CF18 --engine file --input CF18.png' would.
    Nothing is imported unless every file matches a spec and can be aligned;
    a file imported before is not imported twice.

    \b
    Examples:
      cfkit edits import ~/photoshop-edits
      cfkit edits import edits/ --derive-masks
    """
    from cfkit.cli.edit_batch import render_import
    from cfkit.edit_import import import_edits

    if force and not derive_masks:
        raise UsageError("--force replaces mask files, so it goes with --derive-masks.")
    render_import(lambda progress: import_edits(ws, folder, derive_masks=derive_masks, overwrite_masks=force,
                                                again=again, progress=progress), as_json=as_json)


from cfkit.cli.screen import screen  # noqa: E402  (a command of the edits group, kept in its own module)

edits.add_command(screen)
