"""``cfkit runs`` (list, show, rm, export, import, reparse, unparsed): the probe runs stored in the workspace."""

from __future__ import annotations

import click
from rich.markup import escape

from cfkit.cli.console import out, print_json, status, warn, workspace_option
from cfkit.errors import CheckFailed, OutputError
from cfkit.money import Cost
from cfkit.plural import agree, plural

@click.group()
def runs() -> None:
    """Stored probe runs: list, show, rm, export, import, reparse, unparsed."""


@runs.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@workspace_option
def list_(ws, as_json: bool) -> None:
    """List runs, newest first."""
    from dataclasses import asdict

    shown: dict[str, str] = {}
    stand: dict = {}
    if not ws.db_path.is_file():
        records = []  # listing must not create a store
    else:
        from cfkit.store import open_store
        from cfkit.store.leases import statuses
        from cfkit.store.runs import list_runs

        with open_store(ws.db_path) as store:
            records = list_runs(store)
            shown = statuses(store, records)  # a run marked running whose process is gone says so
            if records:  # which run the report reads, and stale answers, as the report tells them
                from cfkit.report.standing import standings
                stand = standings(ws, store, records)
    if as_json:
        print_json([asdict(r) | {"shown_status": shown[r.id], "report": stand[r.id].to_dict(),
                                 "cost": Cost.of_run(r).to_dict()} for r in records])  # as the table says it
        return
    if not records:
        status(f"no runs in {ws.root} yet; start one with 'cfkit probe run'.")
        return
    from cfkit.store.leases import GONE, RESUME

    if any(text == GONE for text in shown.values()):
        status(f"a run shown as {GONE} was stopped before it could record how it ended; {RESUME}.")
    from rich.table import Table  # only where a table is drawn

    title = f"Runs in {escape(str(ws.db_path))}"
    table = Table(title=title, title_justify="left")
    for column, justify in (("run", "left"), ("model", "left"), ("suite", "left"), ("status", "left"),
                            ("done", "right"), ("errors", "right"), ("cost", "right"), ("started (UTC)", "left"),
                            ("report", "left")):
        table.add_column(column, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    rows = []
    for r in records:
        s = stand[r.id]
        rows.append((r.id, escape(r.model), r.suite,
                     escape(shown[r.id]) + (" (subset)" if r.subset else "") + (" (imported)" if r.imported else "")
                     + (f" [yellow]({s.stale} stale)[/]" if s.stale else " [yellow](stale?)[/]" if s.stale is None
                        else ""),
                     f"{r.n_done}/{r.n_requests}", str(r.n_errors), run_cost(r, short=True),
                     r.started_at[:16].replace("T", " "), "[bold]read[/]" if s.read else escape(s.short)))
        table.add_row(*rows[-1])
    if out.measure(table, options=out.options.update_width(10_000)).maximum <= out.width:
        out.print(table)
    else:
        # Too narrow for the table without folding run ids (which are then hard to copy): one run is its
        # id on a line of its own, whole, and what it holds on the next (the id names its suite and model).
        out.print(title)
        for run_id, model, _suite, state, done, errors, cost, started, _read in rows:
            s = stand[run_id]
            out.print(run_id, style="bold", soft_wrap=True)
            out.print(f"  {model}: {state}, {plural(done, 'reply', 'replies')}, {errors} failed, cost {cost}, started {started} UTC; "
                      + f"report: {'[bold]read[/]' if s.read else escape(s.short)}")
    status("report: 'read' marks the run 'cfkit report' reads for its model and suite (older: a newer run "
           "superseded it; left out: 'cfkit runs show RUN' says why).")
    # Stale answers (or not checked: a cases file that cannot be read), one line for the runs of each reason, as
    # the view says them: a case changed under many runs is said once, the runs counted and the first few named.
    from cfkit.report.standing import stale_groups

    flagged = [r for r in records if stand[r.id].stale is None or stand[r.id].stale]
    stale = [r for r in flagged if stand[r.id].stale]
    if len(stale) > 1:
        warn(f"{plural(len(stale), 'run')} "
             f"{agree(len(stale), 'have')} answers stale now (marked 'stale': their case, caption, image, edit, "
             "gold labels or prompt changed since they ran), which a report counts wrong; the lines below say why; "
             "'cfkit runs show RUN' says what asks a run again.")
    for group in stale_groups(flagged, stand):
        warn(group.line(stand[group.runs[0].id]))


def run_cost(record, *, short: bool = False) -> str:
    """A run's cost as far as known: "—" without prices, "at least …" when some replies' cost is not reported,
    with what attempts abandoned after they were sent may add."""
    return Cost.of_run(record).shown(short=short) or "—"


@runs.command()
@click.argument("run_ref", metavar="RUN")
@click.option("--all", "show_all", is_flag=True, help="List every failed unit, not only the first ones.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@workspace_option
def show(ws, run_ref: str, show_all: bool, as_json: bool) -> None:
    """Show a run: settings, versions, counts per condition, and every failure with its reason.

    RUN is a run id or a unique start of one. A failure's reason is what the
    server said after the retries (or why nothing was sent); a run that
    stopped on an error says which.
    """
    from cfkit.cli.runs_show import show_run  # (its own module: runs list does not load it)

    show_run(ws, run_ref, show_all, as_json)


@runs.command("rm")
@click.argument("run_refs", metavar="RUN…", nargs=-1, required=True)
@click.option("--drop-cached", is_flag=True,
              help="Also drop the cached responses the run's replies were stored under, so that the same "
                   "'cfkit probe run' asks the model again (e.g. after a server answered as another model).")
@workspace_option
def rm(ws, run_refs: tuple[str, ...], drop_cached: bool) -> None:
    """Remove runs and their replies; the response cache stays unless --drop-cached.

    RUN is a run id or a unique start of one. Because cached responses stay,
    running the same 'cfkit probe run' command again rebuilds a removed run
    without asking the model again; with --drop-cached it asks again, and
    pays again, for every request the removed run had answered.
    """
    from cfkit.store import open_store
    from cfkit.store.runs import delete_run, find_run

    with open_store(ws.db_path) as store:
        records = [find_run(store, ref) for ref in run_refs]  # every id is checked before anything is removed
        for record in {r.id: r for r in records}.values():
            removed, dropped = delete_run(store, record.id, drop_cached=drop_cached)
            out.print(record.id)
            status(f"removed run {record.id} ({record.model}, {record.suite}) and its {plural(removed, 'reply', 'replies')}; "
                   + (f"dropped {plural(dropped, 'cached response')}: the same command asks the model again."
                      if drop_cached else "cached responses stay."))


@runs.command()
@click.argument("run_ref", metavar="RUN")
@click.option("--format", "fmt", default="predictions", show_default=True,
              type=click.Choice(("predictions", "jsonl", "csv", "parquet", "inspect", "lmms", "vlmevalkit")),
              help="predictions: the predictions JSONL; jsonl / csv / parquet: every stored field of each reply "
                   "(server model, fingerprint, reasoning, edit and image hash, tokens, latency, cost); inspect: an "
                   "inspect_ai log (.eval or .json); lmms: an lmms-eval samples JSONL and its results file; "
                   "vlmevalkit: a prediction table (.tsv, .csv or .xlsx). The peers' formats carry every field too.")
@click.option("--output", type=click.Path(dir_okay=False), default=None,
              help="Write to this file instead of stdout (an existing file is refused without --force).")
@click.option("--force", is_flag=True, help="Replace an existing --output file.")
@workspace_option
def export(ws, run_ref: str, fmt: str, output: str | None, force: bool) -> None:
    """Export a run: as predictions JSONL (the input of replay: and 'cfkit report --predictions'), every stored
    field, or another harness's format.

    \b
    Examples:
      cfkit runs export contextcanvas-gpt-5.5 > gpt.jsonl
      cfkit runs export contextcanvas-gpt-5.5 --format parquet --output gpt.parquet
      cfkit runs export contextcanvas-gpt-5.5 --format inspect --output gpt.eval
    """
    from cfkit.interop.exporting import export_run

    result = export_run(ws, run_ref, fmt, output, force=force)
    record = result.run
    if not record.complete:
        shown = record.status
        if shown == "running":  # who sends it, or that its process is gone (cfkit.store.leases)
            from cfkit.store import open_store
            from cfkit.store.leases import statuses
            with open_store(ws.db_path) as store:
                shown = statuses(store, [record])[record.id]
        warn(f"run {record.id} is {shown} ({record.n_done}/{plural(record.n_requests, 'reply', 'replies')}, "
             f"{record.n_errors} failed); the export holds what it has.")
    if result.text is not None:
        click.echo(result.text, nl=False)
        return
    status(f"wrote {', '.join(str(p) for p in result.written)}")


@runs.command("import")
@click.argument("path", metavar="FILE", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", default="auto", show_default=True,
              type=click.Choice(("auto", "native", "export", "inspect", "lmms", "vlmevalkit")),
              help="The file's format (auto: told from its name and content).")
@click.option("--map", "map_path", metavar="FILE", default=None,
              help="The file's sample ids mapped to case ids (CSV/TSV: peer id, case id; or a JSON object).")
@click.option("--label", default=None, metavar="NAME", help="The model's name (else the one the file records).")
@click.option("--epoch", type=click.IntRange(min=1), default=None, metavar="N",
              help="The epoch to read of an inspect_ai log that holds several (inspect eval --epochs).")
@workspace_option
def import_(ws, path: str, fmt: str, map_path: str | None, label: str | None, epoch: int | None) -> None:
    """Store a results file as replay runs: a 'runs export', predictions JSONL, an inspect_ai log, an lmms-eval
    samples file or a VLMEvalKit table.

    A peer's replies are read again with cfkit's parser, and the command says
    how many answers differ from the peer's own extraction. A file whose
    sample ids are not this workspace's cases is refused (map them with --map).

    Exit status: 0 when every run is stored with most of its requests
    answered (failed, empty, cut-off or unread replies are said, and a report
    counts them wrong); 1 when most requests of a run got no reply (failed or
    empty, as 'probe run' ends on mostly empty replies); 2 for a file that
    cannot be read.

    \b
    Examples:
      cfkit runs import logs/2026-11-02T10-00_contextcanvas.eval
      cfkit runs import outputs/Qwen2-VL-7B/Qwen2-VL-7B_ContextCanvas.xlsx
      cfkit runs import samples_contextcanvas.jsonl --label llava-ov-7b --map ids.csv
    """
    from cfkit.cli.probe_replies import stored_trouble
    from cfkit.interop.exporting import import_file
    from cfkit.store import open_store
    from cfkit.store.runs import count_unanswered, get_run

    imported, stored = import_file(ws, path, fmt=fmt, map_path=map_path, label=label, epoch=epoch)
    if (line := imported.summary()) is not None:
        status(line)
    for line in (imported.unfinished_warning(), imported.left_out_warning(), imported.target_warning()):
        if line is not None:
            warn(line)
    short = []  # runs stored with most requests unanswered: the command then ends with exit status 1
    unanswered = 0  # how many requests of those runs got no reply
    with open_store(ws.db_path) as store:
        for run in stored:
            out.print(run.run_id)
            status(f"stored run {run.run_id} ({escape(run.model)}, {run.suite}): {plural(run.replies, 'reply', 'replies')}"
                   + (f", {run.errors} failed" if run.errors else "") + ".")
            if run.status != "done" or run.requests > run.replies:
                unsent = run.requests - run.replies
                warn(f"run {run.run_id} is {run.status}, as its file records it"
                     + (f": {unsent} of its {plural(run.requests, 'planned request')} {'has' if unsent == 1 else 'have'} no reply, which a report counts "
                        "wrong (absent)" if unsent else "") + "; 'cfkit runs show' says what it holds.")
            elif run.cases is not None and run.replies < run.cases:
                status(f"  it answers {run.replies} of the suite's {plural(run.cases, 'case')}: a report counts the other "
                       f"{run.cases - run.replies} wrong (absent) and marks its row (incomplete).")
            # Replies cut off, empty or unread: the line 'probe run' ends with and 'runs show' repeats.
            record, counts = get_run(store, run.run_id), count_unanswered(store, run.run_id)
            if record is not None and (trouble := stored_trouble(ws, store, record, counts)) is not None:
                warn(trouble)
            empty = counts[2]
            if (run.errors + empty) * 2 > run.requests:
                short.append(f"{run.run_id}: {run.errors + empty} of {run.requests}")
                unanswered += run.errors + empty
    if short:
        raise CheckFailed(f"most requests of {plural(len(short), 'imported run')} got no reply ({'; '.join(short)}: "
                          f"failed, or empty; said above): {agree(unanswered, 'they')} {agree(unanswered, 'are')} "
                          f"stored, and a report counts {agree(unanswered, 'them')} wrong.")


#: Characters of a reply's text 'runs unparsed' shows before '… (N more characters)' (all of it with --json).
TEXT_SHOWN = 2000


@runs.command()
@click.argument("run_ref", metavar="RUN")
@click.option("--all", "everything", is_flag=True,
              help="Re-read every reply the parser reads, not only those an older parser version read.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@workspace_option
def reparse(ws, run_ref: str, everything: bool, as_json: bool) -> None:
    """Read a run's stored replies again with the current parser; no model is asked.

    Prints how many answers changed and how (old → new, with the rule or the
    reason), and stores the new readings with the parser's version, so
    'cfkit report' reflects them. Answers a backend gave already read (replay,
    baselines) and transport failures are left as they are.

    \b
    Examples:
      cfkit runs reparse contextcanvas-gpt-5.5-1a2b3c4d
      cfkit runs reparse contextcanvas-gpt-5.5 --all
    """
    from dataclasses import asdict

    from cfkit.dataset import load_cases
    from cfkit.probe.reparse import reparse_run
    from cfkit.store import open_store
    from cfkit.store.runs import find_run

    cases = load_cases(ws.cases_path, ws.image_root)
    with open_store(ws.db_path) as store:
        result = reparse_run(store, cases, find_run(store, run_ref), everything=everything)
    if as_json:
        print_json(asdict(result) | {"why": [{"change": change, "count": n} for change, n in result.why()]})
        return
    out.print(result.run_id)
    status(f"re-read {plural(result.reread, 'reply', 'replies')} with parser version {result.parser}: {len(result.changed)} "
           f"answers changed; {result.current} already read by this version"
           f"{' (--all reads them again)' if result.current else ''}, {result.not_parsed} not the parser's "
           "(known answers, refusals, transport failures).")
    for change, n in result.why():
        out.print(f"{n} × {escape(change)}")
    for c in result.changed:
        out.print(f"  {escape(c.unit)}: {escape(c.old.describe())} → {escape(c.new.describe())}"
                  + (f": {escape(c.detail)}" if c.detail else ""))
    if result.missing_case:
        gone = len(result.missing_case)
        warn(f"{plural(gone, 'case')} {agree(gone, 'are')} no longer in {ws.cases_path} and kept "
             f"{agree(gone, 'their')} readings: {', '.join(result.missing_case[:8])}{' …' if len(result.missing_case) > 8 else ''}")


@runs.command()
@click.argument("run_ref", metavar="RUN")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (with each reply's whole text).")
@workspace_option
def unparsed(ws, run_ref: str, as_json: bool) -> None:
    """List the replies of a run that gave no answer, with their text.

    Each one shows why no answer was read (ambiguous, conflicting, missing,
    unparseable, refused) and the reply as stored; control characters in it
    are shown as visible symbols. Transport failures have no text; 'cfkit
    runs show' lists them.
    """
    from dataclasses import asdict

    from cfkit.probe.reparse import unparsed as unparsed_replies
    from cfkit.store import open_store
    from cfkit.store.runs import find_run

    with open_store(ws.db_path) as store:
        record = find_run(store, run_ref)
        found = unparsed_replies(store, record)
    if as_json:
        print_json([asdict(r) for r in found])
        return
    status(f"{plural(len(found), 'reply', 'replies')} of {record.id} gave no answer.")
    for r in found:
        unit = " ".join(part for part in (r.case_id, r.pair_id, r.condition) if part)
        out.print(f"[bold]{escape(unit)}[/]  [red]{escape(r.error or '?')}[/]"
                  + (f": {escape(r.detail)}" if r.detail else "")
                  + (" [yellow](cut off at the token limit)[/]" if r.truncated else ""))
        text = r.raw or ""
        more = f"\n  … ({plural(len(text) - TEXT_SHOWN, 'more character', spec=',')}; --json shows all)" if len(text) > TEXT_SHOWN else ""
        out.print("  " + escape(text[:TEXT_SHOWN]).replace("\n", "\n  ") + more)
