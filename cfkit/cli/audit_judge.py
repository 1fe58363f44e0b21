"""``cfkit audit prelabel``: a judge model labels every audit item's cue and link, blind, beside the people."""

from __future__ import annotations

import click
from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from cfkit.cli import params
from cfkit.cli.console import err, print_json, warn, workspace_option
from cfkit.plural import plural


@click.command("prelabel")
@click.option("--judge", "judge", metavar="KIND:NAME", required=True,
              help="The vision-language model that labels the items, e.g. openai:gpt-5.5.")
@click.option("-o", "--option", "options", metavar="KEY=VALUE", multiple=True,
              help="Backend option of the judge (repeatable), e.g. -o base_url=http://localhost:8000/v1.")
@click.option("--audit", "audit_ref", metavar="ID", default=None, help="Which audit (default: the newest).")
@click.option("--max-tokens", type=params.Integer(1, 65536), default=16, show_default=True,
              help="Token limit of each reply; a reply cut off there is not read and is asked again next run.")
@click.option("--retry-unanswered", is_flag=True,
              help="Also ask again the stored replies with no valid Yes/No (refused, unclear, empty); valid labels "
                   "stay.")
@click.option("--json", "as_json", is_flag=True, help="Print what was asked as JSON.")
@workspace_option
def prelabel(ws, judge: str, options: tuple[str, ...], audit_ref: str | None, max_tokens: int, retry_unanswered: bool,
             as_json: bool) -> None:
    """Have a judge model label each item's cue and link, blind, as a first pass beside the people.

    The judge sees what an annotator sees (the case, its gold, the rationale, the
    masked response, the image), never the model or run of an item. Its labels
    are kept apart: an audit's progress, agreement and final labels stay the
    people's. Compare them with 'cfkit audit agreement --judge KIND:NAME'; use
    them in 'cfkit report --ega --ega-labels judge|people+judge --judge KIND:NAME'.
    Stored as they come: a second run asks only what is missing. A reply with no
    valid Yes/No is kept as no label; --retry-unanswered asks those again.

    \b
    Example:
      cfkit audit prelabel --judge openai:gpt-5.5
      cfkit audit prelabel --judge openai:gpt-5.5 --retry-unanswered
    """
    from cfkit.audit.items import load_audit
    from cfkit.errors import CheckFailed
    from cfkit.judge.costs import priced_judge
    from cfkit.judge.prelabel import prelabel_audit
    from cfkit.options import parse_option_pairs
    from cfkit.store import open_store

    backend = priced_judge(ws, judge, parse_option_pairs(options))
    with open_store(ws.db_path) as store:
        result = prelabel_audit(ws, store, load_audit(store, audit_ref), backend, judge, max_tokens=max_tokens,
                                retry_unanswered=retry_unanswered)
    if as_json:
        print_json(result.to_dict())
    earlier = (f" ({result.stored_invalid} without a valid Yes/No, not asked again: --retry-unanswered asks them)"
               if result.stored_invalid else "")
    again = (f" ({result.asked_again} of them asked again for want of a valid Yes/No)"
             if retry_unanswered else "")
    untried = f", {result.spent.untried} not asked (the judge stopped)" if result.spent.stop is not None else ""
    err.print(f"judge {judge} (questions {result.prompt_version}) on audit {result.audit}: {plural(result.asked, 'answer')} "
              f"stored now{again}, {result.stored} already stored{earlier}, {result.invalid} without a valid Yes/No, "
              f"{len(result.failed)} failed{untried}; {result.spent.said()}.", markup=False)
    for failure in result.failed[:10]:
        err.print(f"  failed: {failure}", markup=False)
    if result.spent.stop is not None:  # a key refused, Ctrl-C: said now, after what was stored and spent
        raise result.spent.stop
    if result.failed:
        raise CheckFailed(f"{plural(len(result.failed), 'request')} failed or {'was' if len(result.failed) == 1 else 'were'} cut off; run the command again to ask only "
                          "those.")


