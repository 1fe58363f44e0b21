"""``cfkit review`` and ``cfkit sheet``: look at edits and decide on them."""

from __future__ import annotations

from pathlib import Path

import click
from rich.text import Text

from cfkit.cli import params
from cfkit.cli.console import err, out, print_json, workspace_option
from cfkit.errors import CfkitError, Incomplete, NotFoundError, UsageError
from cfkit.plural import agree, plural


@click.command()
@click.argument("spec_ids", nargs=-1)
@click.option("--pending", is_flag=True, help="Review every spec with a candidate that has no accept or reject yet.")
@click.option("--edit", "edit_id", type=params.positive(), default=None, metavar="ID",
              help="The edit to decide or show (one spec); default: the spec's first undecided candidate.")
@click.option("--accept", is_flag=True,
              help="Accept the edit without the interactive view: --edit ID, else the one --show shows.")
@click.option("--reject", is_flag=True, help="Reject the edit (give --note).")
@click.option("--skip", is_flag=True, help="Record a skip (the spec stays pending).")
@click.option("--note", default=None, help="Why; stored with the decision.")
@click.option("--yes", is_flag=True, help="With --pending: decide every pending edit without being asked.")
@click.option("--show", is_flag=True, help="Draw the view once and exit (works without a TTY).")
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="With --show: write the view as a PNG (original | edited | difference) instead.")
@click.option("--zoom", is_flag=True, help="With --show: zoom to the mask's bounding box.")
@click.option("--color", "color", type=click.Choice(["auto", "always", "never"]), default="auto",
              help="Colour in --show: always keeps it in a pipe or a file.")
@click.option("--force", is_flag=True, help="Replace an existing --output file.")
@click.option("--json", "as_json", is_flag=True, help="Print the edit, its checks and its review as JSON.")
@workspace_option
def review(ws, spec_ids: tuple[str, ...], pending: bool, edit_id: int | None, accept: bool, reject: bool,
           skip: bool, note: str | None, yes: bool, show: bool, output: Path | None, zoom: bool, color: str,
           force: bool, as_json: bool) -> None:
    """Review edits in the terminal: original | edited | difference, metrics and verdict.

    Keys: a accept, r reject (asks why; no note, no reject), s skip, [ ] candidates, g
    regenerate (like the edit on screen), G regenerate with another engine,
    z zoom, f flip panel, d diff/leaks, v raw/composite, ? help, q quit.
    Decisions are saved as they are made. The view fits the terminal and
    redraws when it is resized.

    \b
    Examples:
      cfkit review CF18
      cfkit review --pending
      cfkit review CF18 --edit 12 --accept
      cfkit review CF18 --reject --note "the children's faces changed"
      cfkit review CF18 --show --output view.png
    """
    from cfkit.review.loop import pending_specs, review_loop
    from cfkit.store import Store

    decision = _decision(accept=accept, reject=reject, skip=skip)
    if decision == "reject" and not (note or "").strip():
        raise UsageError("--reject needs --note saying why, e.g. --note \"the background changed\".")
    if bool(spec_ids) == pending:
        raise UsageError("give spec ids or --pending (one of them). Example: 'cfkit review CF18'.")
    if edit_id is not None and len(spec_ids) != 1:
        example = spec_ids[0] if spec_ids else "CF18"
        raise UsageError(f"--edit {edit_id} names one edit; give its spec alone, e.g. 'cfkit review {example} "
                         f"--edit {edit_id}'.")
    if (output is not None or zoom) and not show:
        raise UsageError("--output and --zoom go with --show, e.g. 'cfkit review CF18 --show --output view.png'.")
    if output is not None and len(spec_ids) != 1:
        raise UsageError("--output writes one view; give one spec id.")
    if not ws.db_path.is_file():
        first = spec_ids[0] if spec_ids else "SPEC_ID"
        raise NotFoundError(f"{first} has no edit yet (no edits are recorded in {ws.db_path}); make one with "
                            f"'cfkit edit {first}'.")
    with Store(ws.db_path) as store:
        ids = pending_specs(store) if pending else list(spec_ids)
        if not ids:
            err.print("Nothing pending: every candidate has an accept or reject.")
            return
        if decision and pending:
            _confirm_unseen(ids, decision, yes)
        alone = not pending and len(ids) == 1  # one spec asked: its problem is the command's error
        if decision or as_json or show:
            left_out = _once(ws, store, ids, edit_id, decision, note, show=show, output=output, zoom=zoom,
                             color=color, force=force, as_json=as_json, alone=alone)
            if left_out:
                raise _left_undone(left_out, len(ids))
            return
        from cfkit.review.terminal import TerminalKeys, require_terminal

        require_terminal(ids[0])
        with TerminalKeys(out) as keys:
            summary = review_loop(ws, store, ids, keys, out, regenerate=_regenerate(ws), start_edit=edit_id,
                                  failed=_regenerate_failed, unshown=unshown_line)
    done = len(summary.decisions)
    err.print(f"{done} decision{'s' if done != 1 else ''} saved"
              + ("; run 'cfkit review --pending' to go on." if summary.quit_early else "."))
    if summary.left_out:
        if alone:
            raise summary.left_out[0][1]
        for spec_id, why in summary.left_out:
            _not_done(spec_id, "reviewed", why)
        raise Incomplete("")  # each spec left out is named above, and the line before counts the decisions saved


