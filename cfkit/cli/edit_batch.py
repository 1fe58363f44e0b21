"""Rendering a batch of edits: one progress line per spec on stderr, a summary table on stdout."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from cfkit.cli.console import err, out, print_json, warn
from cfkit.cli.progress import engine_spinner
from cfkit.errors import CheckFailed, CfkitError, EditorTransport
from cfkit.plural import agree, plural

STATUS_STYLE = {"made": "green", "check failed": "red", "failed": "red", "kept": "cyan", "interrupted": "red",
                "not asked": "yellow"}


def edit_batch(ws, spec_ids: list[str], *, all_specs: bool, pending: bool, engine: str | None, n: int | None,
               seed: int | None, model: str | None, options: dict, again: bool, dry_run: bool,
               as_json: bool, shard: tuple[int, int] | None = None) -> None:
    """``cfkit edit`` with several specs, ``--all`` or ``--pending`` (``shard``: the part of them to edit)."""
    from cfkit.edit_batch import batch_ids, make_edits

    ids = batch_ids(ws, spec_ids, all_specs=all_specs, pending=pending, shard=shard)
    if not ids and shard is not None and not pending:
        err.print(f"Shard {shard[0]}/{shard[1]} holds no spec (there are fewer specs than shards).")
        return
    if not ids:
        err.print("Nothing pending" + (f" in shard {shard[0]}/{shard[1]}" if shard else "") + ": every spec has an "
                  "edit that no review rejected. Use --all (or name the specs) to edit them anyway.")
        return
    if dry_run:
        _dry_run(ws, ids, engine=engine, n=n, seed=seed, model=model, options=options, as_json=as_json)
        return
    lpips_notes: list[str] = []

    def progress(index: int, total: int, result) -> None:
        outcome = result.outcome
        if outcome is not None:
            for attempt in outcome.attempts:
                if attempt.outcome != "used":
                    warn(f"{result.spec_id}: {attempt.engine} {attempt.outcome}: {attempt.reason}")
            note = _lpips_note(outcome)
            if note and not lpips_notes:
                lpips_notes.append(note)
                warn(note)
        err.print(f"[dim][{index}/{total}][/] {_line(result)}")

    batch = make_edits(ws, ids, engine=engine, n=n, seed=seed, model=model, options=options, again=again,
                       engine_call=engine_spinner, progress=progress)
    if as_json:
        print_json({"specs": [r.as_dict() for r in batch.results], "spent": batch.spend.as_dict(),
                    "stopped": _stopped(batch.stop)})
    else:
        out.print(_summary(batch))
    counts = ", ".join(f"{batch.count(s)} {s}" for s in STATUS_STYLE if batch.count(s))
    err.print(f"{len(batch.results)} spec{'s' if len(batch.results) != 1 else ''}: {counts}.", style="dim")
    said_spend(batch.spend)
    if batch.stop is not None:  # a refused key, no credit, a server gone, Ctrl-C or SIGTERM: said after what was spent
        raise_stop(batch.stop, batch.spend, _not_edited(ws, batch))
    if batch.failed:
        for result in batch.failed:
            err.print(f"  [red]{result.spec_id}[/]: {escape(_why(result))}")
        names = ", ".join(r.spec_id for r in batch.failed)
        raise CheckFailed(f"{len(batch.failed)} of {plural(len(batch.results), 'spec')} did not end with an edit that passed "
                          f"its check ({names}); see above. {_next_steps(ws, batch.failed)}")
    if batch.count("made"):
        err.print("Next: cfkit review --pending", style="dim")


def said_spend(spend) -> None:
    """The line saying what this invocation's calls to a paid engine came to (none for a local engine)."""
    line = spend.line()
    if line is not None:
        err.print(line + ".", style="dim", markup=False)