#: How the table and stderr name each reason an item is left out (cfkit.audit.judge_labels.LEFT_OUT).
_SHORT = {"no_valid_answer": "no valid Yes/No", "stale": "stale", "not_asked": "not asked or failed",
          "no_person_label": "not labelled by the annotator"}
_NONE = {"raw": None, "kappa": None, "kappa_ci": None, "ac1": None, "ac1_ci": None, "table": None,
         "kappa_undefined": None}


def _left_out(row) -> str:
    return ", ".join(f"{count} {_SHORT[why]}" for why, count in row.left_out.items() if count)


def judge_agreement_table(rows) -> Group:
    """The judge's rows, and below them why κ is undefined where it is, as the people's table says it."""
    table = Table(title="The judge against each annotator (its labels never count as an annotator's)",
                  title_justify="left", caption="κ Cohen's, AC1 Gwet's; 95% percentile bootstrap over the items both "
                  "labelled: n of the audit's items; the rest are left out, by reason (stale: asked with an older "
                  "wording of the questions). Annotators by number, never by name.", caption_justify="left",
                  box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, padding=(0, 1, 0, 0))
    for name in ("against", "criterion", "n", "of", "raw %", "κ", "95% CI", "AC1", "95% CI "):
        table.add_column(name, justify="left" if name in ("against", "criterion") else "right", no_wrap=True)
    table.add_column("left out", overflow="fold")
    for row in rows:
        r = row.result
        if r is None:
            table.add_row(f"Annotator {row.annotator}", row.criterion, "0", str(row.items), "—", "—", "—", "—", "—",
                          _left_out(row))
            continue
        table.add_row(f"Annotator {row.annotator}", row.criterion, str(r.n), str(row.items), f"{r.raw:.2f}",
                      "undefined" if r.kappa is None else f"{r.kappa:.3f}",
                      "—" if r.kappa_ci is None else f"[{r.kappa_ci.low:.3f}, {r.kappa_ci.high:.3f}]",
                      f"{r.ac1:.3f}", f"[{r.ac1_ci.low:.3f}, {r.ac1_ci.high:.3f}]", _left_out(row) or "—")
    reasons = [Text(f"{row.criterion}: {row.result.kappa_undefined}", style="yellow")
               for row in rows if row.result is not None and row.result.kappa_undefined]
    return Group(table, *reasons)


def judge_agreement_dicts(judge: str, rows) -> list[dict]:
    """The rows as ``audit agreement --json`` gives them under ``judge``."""
    from cfkit.audit.agreement import agreement_dict

    return [{"judge": judge, "against": f"Annotator {r.annotator}", "criterion": r.criterion, "items": r.items,
             **(_NONE if r.result is None else agreement_dict(r.result)), "n": r.n, "left_out": dict(r.left_out),
             **({"mixed_models": r.mixed} if r.mixed else {})}
            for r in rows]


def say_left_out(judge: str, audit_id: str, rows) -> None:
    """One line on stderr for each row that leaves items out; exit status 1 when the judge's labels are what is
    missing (the next 'audit prelabel' fills them), as for a report's EGA built on the judge's labels."""
    from cfkit.errors import Incomplete

    for mixed in {row.mixed for row in rows if row.mixed}:
        warn(mixed)
    for row in rows:
        if row.n < row.items:
            warn(f"judge {judge} against Annotator {row.annotator} on {row.criterion}: {row.n} of {plural(row.items, 'item')} "
                 f"of audit {audit_id}; left out: {_left_out(row)}.")
    judged = {why for row in rows for why, count in row.left_out.items() if count and why != "no_person_label"}
    if not judged:
        return
    fixes = []
    if judged & {"stale", "not_asked"}:
        fixes.append(f"'cfkit audit prelabel --judge {judge}' asks those not asked, failed or stale")
    if "no_valid_answer" in judged:
        fixes.append(f"'cfkit audit prelabel --judge {judge} --retry-unanswered' asks again those without a valid "
                     "Yes/No")
    raise Incomplete("the judge's agreement leaves out items it has no label of; " + "; ".join(fixes) + ".")