def _decision(*, accept: bool, reject: bool, skip: bool) -> str | None:
    given = [name for name, on in (("accept", accept), ("reject", reject), ("skip", skip)) if on]
    if len(given) > 1:
        raise UsageError(f"{' and '.join('--' + g for g in given)} conflict; give one decision.")
    return given[0] if given else None


def _confirm_unseen(ids: list[str], decision: str, yes: bool) -> None:
    """Deciding every pending edit at once decides edits nobody has looked at: ask, or need --yes."""
    import sys

    what = f"{decision} the pending edit of {plural(len(ids), 'spec')} ({', '.join(ids)})"
    them = agree(len(ids), "them")
    if yes:
        return
    if not sys.stdin.isatty():
        raise UsageError(f"--pending --{decision} would {what} without showing {them}; add --yes to do so, "
                         "or look first with 'cfkit review --pending'.")
    if not click.confirm(f"{what[0].upper()}{what[1:]} without looking at {them}?", default=False, err=True):
        raise Incomplete("nothing decided; the edits stay pending.")


#: What a one-shot decision did, for the lines that name a spec it could not do it for.
_DONE = {"accept": "accepted", "reject": "rejected", "skip": "skipped"}


def _once(ws, store, ids: list[str], edit_id: int | None, decision: str | None, note: str | None, *, show: bool,
          output: Path | None, zoom: bool, color: str, force: bool, as_json: bool,
          alone: bool) -> list[tuple[str, str]]:
    """Decide, show or describe each spec's edit without the interactive view; the specs it could not do that
    for, each with what was not done, and each named on stderr with why (the others go on). With ``alone``,
    the one spec's problem is raised."""
    from cfkit.review.loop import decide, load_view_data, read_cases
    from cfkit.review.view import EditView
    from cfkit.store import checks, edits, reviews

    records = []
    left_out: list[tuple[str, str]] = []
    console = _view_console(color)
    pictures: dict = {}  # the files an accept read, so that a view drawn after it reads them once
    cases = read_cases(ws)
    for spec_id in ids:
        decided_on = edit_id
        stage = decision or "show"
        try:
            if decision:  # decided from the store alone (an accept reads the files), see review.loop.decide
                decided_on = decide(ws, store, spec_id, edit_id, decision, note, pictures=pictures,
                                    cases=cases).edit_id
                err.print(_decided_line(store, spec_id, decided_on, decision), markup=False, highlight=False)
                if not (show or as_json):
                    continue
            stage = "show"
            # the decision and selection as now
            data = load_view_data(ws, store, spec_id, edit_id=decided_on, pictures=pictures, cases=cases)
        except CfkitError as exc:
            if alone:
                raise
            left_out.append((spec_id, _DONE.get(stage, "shown")))
            _not_done(spec_id, left_out[-1][1], exc)
            continue
        if show and output is not None:
            from cfkit.review.picture import write_view_png

            write_view_png(data, output, zoom=int(zoom), overwrite=force)
            out.print(f"Wrote {output}")
        elif show:
            console.print(EditView(data, zoom=int(zoom)), soft_wrap=False)
        if as_json:
            decided = reviews.on_edit(store, data.edit_id)
            selected = edits.selected(store, spec_id)
            records.append({"spec": spec_id, "edit_id": data.edit_id, "selected": data.selected,
                            "selected_edit": None if selected is None else selected.id,
                            "candidates": list(data.candidates), "mask": data.mask_note,
                            "mask_changed": data.mask_changed,
                            "checks": {k: v.to_dict() for k, v in checks.latest_by_variant(store, data.edit_id).items()},
                            "review": None if decided is None else decided.__dict__})
    if as_json:
        print_json(records)
    return left_out


def _decided_line(store, spec_id: str, edit_id: int, decision: str) -> str:
    """``TX01: edit #3 accepted``; an accept of an edit that failed its preservation check, or was never checked,
    says so, with the check's reasons as the review screen shows them, since the edit now stands for the pair."""
    from cfkit.store import checks

    if decision == "skip":
        return f"{spec_id}: skipped"
    done = f"{spec_id}: edit #{edit_id} {decision}ed"
    if decision != "accept":
        return done
    check = checks.latest(store, edit_id, variant=None)
    reject = f"reject it with 'cfkit review {spec_id} --edit {edit_id} --reject --note WHY'"
    if check is None:
        return (f"{done} without a preservation check, and it now stands for the pair: check it with "
                f"'cfkit check {spec_id}', or if that was not meant, {reject}.")
    if check.verdict != "pass":
        why = "; ".join(check.reasons) or "no reason recorded"
        return (f"{done} although it failed its preservation check ({why}), and it now stands for the pair: "
                f"if that was not meant, {reject}.")
    return done