def raise_stop(stop: BaseException, spend, rest: str = "") -> None:
    """End the command with what stopped it: Ctrl-C (exit 130) or SIGTERM (143) in one line saying which edits
    it saved (and which of them it did not check), or the refusal (a key, no credit: exit 2) with ``rest``."""
    if not isinstance(stop, KeyboardInterrupt):
        raise type(stop)(f"{stop}{rest}") from stop
    import click

    from cfkit.cli.console import error

    code = getattr(stop, "exit_code", 130)  # 143 after SIGTERM (cfkit.probe.runner.Terminated)
    saved = ", ".join(f"#{edit_id}" for _, edit_id in spend.saved)
    unchecked = spend.unchecked()
    kept = (f"every edit received is saved ({saved})" if saved else "no edit was received, nothing was lost")
    if unchecked:
        specs = " ".join(dict.fromkeys(spec for spec, _ in unchecked))
        kept += (f"; {', '.join(f'#{e}' for _, e in unchecked)} not checked yet: run 'cfkit check {specs}'")
    error(f"{'stopped by SIGTERM' if code == 143 else 'interrupted (Ctrl-C)'}; {kept}.{rest}")
    raise click.exceptions.Exit(code)


def _not_edited(ws, batch) -> str:
    """What follows the line of a stopped batch: the specs it did not edit, and the command that edits them."""
    from cfkit.edit_batch import pending_among

    unasked = [r.spec_id for r in batch.results if r.status in ("not asked", "interrupted")]
    if not isinstance(batch.stop, EditorTransport):
        return (f" Not edited: {', '.join(unasked)}; 'cfkit edit --pending' edits {agree(len(unasked), 'them')} "
                "(and any other spec without a usable edit), not those made here." if unasked else "")
    lost = [r.spec_id for r in batch.results if r.status == "failed" and isinstance(r.error, EditorTransport)]
    said = "; ".join(part for part in (f"{', '.join(lost)} failed (recorded)" if lost else "",
                                       f"{', '.join(unasked)} not asked" if unasked else "") if part)
    todo = lost + unasked
    again = "'cfkit edit --pending'" if pending_among(ws, todo) == todo else f"'cfkit edit {' '.join(todo)}'"
    done = len(batch.results) - len(todo)
    kept = "every edit received is saved" if batch.spend.saved else "no edit was received"
    return (f" {done} of {plural(len(batch.results), 'spec')} done, {kept}. Not edited: {said}; "
            f"once the server answers, run {again} to edit {agree(len(todo), 'them')}"
            + (" (and any other spec without a usable edit)" if again.endswith("--pending'") else "") + ".")


def _stopped(stop: BaseException | None) -> str | None:
    """Why a batch stopped before its last spec, for ``--json`` (None: it did not)."""
    if stop is None:
        return None
    if isinstance(stop, KeyboardInterrupt):
        return "stopped by SIGTERM" if getattr(stop, "exit_code", 130) == 143 else "interrupted (Ctrl-C)"
    return str(stop)


def _lpips_note(outcome) -> str | None:
    for results in (outcome.checks or {}).values():
        for r in results:
            note = r.metrics.get("lpips_note")
            if note and note.startswith("LPIPS unavailable"):
                return note
    return None


def engine_text(engine: str | None, model: str | None) -> str:
    """``classical-recolor``, ``openai gpt-image-2``: the engine and its model, without saying the engine twice."""
    if not model:
        return engine or ""
    return model if engine and model.startswith(engine) else f"{engine} {model}"


def short_verdict(label: str | None) -> str:
    """``pass*`` for ``pass (without LPIPS)``: the table's caption says what the star means."""
    if label is None:
        return "not checked"
    return label.removesuffix(" (without LPIPS)") + ("*" if label.endswith(" (without LPIPS)") else "")


def _edits_text(result) -> str:
    outcome = result.outcome
    if outcome is None:
        return "" if result.kept is None else f"#{result.kept} accepted"
    return " ".join(f"#{r.id}" for r in outcome.records)


def _checks_text(result) -> str:
    outcome = result.outcome
    if outcome is None:
        return ""
    if outcome.check_error is not None:
        return "not checked"
    return ", ".join(short_verdict(outcome.verdicts.get(r.id)) for r in outcome.records)


