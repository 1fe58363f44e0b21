"""``cfkit audit``: the evidence-grounding audit (Table 6 / Table S8), blind, in the terminal or from scripts."""

from __future__ import annotations

from pathlib import Path

import click
from rich.text import Text
from rich.markup import escape
from rich.table import Table

from cfkit.cli import params
from cfkit.cli.console import err, out, print_json, status, warn, workspace_option
from cfkit.errors import OutputError
from cfkit.plural import agree, plural

YES_NO = click.Choice(["yes", "no"], case_sensitive=False)
FORMAT = click.Choice(["jsonl", "csv", "label-studio", "argilla"])


def _audit_option(func):
    return click.option("--audit", "audit_ref", metavar="ID", default=None,
                        help="Which audit (an id or its start; default: the newest).")(func)


def _as_option(required: bool = True, what: str = "annotator"):
    return click.option("--as", "name", metavar="NAME", required=required, help=f"Your {what} name, e.g. --as alice.")


def _open(ws):
    from cfkit.store import Store

    return Store(ws.db_path)


@click.group()
def audit() -> None:
    """Evidence-grounded accuracy: two people judge each reply blind; κ, AC1, adjudication; 'report --ega'.

    \b
    The flow:
      cfkit audit plan --run RUN_A --run RUN_B --balanced 100
      cfkit audit annotate --as alice          (and bob, on his own)
      cfkit audit status; cfkit audit agreement
      cfkit audit adjudicate --as carol
      cfkit report --ega --reference
    """


@audit.command()
@click.option("--run", "run_refs", multiple=True, metavar="RUN", required=True,
              help="A contextcanvas run to audit (repeatable; an id or its start; see 'cfkit runs list').")
@click.option("--cases", "cases_file", metavar="FILE", default=None, help="Audit these cases (one id a line).")
@click.option("--balanced", type=params.positive(), metavar="N", default=None,
              help="Sample N two-option cases, half gold Yes and half gold No.")