def _left_undone(left_out: list[tuple[str, str]], asked: int) -> Incomplete:
    """The last line after the specs left out were each named: how many, which, and that the rest is saved."""
    verbs = {verb for _, verb in left_out}
    verb = verbs.pop() if len(verbs) == 1 else "done as asked"
    rest = "." if len(left_out) == asked else "; the others were done and are saved."
    return Incomplete(f"{len(left_out)} of {plural(asked, 'spec')} {'was' if len(left_out) == 1 else 'were'} not "
                      f"{verb} ({', '.join(spec for spec, _ in left_out)}); each is named above with how to fix "
                      f"it{rest}")


def _not_done(spec_id: str, verb: str, why) -> None:
    """The one line naming a spec the command could not review as asked, with why and how to fix it."""
    from cfkit.cli.console import error

    error(f"{spec_id} was not {verb}: {_without_spec(why, spec_id)}")


def _view_console(color: str):
    """The console --show draws on: stdout, with colour as --color asks."""
    if color == "auto":
        return out
    from rich.console import Console

    if color == "always":
        return Console(force_terminal=True, color_system="truecolor", highlight=False, emoji=False)
    return Console(no_color=True, color_system=None, highlight=False, emoji=False)


def _regenerate(ws):
    """The g / G keys: another candidate through cfkit.edit's make_edit, like the edit on screen unless told."""
    from cfkit.cli.progress import engine_spinner

    def run(record, engine: str | None) -> None:
        from cfkit.edit import make_edit
        from cfkit.edit_batch import settings_of

        if engine is None:
            make_edit(ws, record.spec_id, again=True, engine_call=engine_spinner, **settings_of(record).as_kwargs())
        else:
            make_edit(ws, record.spec_id, again=True, engine_call=engine_spinner, engine=engine or None)

    return run


@click.command()
@click.argument("spec_ids", nargs=-1)
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="HTML file to write (default: <store>/sheets/sheet-<time>.html); the PNG goes beside it.")
@click.option("--models", "models", multiple=True, metavar="MODEL",
              help="A model whose answers to show (repeatable; in the order given). Default: every model with "
                   "counterfactual answers.")
@click.option("--predictions", "prediction_paths", multiple=True, metavar="FILE",
              type=click.Path(dir_okay=False, path_type=Path),
              help="Predictions JSONL to take the answers from instead of the stored runs (repeatable), e.g. the "
                   "published models' answers.")
@click.option("--force", is_flag=True, help="Replace existing sheet files.")
@workspace_option
def sheet(ws, spec_ids: tuple[str, ...], output: Path | None, models: tuple[str, ...],
          prediction_paths: tuple[Path, ...], force: bool) -> None:
    """A contact sheet of all pairs (or the given ones), laid out like Figure S8: HTML and a PNG.

    Each pair shows the question, its selected edit (or, with none selected,
    the newest, said so) beside the original, the intervention, the check's
    verdict and review decision and, per model, the answer before and after in
    a box coloured by its agreement with that image's gold label. The HTML
    also shows the difference image.

    \b
    Examples:
      cfkit sheet --output pairs.html
      cfkit sheet CF20 CF18 CF28 CF35 --predictions published.jsonl --models GPT-5.2 --models ArtiMuse
    """
    from cfkit.review.sheet import write_sheet

    written = write_sheet(ws, list(spec_ids), output, overwrite=force, models=list(models),
                          prediction_paths=list(prediction_paths))
    out.print(f"Wrote {written.html} and {written.png} ({plural(written.pairs, 'pair')}).")
    for note in written.notes:
        err.print(note, style="dim")


def _regenerate_failed(exc) -> Text:
    """The line the review shows when a regeneration fails; the review goes on."""
    return Text(f"regenerate failed: {exc}", style="red")


def unshown_line(spec_id: str, edit_id: int | None, exc) -> Text:
    """The line the review shows for an edit it cannot show (``edit_id``), or a spec it leaves out (None)."""
    what = f"{spec_id} left out" if edit_id is None else f"#{edit_id} cannot be shown"
    return Text(f"{what}: {_without_spec(exc, spec_id)}", style="red")


def _without_spec(exc, spec_id: str) -> str:
    """The error's line without a leading ``SPEC: `` (the line names the spec itself)."""
    text = str(exc)
    return text[len(spec_id) + 2:] if text.startswith(f"{spec_id}: ") else text
