"""``cfkit runs`` (list, show, rm, export, import, reparse, unparsed): the probe runs stored in the workspace."""

from __future__ import annotations

import json

import click
from rich.markup import escape

from cfkit.cli.console import out, print_json, status, warn, workspace_option
from cfkit.errors import CheckFailed, OutputError
from cfkit.money import Cost, cost_notes
from cfkit.plural import plural

#: Failures listed by 'runs show' before '… and N more' (all of them with --all or --json).
FAILURES_SHOWN = 20


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
        print_json([asdict(r) | {"shown_status": shown[r.id], "report": stand[r.id].to_dict()} for r in records])
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
            out.print(f"  {model}: {state}, {done} replies, {errors} failed, cost {cost}, started {started} UTC; "
                      + ("[bold]read by the report[/]" if s.read else f"report: {escape(s.short)}"))
    status("report: 'read' marks the run 'cfkit report' reads for its model and suite (older: a newer run "
           "superseded it; left out: 'cfkit runs show RUN' says why).")
    for why in {s.stale_why for s in stand.values() if s.stale is None}:  # (a cases file that cannot be read)
        warn(f"whether the runs' answers are stale was not checked: {why}")
    stale = [r for r in records if stand[r.id].stale]
    if len(stale) == 1:
        warn(stand[stale[0].id].stale_line(stale[0]) or "")
    elif stale:
        warn(f"{plural(len(stale), 'run')} have answers stale now (marked 'stale': their case, caption, image, edit, "
             "gold labels or prompt changed since they ran), which a report counts wrong; 'cfkit runs show RUN' says "
             "why and what asks them again.")


def run_cost(record, *, short: bool = False) -> str:
    """A run's cost as far as known: "—" without prices, "at least …" when some replies' cost is not reported,
    with what attempts abandoned after they were sent may add."""
    return Cost.of_run(record).shown(short=short) or "—"


