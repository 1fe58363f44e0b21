"""``cfkit runs show``: one stored run, its settings, counts per condition, failures, and where it stands with the
report (a module of its own, which ``cfkit runs list`` does not load; the command is :mod:`cfkit.cli.runs`'s)."""

from __future__ import annotations

import json

from rich.markup import escape

from cfkit.cli.console import out, print_json
from cfkit.money import Cost, cost_notes
from cfkit.plural import plural

#: Failures listed by 'runs show' before '… and N more' (all of them with --all or --json).
FAILURES_SHOWN = 20


def _failure_groups(failures: list[dict]) -> list[tuple[str, str, list[dict]]]:
    """Failures grouped by (error, what was said), most frequent first."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for f in failures:
        groups.setdefault((f["error"], f["detail"] or ""), []).append(f)
    return sorted(((e, d, g) for (e, d), g in groups.items()), key=lambda item: -len(item[2]))


def _unit(f: dict) -> str:
    return " ".join(part for part in (f["case"], f["pair"], f["condition"]) if part)


def show_run(ws, run_ref: str, show_all: bool, as_json: bool) -> None:
    """What ``cfkit runs show RUN`` prints (see its help)."""
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
                    "cost": Cost.of_run(record).to_dict(),  # as the text says it
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
            ("cost", Cost.of_run(record).shown() or "—"),  # (as runs list gives it)
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
            f"; cfkit reads {plural(differ, 'answer')} otherwise than the file's own extraction" if differ else "") + (
            f"; its replies were made with max_tokens {record.made_with_max_tokens}"
            if record.made_with_max_tokens else "")
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
        out.print(f"[yellow]not sent yet[/] {plural(not_sent, 'planned request')} {'has' if not_sent == 1 else 'have'} no reply yet; {escape(sending.who())} "
                  "is sending the run.")
    elif not_sent:
        why = record.notes.get('stopped') or ("its process is gone" if sending is not None
                                             else "the run stopped before sending them")
        out.print(f"[red]not sent[/] {plural(not_sent, 'planned request')} {'has' if not_sent == 1 else 'have'} no reply at all ({escape(why)}).")
    shown = 0
    for error, detail, group in _failure_groups(failures):
        units = group if show_all else group[: max(FAILURES_SHOWN - shown, 1)]
        shown += len(units)
        more = f" and {len(group) - len(units)} more" if len(units) < len(group) else ""
        out.print(f"[red]{escape(error)}[/] × {len(group)}: {escape(detail or 'no detail recorded')}")
        out.print(f"  {escape(', '.join(_unit(f) for f in units))}{more}")
    if not show_all and len(failures) > shown:
        out.print("(--all or --json lists every failed unit)")