@click.option("--seed", type=params.seed(), default=0, show_default=True, help="Seed of the sampling and of each order.")
@click.option("--mask", multiple=True, metavar="TEXT", help="Another string to mask in the replies (repeatable).")
@click.option("--force", is_flag=True, help="Plan a new audit although the newest one is not finished.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@workspace_option
def plan(ws, run_refs, cases_file, balanced, seed, mask, force, as_json) -> None:
    """Freeze an audit: one blinded item per (run, case) reply, masked, with its inputs' hashes.

    \b
    Examples:
      cfkit audit plan --run contextcanvas-openai-gpt-5.5 --run contextcanvas-hf-qwen --balanced 100
      cfkit audit plan --run RUN --cases probes/audit-100.txt --seed 3
    """
    from cfkit.audit.plan import plan_audit

    with _open(ws) as store:
        result = plan_audit(ws, store, run_refs, cases_file=cases_file, balanced=balanced, seed=seed, mask=mask,
                            force=force)
    if as_json:
        print_json({"audit": result.plan.id, "items": result.items, "models": result.models, "cases": result.cases,
                    "masked": result.masked, "selection": result.plan.selection, "inputs": result.plan.inputs,
                    "notes": result.plan.notes})
        return
    out.print(result.plan.id)
    status(f"{plural(result.items, 'item')}: {plural(result.cases, 'case')} × {plural(result.models, 'run')}; {plural(result.masked, 'self-identifying string')} "
           f"masked. Next: 'cfkit audit annotate --as NAME' for each of the two annotators.")
    for note in result.plan.notes:
        warn(note)


@audit.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print the progress as JSON.")
@_audit_option
@workspace_option
def status_(ws, audit_ref, as_json) -> None:
    """Progress per annotator, final labels, and whether the inputs changed since planning."""
    from cfkit.audit.adjudication import needs_resolution
    from cfkit.audit.items import load_audit, progress
    from cfkit.audit.plan import input_drift
    from cfkit.judge.costs import spending_dict, spending_said
    from cfkit.store import prelabels

    with _open(ws) as store:
        current = load_audit(store, audit_ref)
        state = progress(store, current)
        open_items = len(needs_resolution(store, current))
        drift = input_drift(ws, store, current.plan)
        spends = {judge: prelabels.spending(store, current.id, judge) for judge in prelabels.judges(store, current.id)}
    data = {**state.to_dict(), "needs_resolution": open_items, "inputs_changed": drift,
            "judges": [{"judge": judge, **spending_dict(spend)} for judge, spend in spends.items()]}
    if as_json:
        print_json(data)
        return
    out.print(f"[bold]{current.id}[/] · {plural(data['items'], 'item')} ({plural(data['cases'], 'case')} × {plural(data['models'], 'run')}) · "
              f"planned {data['created_at']} · seed {data['seed']}")
    table = Table("annotator", "labelled", "started", "unsure", box=None)
    for person in state.annotators:
        table.add_row(escape(person.name), f"{person.labelled} / {data['items']}", str(person.partial),
                      str(person.unsure))
    for _ in range(state.open_places):
        table.add_row("[dim](open place)[/]", "—", "—", "—")
    out.print(table)
    out.print(f"final labels: {state.agreed} agreed, {state.resolved} resolved, {state.pending} pending"
              + (f"; {open_items} to resolve ('cfkit audit adjudicate --as NAME')" if open_items else ""))
    for change in drift or ["inputs unchanged since planning"]:
        (warn if drift else status)(change + ("; the audited items keep what was planned" if drift else ""))
    for judge, spend in spends.items():  # its labels never count as an annotator's; what they cost is said here
        status(spending_said(f"judge {judge} on audit {current.id}", spend))


@audit.command()
@_as_option()
@click.option("--item", "item_ref", metavar="ITEM", default=None, help="Open at this item (to change its label).")
@_audit_option
@workspace_option
def annotate(ws, name, item_ref, audit_ref) -> None:
    """Label items in the terminal, in your own order, blind; every key is saved at once.

    Keys: y/n answer the marked question (cue identified, then linked to the
    use), tab switch, a flip "answer correct", u unsure, m note, b back,
    s skip, j/k scroll, g guideline, ? help, q quit. Run it again to resume.
    """
    from cfkit.audit.items import check_annotator, load_audit
    from cfkit.audit.loop import require_terminal
    from cfkit.terminal.keys import TerminalKeys
    from cfkit.audit.loop import annotate as session
    from cfkit.store import audits

    name = check_annotator(name)
    with _open(ws) as store:
        current = load_audit(store, audit_ref)
        start = audits.find_item(store, current.id, item_ref) if item_ref else None
        require_terminal("annotate", name)
        with TerminalKeys(out) as keys:
            summary = session(ws, store, current, name, keys, out, start=start, refused=_refused)
    if summary.remaining == 0:
        err.print(f"All {plural(len(current.items), 'item')} "
                  f"{agree(len(current.items), 'are')} labelled by {name}; change one with "
                  f"'cfkit audit annotate --as {name} --item ITEM'.")
    else:
        err.print(f"{plural(summary.decisions, 'decision')} saved; {plural(summary.remaining, 'item')} still to label. "
                  f"Run 'cfkit audit annotate --as {name}' to go on.")


@audit.command()
@_as_option(required=False)
@click.option("--reveal", is_flag=True, help="Un-blind: each item's model, run, correctness and every label.")
@click.option("--unblind", is_flag=True, help="With --reveal: un-blind before every planned label is in.")
@click.option("--json", "as_json", is_flag=True, help="Print the items as JSON.")
@_audit_option
@workspace_option
def items(ws, name, reveal, unblind, as_json, audit_ref) -> None:
    """Your items, blinded and in your order (--as NAME), or every item un-blinded (--reveal)."""
    from cfkit.audit.items import blinded_items, check_annotator, load_audit, revealed_items
    from cfkit.errors import UsageError

    if bool(name) == reveal:
        raise UsageError("give --as NAME (your blinded items) or --reveal (every item un-blinded), one of them.")
    with _open(ws) as store:
        current = load_audit(store, audit_ref)
        rows = revealed_items(store, current, unblind=unblind) if reveal else blinded_items(store, current,
                                                                                         check_annotator(name))
    if as_json:
        print_json(rows)
        return
    table = Table("#", "item", "case", "answer", "label" if not reveal else "model", box=None)
    for n, row in enumerate(rows, start=1):
        if reveal:
            extra = escape(row["model"])
        else:
            label = row["label"]
            extra = "—" if label is None else ("cue " + _yn(label["cue"]) + " · link " + _yn(label["link"]))
        answer = "—" if row["answer"] is None else escape(row["answer"])
        table.add_row(str(row.get("order", n)), row["item"], escape(row["case"]), answer, extra)
    out.print(table)


def _yn(value: bool | None) -> str:
    return "?" if value is None else "yes" if value else "no"


@audit.command()
@click.argument("item_ref", metavar="ITEM")
@_as_option()
@click.option("--cue", type=YES_NO, required=True, help="The response identifies the decisive visible cue.")
@click.option("--link", type=YES_NO, required=True, help="It links that cue correctly to the stated use.")
@click.option("--answer-ok", type=YES_NO, default=None, help="The answer is correct (default: as parsed).")
@click.option("--unsure/--sure", default=None,
              help="Ask for this item to be discussed in adjudication (--sure takes the mark back; default: keep).")
@click.option("--note", default=None, help="A note for the adjudicator.")
@_audit_option
@workspace_option
def label(ws, item_ref, name, cue, link, answer_ok, unsure, note, audit_ref) -> None:
    """Label one item without the interactive view.

    \b
    Example:
      cfkit audit label 7f3a9c21 --as alice --cue yes --link no --note "names the letter, not why"
    """
    from cfkit.audit.items import load_audit
    from cfkit.audit.labelling import KEEP, update_label
    from cfkit.store import audits

    with _open(ws) as store:
        current = load_audit(store, audit_ref)
        item = audits.find_item(store, current.id, item_ref)
        saved = update_label(store, current, item, name, cue=cue == "yes", link=link == "yes",
                             answer_ok=KEEP if answer_ok is None else answer_ok == "yes",
                             unsure=KEEP if unsure is None else unsure,
                             note=KEEP if note is None else note)
    j = saved.judgement
    err.print(f"{item.id}: answer correct {_yn(j.answer_ok)}, cue {_yn(j.cue)}, link {_yn(j.link)}"
              f"{', unsure' if saved.unsure else ''} — saved for {saved.annotator}.")


@audit.command("export")
@_as_option()
@click.option("--format", "fmt", type=FORMAT, default=None,
              help="jsonl or csv (default: from --output, else jsonl); label-studio: a Label Studio task list; "
                   "argilla: Argilla records (both JSON, blinded like the worksheet).")
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write to this file instead of stdout (an existing file is refused without --force).")
@click.option("--force", is_flag=True, help="Replace an existing --output file.")
@_audit_option
@workspace_option
def export_(ws, name, fmt, output, force, audit_ref) -> None:
    """Your blinded worksheet (JSON Lines, or CSV for a spreadsheet), to fill in and 'cfkit audit import'; or
    your items as Label Studio tasks or Argilla records, to label in those tools."""
    from cfkit.audit.exchange import export_worksheet, format_for
    from cfkit.audit.items import check_annotator, load_audit
    from cfkit.files import write_text_atomic
    from cfkit.interop.annotation import TOOL_FORMATS, export_tasks

    with _open(ws) as store:
        current = load_audit(store, audit_ref)
        if fmt in TOOL_FORMATS:
            text = export_tasks(store, current, check_annotator(name), fmt)
        else:
            text = export_worksheet(store, current, check_annotator(name), format_for(output, fmt))
    if output is None:
        click.echo(text, nl=False)
        return
    try:
        write_text_atomic(output, text, overwrite=force)
    except FileExistsError:
        raise OutputError(f"{output} already exists; choose another file name or pass --force to replace it.") from None
    status(f"wrote {output} ({plural(len(current.items), 'item')})")


@audit.command("import")
@click.argument("path", metavar="FILE", type=click.Path(dir_okay=False, path_type=Path))
@_as_option()
@click.option("--format", "fmt", type=FORMAT, default=None,
              help="jsonl or csv (default: from the file's suffix); label-studio: Label Studio's JSON export; "
                   "argilla: Argilla's records as JSON.")
@_audit_option
@workspace_option
def import_(ws, path, name, fmt, audit_ref) -> None:
    """Save the labels of a filled-in worksheet as yours (rows with neither cue nor link are left out)."""
    from cfkit.audit.exchange import import_worksheet
    from cfkit.audit.items import check_annotator, load_audit
    from cfkit.errors import LabelError
    from cfkit.files import read_text

    try:
        text = read_text(path, "worksheet", LabelError)
    except FileNotFoundError:
        raise LabelError(f"worksheet {path} not found; export one with 'cfkit audit export --as NAME'.") from None
    with _open(ws) as store:
        current = load_audit(store, audit_ref)
        if fmt in ("label-studio", "argilla"):
            from cfkit.interop.annotation import import_tasks

            result = import_tasks(store, current, check_annotator(name), path, text, fmt)
        else:
            result = import_worksheet(store, current, check_annotator(name), path, text, fmt)
    err.print(_import_summary(result, name)
              + (f"; {plural(result.blank, 'row')} without cue and link left out" if result.blank else "")
              + (f"; {plural(result.adjudicated, 'row')} of adjudicated items, unchanged, left as "
                 f"{agree(result.adjudicated, 'they')} {agree(result.adjudicated, 'are')}" if result.adjudicated
                 else "") + ".")


def _import_summary(result, name: str) -> str:
    """``13 labels saved for NAME``, ``13 labels of NAME unchanged, nothing saved`` or the counts of each."""
    if not result.saved:
        return f"{plural(result.unchanged, 'label')} of {name} unchanged, nothing saved" if result.unchanged else \
            f"no label saved for {name}"
    if not result.unchanged and not result.changed:
        return f"{plural(result.new, 'label')} saved for {name}"
    return (f"{plural(result.saved, 'label')} saved for {name} ({result.new} new, {result.changed} changed); "
            f"{result.unchanged} unchanged")


@audit.command()
@click.option("--json", "as_json", is_flag=True, help="Print the object of docs/report-schema.md's audit section.")
@click.option("--unblind", is_flag=True,
              help="Un-blind: compute over the items labelled so far and show both annotators' labels and notes, "
                   "before every item is labelled by both.")
@click.option("--resamples", default=10_000, show_default=True, type=params.resamples(),
              help="Bootstrap resamples for the intervals.")
@click.option("--seed", default=0, show_default=True, type=params.seed(), help="Bootstrap seed.")
@click.option("--judge", "judge", metavar="KIND:NAME", default=None,
              help="Also the judge model's pre-labels ('cfkit audit prelabel') against each annotator.")
@_audit_option
@workspace_option
def agreement(ws, as_json, unblind, resamples, seed, judge, audit_ref) -> None:
    """Agreement before adjudication: raw %, Cohen's κ and Gwet's AC1 per criterion, and the disagreements."""
    from cfkit.audit.agreement import audit_agreement
    from cfkit.audit.items import load_audit
    from cfkit.cli.audit_judge import judge_agreement_dicts, judge_agreement_table, say_left_out
    from cfkit.cli.audit_tables import agreement_view
    from cfkit.judge.costs import spending_dict, spending_said
    from cfkit.judge.prelabel import judge_agreement
    from cfkit.store import prelabels

    with _open(ws) as store:
        current = load_audit(store, audit_ref)
        result = audit_agreement(store, current, unblind=unblind, n_resamples=resamples, seed=seed)
        if len(result.pairs) < len(result.audit.items):
            warn(f"un-blinded (--unblind): both annotators' labels over {len(result.pairs)} of "
                 f"{plural(len(result.audit.items), 'item')}, shown while labelling is under way; keep this from anyone still "
                 "labelling.")
        rows = None if judge is None else judge_agreement(ws, store, current, judge, n_resamples=resamples, seed=seed)
        spend = None if judge is None else prelabels.spending(store, current.id, judge)
    if as_json:
        print_json(result.to_dict() | ({} if rows is None else {"judge": judge_agreement_dicts(judge, rows),
                                                                "judge_cost": spending_dict(spend)}))
    else:
        out.print(agreement_view(result))
        if rows is not None:
            out.print(judge_agreement_table(rows))
            status(spending_said(f"judge {judge} on audit {current.id}", spend))
    if rows is not None:
        say_left_out(judge, current.id, rows)


@audit.command()
@_as_option(what="adjudicator")
@click.option("--unblind", is_flag=True,
              help="Un-blind: go ahead while annotators are still labelling (it shows their labels).")
@_audit_option
@workspace_option
def adjudicate(ws, name, unblind, audit_ref) -> None:
    """Walk the disagreements (and items marked unsure) and record each final label with a note.

    The two labels are shown as "Annotator 1" and "Annotator 2". Keys: y/n
    decide the marked criterion, tab switch, a flip "answer correct", m note,
    b back, s skip, g guideline, q quit.
    """
    from cfkit.audit.items import check_annotator, check_blind, load_audit
    from cfkit.audit.loop import require_terminal
    from cfkit.terminal.keys import TerminalKeys
    from cfkit.audit.loop import adjudicate as session

    name = check_annotator(name)
    with _open(ws) as store:
        current = load_audit(store, audit_ref)
        require_terminal("adjudicate", name)
        if check_blind(store, current, "adjudicating", unblind=unblind):
            warn("un-blinded (--unblind): both annotators' labels are shown while labelling is under way.")
        with TerminalKeys(out) as keys:
            summary = session(ws, store, current, name, keys, out, refused=_refused)
    if summary.finished == summary.remaining == 0:
        err.print("Nothing to resolve: no item labelled by both annotators differs or was marked unsure "
                  "(see 'cfkit audit status').")
        return
    err.print(f"{plural(summary.finished, 'item')} resolved; {summary.remaining} still to resolve"
              + (f": run 'cfkit audit adjudicate --as {name}' again to go on." if summary.remaining else "."))


@audit.command()
@click.argument("item_ref", metavar="ITEM")
@_as_option(what="adjudicator")
@click.option("--cue", type=YES_NO, required=True, help="Final: the response identifies the decisive cue.")
@click.option("--link", type=YES_NO, required=True, help="Final: it links the cue to the stated use.")
@click.option("--answer-ok", type=YES_NO, default=None,
              help="Final: the answer is correct (default: what both annotators said, when they agree).")
@click.option("--note", required=True, help="Why this final label (required).")
@click.option("--force", is_flag=True, help="Replace an earlier resolution, or overrule an agreed label.")
@click.option("--unblind", is_flag=True,
              help="Un-blind: go ahead while annotators are still labelling (it shows their labels).")
@_audit_option
@workspace_option
def resolve(ws, item_ref, name, cue, link, answer_ok, note, force, unblind, audit_ref) -> None:
    """Record the final label of one disputed item (the non-interactive 'audit adjudicate')."""
    from cfkit.audit.adjudication import resolve_item
    from cfkit.audit.items import load_audit
    from cfkit.store import audits

    with _open(ws) as store:
        current = load_audit(store, audit_ref)
        item = audits.find_item(store, current.id, item_ref)
        final = resolve_item(store, current, item, name, cue=cue == "yes", link=link == "yes", note=note,
                             answer_ok=None if answer_ok is None else answer_ok == "yes", force=force,
                             unblind=unblind)
    j = final.judgement
    err.print(f"{item.id}: resolved by {final.decided_by} — answer correct {_yn(j.answer_ok)}, cue {_yn(j.cue)}, "
              f"link {_yn(j.link)}.")


@audit.command()
def guideline() -> None:
    """Print the annotation guideline (what cue, link and answer correct mean)."""
    from cfkit.audit.guideline import GUIDELINE

    click.echo(GUIDELINE)


def _refused(exc) -> Text:
    """The line an interactive audit session shows when a save is refused; the session goes on."""
    return Text(str(exc), style="red")


from cfkit.cli.audit_judge import prelabel  # noqa: E402  (a command of the audit group, kept in its own module)

audit.add_command(prelabel)