def _failure_groups(failures: list[dict]) -> list[tuple[str, str, list[dict]]]:
    """Failures grouped by (error, what was said), most frequent first."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for f in failures:
        groups.setdefault((f["error"], f["detail"] or ""), []).append(f)
    return sorted(((e, d, g) for (e, d), g in groups.items()), key=lambda item: -len(item[2]))


def _unit(f: dict) -> str:
    return " ".join(part for part in (f["case"], f["pair"], f["condition"]) if part)


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
    from dataclasses import asdict

    from rich.table import Table

    from cfkit.backends.replicas import NOTE_START
    from cfkit.cli.probe_replies import breakdown, stored_trouble
    from cfkit.store import batches, open_store
    from cfkit.servers import asked_name, servers_of
    from cfkit.store.leases import sending_of
    from cfkit.store.runs import find_run, servers, unanswered

    with open_store(ws.db_path) as store:
        record = find_run(store, run_ref)
        sending = sending_of(store, [record.id])[record.id] if record.status == "running" else None
        sent_in = [{"id": b.id, "status": b.status, "counts": b.counts, "collected_at": b.collected_at,
                    "requests": len(b.requests), "errors": list(b.errors)} for b in batches.for_run(store, record.id)]
        counts = breakdown(store, record.id)
        failures = [{"case": r.case_id, "pair": r.pair_id, "condition": r.condition, "error": r.error or "?",
                     "detail": r.detail} for r in unanswered(store, record.id)]
        n_stored = sum(c.replies for c in counts)
        answered_by = servers_of(servers(store, record.id))
        trouble = None if as_json else stored_trouble(ws, store, record)
        from cfkit.report.standing import standings
        from cfkit.store.runs import list_runs
        stand = standings(ws, store, list_runs(store), check=[record.id])[record.id]
    not_sent = max(record.n_requests - n_stored, 0)
    if as_json:
        print_json({"run": asdict(record), "shown_status": sending.shown() if sending else record.status,
                    "conditions": [asdict(c) for c in counts], "failures": failures,
                    "not_sent": not_sent, "batches": sent_in, "report": stand.to_dict(),
                    "servers": {"models": answered_by.models, "builds": answered_by.builds,
                                "other_than_asked": answered_by.other_than(asked_name(record.model, record.replayed))}})
        return
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold cyan", no_wrap=True)
    grid.add_column()
    generation = record.settings.get("generation") or {}
    rows = [("run", record.id), ("model", record.model), ("suite", record.suite),
            ("status", (sending.shown() if sending else record.status)
             + (" (a subset of the suite)" if record.subset else "")),
            ("replies", f"{record.n_done}/{record.n_requests}"), ("errors", str(record.n_errors)),
            ("cost", run_cost(record)),
            ("report", "read: the numbers of 'cfkit report' for this model and suite come from this run" if stand.read
             else f"not read ({stand.why}); "
             + (f"the report reads {stand.reads}" if stand.reads else "it reads no run of this model and suite")
             + f"; 'cfkit report --run {record.id}' reads this one"),
            ("started", record.started_at), ("finished", record.finished_at or "—"),
            ("endpoint", record.endpoint or "—"), ("protocol", record.protocol or "default"),
            ("generation", (", ".join(f"{k} {v}" for k, v in generation.items()) or "not recorded")
             + (" (not applied: the replies were replayed as recorded)" if record.replayed and generation else "")),
            ("selection", ", ".join(f"{k} {v}" for k, v in record.selection.items() if v) or "the whole suite"),
            ("versions", ", ".join(f"{k} {v}" for k, v in record.versions.items()) or record.cfkit_version),
            ("templates", (record.templates_sha256 or "")[:16]),
            ("options", json.dumps(record.options.get("options", {}), sort_keys=True))]
    imported = record.imported
    if imported is not None:  # read from a file, not asked: how cfkit would ask does not apply
        differ = len(imported.get("peer_disagrees") or ())
        source = f"from {imported.get('from')} ({imported.get('format')} file)" + (
            f"; cfkit reads {differ} answer(s) otherwise than the file's own extraction" if differ else "")
        asking = ("endpoint", "protocol", "generation", "selection", "versions", "templates", "options")
        rows = [row for row in rows if row[0] not in asking] + [("imported", source)]
    if answered_by.models or answered_by.builds:  # as the server named itself in its replies
        rows.append(("servers", "; ".join(filter(None, (
            answered_by.models_phrase(),
            answered_by.builds and "build " + answered_by.builds_phrase())))))
    if record.notes.get("prices"):
        rows.append(("prices", str(record.notes["prices"])))
    rows += [("cost note", note) for note in cost_notes(record.notes.get("backend_notes"))]
    rows += [("replicas", note) for note in record.notes.get("backend_notes") or () if note.startswith(NOTE_START)]
    if record.error:
        rows.append(("failed", record.error))
    if record.notes.get("stopped"):
        rows.append(("stopped", record.notes["stopped"]))
    if sending is not None:
        from cfkit.store.leases import RESUME

        rows.append(("sent by", sending.who() + ("" if sending.live else f"; {RESUME}")))
    for b in sent_in:
        done = f", {b['counts'].get('completed', 0)}/{b['counts'].get('total', b['requests'])} done" if b["counts"] else ""
        rows.append(("batch", f"{b['id']}: {b['status']}{done}, "
                              + (f"collected {b['collected_at']}" if b["collected_at"] else "not collected yet")))
    for name, value in rows:
        grid.add_row(name, escape(str(value)))
    out.print(grid)
    table = Table(title="Replies by condition", title_justify="left")
    for column in ("condition", "replies", "answered", "invalid", "cut off", "failed", "answers"):
        table.add_column(column)
    for c in counts:
        table.add_row(escape(c.condition), str(c.replies), str(c.answered), str(c.invalid), str(c.truncated),
                      str(c.transport), escape(", ".join(f"{k}: {v}" for k, v in c.answers.items())))  # option ids are data
    out.print(table)
    if trouble is not None:
        out.print(f"[yellow]replies[/] {escape(trouble)}")
    if (line := stand.stale_line(record)) is not None:  # as the report marks them (cfkit.report.standing)
        out.print(f"[yellow]stale[/] {escape(line)}")
    asked = asked_name(record.model, record.replayed)
    said = answered_by.lines(f"{record.model} {record.suite}", record.id, asked)
    noted = answered_by.other_than(asked) is not None  # the last line, a note: in yellow
    for i, line in enumerate(said):
        out.print(f"[{'yellow' if noted and i == len(said) - 1 else 'red'}]servers[/] {escape(line)}")
    if not_sent and sending is not None and sending.live:
        out.print(f"[yellow]not sent yet[/] {not_sent} planned request(s) have no reply yet; {escape(sending.who())} "
                  "is sending the run.")
    elif not_sent:
        why = record.notes.get('stopped') or ("its process is gone" if sending is not None
                                             else "the run stopped before sending them")
        out.print(f"[red]not sent[/] {not_sent} planned request(s) have no reply at all ({escape(why)}).")
    shown = 0
    for error, detail, group in _failure_groups(failures):
        units = group if show_all else group[: max(FAILURES_SHOWN - shown, 1)]
        shown += len(units)
        more = f" and {len(group) - len(units)} more" if len(units) < len(group) else ""
        out.print(f"[red]{escape(error)}[/] × {len(group)}: {escape(detail or 'no detail recorded')}")
        out.print(f"  {escape(', '.join(_unit(f) for f in units))}{more}")
    if not show_all and len(failures) > shown:
        out.print("(--all or --json lists every failed unit)")


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
        warn(f"run {record.id} is {shown} ({record.n_done}/{record.n_requests} replies, "
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
    for line in (imported.unfinished_warning(), imported.target_warning()):
        if line is not None:
            warn(line)
    short = []  # runs stored with most requests unanswered: the command then ends with exit status 1
    with open_store(ws.db_path) as store:
        for run in stored:
            out.print(run.run_id)
            status(f"stored run {run.run_id} ({escape(run.model)}, {run.suite}): {run.replies} replies"
                   + (f", {run.errors} failed" if run.errors else "") + ".")
            if run.status != "done" or run.requests > run.replies:
                unsent = run.requests - run.replies
                warn(f"run {run.run_id} is {run.status}, as its file records it"
                     + (f": {unsent} of its {run.requests} planned request(s) have no reply, which a report counts "
                        "wrong (absent)" if unsent else "") + "; 'cfkit runs show' says what it holds.")
            elif run.cases is not None and run.replies < run.cases:
                status(f"  it answers {run.replies} of the suite's {run.cases} cases: a report counts the other "
                       f"{run.cases - run.replies} wrong (absent) and marks its row (incomplete).")
            # Replies cut off, empty or unread: the line 'probe run' ends with and 'runs show' repeats.
            record, counts = get_run(store, run.run_id), count_unanswered(store, run.run_id)
            if record is not None and (trouble := stored_trouble(ws, store, record, counts)) is not None:
                warn(trouble)
            empty = counts[2]
            if (run.errors + empty) * 2 > run.requests:
                short.append(f"{run.run_id}: {run.errors + empty} of {run.requests}")
    if short:
        raise CheckFailed(f"most requests of {len(short)} imported run(s) got no reply ({'; '.join(short)}: failed, "
                          "or empty; said above): they are stored, and a report counts them wrong.")


from cfkit.cli.runs_replies import reparse, unparsed  # noqa: E402 - the group's other commands

runs.add_command(reparse)
runs.add_command(unparsed)
