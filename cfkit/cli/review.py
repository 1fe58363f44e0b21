"""``cfkit review`` and ``cfkit sheet``: look at edits and decide on them."""

from __future__ import annotations

from pathlib import Path

import click

from cfkit.cli.console import err, out, print_json, workspace_option
from cfkit.errors import UsageError


@click.command()
@click.argument("spec_ids", nargs=-1)
@click.option("--pending", is_flag=True, help="Review every spec whose newest edit has no accept or reject yet.")
@click.option("--accept", "decision", flag_value="accept", help="Accept the newest edit without the interactive view.")
@click.option("--reject", "decision", flag_value="reject", help="Reject the newest edit (give --note).")
@click.option("--skip", "decision", flag_value="skip", help="Record a skip (the spec stays pending).")
@click.option("--note", default=None, help="Why; stored with the decision.")
@click.option("--show", is_flag=True, help="Draw the view once and exit (works without a TTY).")
@click.option("--json", "as_json", is_flag=True, help="Print the edit, its checks and its review as JSON.")
@workspace_option
def review(ws, spec_ids: tuple[str, ...], pending: bool, decision: str | None, note: str | None, show: bool,
           as_json: bool) -> None:
    """Review edits in the terminal: original | edited | difference, metrics and verdict.

    Keys: a accept, r reject (asks a note), g regenerate, s skip, d diff/leaks,
    v raw/composite, ? help, q quit. Decisions are saved as they are made.

    \b
    Examples:
      cfkit review CF18
      cfkit review --pending
      cfkit review CF18 --reject --note "the children's faces changed"
    """
    from cfkit.review.loop import pending_specs, review_loop
    from cfkit.store import Store

    if decision == "reject" and not note:
        raise UsageError("--reject needs --note saying why, e.g. --note \"the background changed\".")
    if bool(spec_ids) == pending:
        raise UsageError("give spec ids or --pending (one of them). Example: 'cfkit review CF18'.")
    with Store(ws.db_path) as store:
        ids = pending_specs(store) if pending else list(spec_ids)
        if not ids:
            err.print("Nothing pending: every newest edit has an accept or reject.")
            return
        if decision or as_json or show:
            _once(ws, store, ids, decision, note, show, as_json)
            return
        from cfkit.review.loop import TerminalKeys, require_terminal

        require_terminal(ids[0])
        summary = review_loop(ws, store, ids, TerminalKeys(out), out, regenerate=_regenerate(ws))
    done = len(summary.decisions)
    err.print(f"{done} decision{'s' if done != 1 else ''} saved"
              + ("; run 'cfkit review --pending' to go on." if summary.quit_early else "."))


def _once(ws, store, ids: list[str], decision: str | None, note: str | None, show: bool, as_json: bool) -> None:
    from cfkit.review.loop import load_view_data, record_decision
    from cfkit.review.view import EditView
    from cfkit.store import checks, reviews

    records = []
    for spec_id in ids:
        data = load_view_data(ws, store, spec_id)
        if decision:
            record_decision(store, spec_id, data.edit_id, decision, note)
            err.print(f"{spec_id}: edit #{data.edit_id} {decision}ed" if decision != "skip" else f"{spec_id}: skipped")
        if show:
            out.print(EditView(data))
        if as_json:
            decided = reviews.on_edit(store, data.edit_id)
            records.append({"spec": spec_id, "edit_id": data.edit_id,
                            "checks": {k: v.to_dict() for k, v in checks.latest_by_variant(store, data.edit_id).items()},
                            "review": None if decided is None else decided.__dict__})
    if as_json:
        print_json(records)


def _regenerate(ws):
    """A regenerate action through cfkit.edit's make_edit, or None where that module is absent."""
    import importlib.util

    if importlib.util.find_spec("cfkit.edit") is None:
        return None

    def run(spec_id: str) -> None:
        from cfkit.edit import make_edit

        make_edit(ws, spec_id, again=True)

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

    Each pair shows the question, the original and the edit, the
    intervention, the check's verdict and review decision and, per model, the
    answer before and after in a box coloured by its agreement with that
    image's gold label. The HTML also shows the difference image.

    \b
    Examples:
      cfkit sheet --output pairs.html
      cfkit sheet CF20 CF18 CF28 CF35 --predictions published.jsonl --models GPT-5.2 --models ArtiMuse
    """
    from cfkit.review.sheet import write_sheet

    written = write_sheet(ws, list(spec_ids), output, overwrite=force, models=list(models),
                          prediction_paths=list(prediction_paths))
    out.print(f"Wrote {written.html} and {written.png} ({written.pairs} pairs).")
    for note in written.notes:
        err.print(note, style="dim")