def _next_steps(ws, failed: list) -> str:
    """What to do next: a spec that got no edit is left to 'edit --pending' unless an earlier edit of it still
    stands (not rejected: '--pending' passes over it, so it is named); one whose edit failed its check is
    not (the saved edit waits for a person, who may accept it), so it needs a review or an edit of its own."""
    from cfkit.edit_batch import pending_among

    unmade = [r.spec_id for r in failed if r.status == "failed"]
    unchecked = [r.spec_id for r in failed if r.status == "check failed"]
    again = "'cfkit edit --pending'" if pending_among(ws, unmade) == unmade else f"'cfkit edit {' '.join(unmade)}'"
    steps = [f"Fix {', '.join(unmade)} and run {again}."] if unmade else []
    if unchecked:
        steps.append(f"Accept or reject the saved edit of {', '.join(unchecked)} in 'cfkit review SPEC' "
                     "('edit --pending' takes a spec up again once its edits are rejected), or make another "
                     "with 'cfkit edit SPEC'.")
    return " ".join(steps)


def _why(result) -> str:
    if result.error is not None:
        return str(result.error)
    if result.outcome is not None and result.outcome.check_error is not None:
        return f"the check could not run: {result.outcome.check_error}"
    return f"check: {_checks_text(result)}"


def _line(result) -> str:
    """``EX01 made #4 classical classical-recolor · check pass · 0.8 s``."""
    style = STATUS_STYLE[result.status]
    head = f"{result.spec_id} [{style}]{result.status}[/]"
    if result.status == "kept":
        return f"{head}: accepted edit #{result.kept} stays (pass --again to add candidates)"
    if result.status == "failed":
        return f"{head}: {escape(str(result.error))}"
    if result.outcome is None:  # interrupted, not asked
        return head
    outcome = result.outcome
    engine = engine_text(outcome.engine, outcome.records[0].model)
    return f"{head} {_edits_text(result)} {escape(engine)} · {escape(_checks_text(result))} · {result.seconds:.1f} s"


def _summary(batch) -> Table:
    table = Table(title="Edits made", title_justify="left")
    for name in ("spec", "result", "edits", "engine", "check", "time"):
        table.add_column(name, justify="right" if name == "time" else "left",
                         no_wrap=name in ("spec", "result", "time"))
    for result in batch.results:
        outcome = result.outcome
        engine = "" if outcome is None else engine_text(outcome.engine, outcome.records[0].model)
        check = _checks_text(result) if result.status != "failed" else escape(str(result.error))
        table.add_row(result.spec_id, f"[{STATUS_STYLE[result.status]}]{result.status}[/]", _edits_text(result),
                      escape(engine), escape(check) if result.status != "failed" else check,
                      f"{result.seconds:.1f} s" if result.status not in ("kept", "not asked") else "")
    if any("*" in _checks_text(r) for r in batch.results):
        table.caption, table.caption_justify = "* checked without LPIPS", "left"
    return table


def _dry_run(ws, ids: list[str], **kwargs) -> None:
    from cfkit.edit import EditSession, plan_edit

    as_json = kwargs.pop("as_json")
    rows, problems = [], []
    session = EditSession(ws)  # the cases are read once for every spec (a dry run opens no store)
    for spec_id in ids:
        try:
            rows.append(plan_edit(ws, spec_id, session=session, **kwargs))
        except CfkitError as exc:
            problems.append((spec_id, exc))
    if as_json:
        print_json({"dry_run": True, "plans": [{"spec": p.spec_id, "engines": p.engines, "n": p.n,
                                                "mask_coverage": round(100 * p.mask_coverage, 2),
                                                "source_size": p.source_size, "notes": p.notes} for p in rows],
                    "problems": [{"spec": s, "error": str(e)} for s, e in problems]})
    else:
        table = Table(title="Dry run: what each edit would send", title_justify="left")
        for name in ("spec", "case", "engines", "source", "mask", "candidates"):
            table.add_column(name)
        for p in rows:
            table.add_row(p.spec_id, p.case_id, " then ".join(p.engines), f"{p.source_size[0]}x{p.source_size[1]}",
                          f"{100 * p.mask_coverage:.1f}%", str(p.n))
        out.print(table)
        for spec_id, exc in problems:
            err.print(f"  [red]{spec_id}[/]: {escape(str(exc))}")
        err.print("dry run: nothing was sent and nothing was written.", style="dim")
    if problems:
        first = problems[0][1]
        raise type(first)(f"{len(problems)} of {plural(len(ids), 'spec')} cannot be edited as asked "
                          f"({', '.join(s for s, _ in problems)}); see above.") if len(problems) > 1 else first


