"""``cfkit runs reparse`` and ``cfkit runs unparsed``: a stored run's replies read again, and those that gave no
answer (commands of the ``cfkit runs`` group, :mod:`cfkit.cli.runs`)."""

from __future__ import annotations

import click
from rich.markup import escape

from cfkit.cli.console import out, print_json, status, warn, workspace_option
from cfkit.plural import plural


#: Characters of a reply's text 'runs unparsed' shows before '… (N more characters)' (all of it with --json).
TEXT_SHOWN = 2000


@click.command()
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
        warn(f"{len(result.missing_case)} case(s) are no longer in {ws.cases_path} and kept their readings: "
             f"{', '.join(result.missing_case[:8])}{' …' if len(result.missing_case) > 8 else ''}")


@click.command()
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
        more = f"\n  … ({len(text) - TEXT_SHOWN:,} more characters; --json shows all)" if len(text) > TEXT_SHOWN else ""
        out.print("  " + escape(text[:TEXT_SHOWN]).replace("\n", "\n  ") + more)