# ── edits import ───────────────────────────────────────────────────────────

IMPORT_STYLE = {"imported": "green", "check failed": "red", "failed": "red", "kept": "cyan",
                "already imported": "cyan", "same file": "cyan"}


def render_import(run, *, as_json: bool) -> None:
    """Run an import (``run(progress)``), a line per file on stderr, then the summary."""

    def progress(index: int, total: int, result) -> None:
        err.print(f"[dim][{index}/{total}][/] {_import_line(result)}")

    outcome = run(progress)
    for written in outcome.masks:
        m = written.mask
        err.print(f"mask {escape(str(written.path))}: derived from {escape(written.source)} "
                  f"({100 * m.coverage:.2f}% of the image, {m.regions} region{'s' if m.regions != 1 else ''}); "
                  f"[yellow]flagged for review[/]")
    for path in outcome.ignored:
        err.print(f"left alone (not an image): {escape(path.name)}", style="dim")
    if as_json:
        print_json({"files": [r.as_dict() for r in outcome.results], "masks": [m.as_dict() for m in outcome.masks],
                    "ignored": [p.name for p in outcome.ignored]})
    else:
        table = Table(title="Edits imported", title_justify="left")
        for name in ("file", "spec", "result", "edit", "check"):
            table.add_column(name, no_wrap=name != "check")
        for r in outcome.results:
            made = r.outcome
            edit = (" ".join(f"#{e.id}" for e in made.records) if made is not None
                    else ("" if r.existing is None else f"#{r.existing}"))
            check = (escape(str(r.error)) if r.error is not None else
                     "" if made is None else ", ".join(short_verdict(made.verdicts.get(e.id)) for e in made.records))
            table.add_row(escape(r.file.path.name), r.file.spec_id, f"[{IMPORT_STYLE[r.status]}]{r.status}[/]", edit,
                          check)
        if any("*" in short_verdict(v) for r in outcome.results if r.outcome for v in r.outcome.verdicts.values()):
            table.caption, table.caption_justify = "* checked without LPIPS", "left"
        out.print(table)
    counts = ", ".join(f"{outcome.count(s)} {s}" for s in IMPORT_STYLE if outcome.count(s))
    err.print(f"{len(outcome.results)} file{'s' if len(outcome.results) != 1 else ''}: {counts}.", style="dim")
    if outcome.failed:
        names = ", ".join(r.file.path.name for r in outcome.failed)
        raise CheckFailed(f"{len(outcome.failed)} of {plural(len(outcome.results), 'file')} did not become an edit that "
                          f"passed its check ({names}); see above.")
    if outcome.count("imported"):
        err.print("Next: cfkit review --pending", style="dim")


def _import_line(result) -> str:
    head = f"{escape(result.file.path.name)} → {result.file.spec_id} [{IMPORT_STYLE[result.status]}]{result.status}[/]"
    if result.status == "kept":
        return f"{head}: accepted edit #{result.existing} stays (pass --again to import it as a candidate)"
    if result.status == "already imported":
        return f"{head} as #{result.existing}"
    if result.status == "same file":
        return f"{head}: the same bytes as {escape(result.copy_of or '')}, imported once"
    if result.error is not None:
        return f"{head}: {escape(str(result.error))}"
    made = result.outcome
    checks = ", ".join(short_verdict(made.verdicts.get(e.id)) for e in made.records)
    return f"{head} #{' #'.join(str(e.id) for e in made.records)} · {escape(checks)}"
