"""``cfkit edits screen``: a judge model's first pass over the edits, flagging those it doubts."""

from __future__ import annotations

import click
from rich.markup import escape

from cfkit.cli import params
from cfkit.cli.console import err, out, print_json, workspace_option
from cfkit.plural import plural


@click.command("screen")
@click.argument("spec_ids", nargs=-1)
@click.option("--judge", "judge", metavar="KIND:NAME", required=True,
              help="The vision-language model that answers the screening questions, e.g. openai:gpt-5.5.")
@click.option("-o", "--option", "options", metavar="KEY=VALUE", multiple=True,
              help="Backend option of the judge (repeatable), e.g. -o base_url=http://localhost:8000/v1.")
@click.option("--max-tokens", type=params.Integer(1, 65536), default=16, show_default=True,
              help="Token limit of each reply; a reply cut off there is not read and is asked again next run.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (every answer, raw reply included).")
@workspace_option
def screen(ws, spec_ids: tuple[str, ...], judge: str, options: tuple[str, ...], max_tokens: int,
           as_json: bool) -> None:
    """Ask a judge model fixed questions about each edit and flag the edits it doubts.

    For the edit each spec shows (its selected edit, else its newest), the judge
    is asked, one picture at a time: is the cue in the original; is it gone from
    the edit and is the replacement there, on the whole image and inside the mask
    region; does the edit look like a natural photograph. An answer other than a
    good edit's flags the edit. Flags are shown in 'edits list', 'review',
    the contact sheet and the report; they never accept or reject an edit.
    Answers are stored as they come: a second run asks only what is missing.
    The questions are probes/templates/judge-screen.yaml (or the packaged ones).

    \b
    Examples:
      cfkit edits screen --judge openai:gpt-5.5
      cfkit edits screen CF18 CF20 --judge openai:Qwen/Qwen3-VL-8B-Instruct -o base_url=http://localhost:8000/v1
    """
    from cfkit.errors import CheckFailed
    from cfkit.judge.costs import Spent, priced_judge, spending_dict, spending_said
    from cfkit.judge.screen import screen_edits
    from cfkit.options import parse_option_pairs
    from cfkit.store import open_store, screens
    from cfkit.store.records.judge import spending_of

    backend = priced_judge(ws, judge, parse_option_pairs(options))  # priced as 'probe run' prices a model
    spent = Spent()
    with open_store(ws.db_path) as store:
        results = screen_edits(ws, store, backend, judge, spec_ids, max_tokens=max_tokens, spent=spent)
        answers = [a for r in results for a in r.answers]
        # What every stored answer shown cost, earlier runs' too, and the replies about these edits not read yet.
        edit_ids = [r.edit_id for r in results if r.edit_id is not None]
        spend = spending_of(answers + [a for a in screens.answers(store, edit_ids, judge=judge, pending=True)
                                       if a.pending and a.prompt_version == results[0].prompt_version])
    if as_json:  # the edits, and what this run and the stored answers about them cost, as the last line says it
        print_json({"edits": [r.to_dict() for r in results], "this_run": spent.to_dict(),
                    "stored": spending_dict(spend, "answer")})
    else:
        for r in results:
            head = f"{escape(r.spec_id)}" + ("" if r.edit_id is None else f" edit #{r.edit_id}")
            if r.problem is not None:
                out.print(f"{head}: [dim]not screened: {escape(r.problem)}[/]")
            elif r.doubts:
                said = ", ".join(f"{a.question} ({a.answer or 'no valid answer'}, expected {a.expected})"
                                 for a in r.doubts)
                out.print(f"{head}: [yellow]the judge doubts it[/]: {escape(said)}")
            else:
                out.print(f"{head}: [green]clear[/]" + (" (some questions failed)" if r.failed else ""))
            for failure in r.failed:
                out.print(f"  [red]failed[/] {escape(failure)}")
    counts = {s: sum(r.state == s for r in results) for s in ("doubted", "clear", "incomplete", "not screened")}
    version = results[0].prompt_version if results else "—"
    err.print(f"{counts['doubted']} doubted, {counts['clear']} clear, {counts['incomplete']} incomplete, "
              f"{counts['not screened']} not screened (judge {judge}, questions {version}). A doubt flags an edit "
              "for you to look at ('cfkit review'); it never accepts or rejects one.")
    # This run's replies (cut-off ones too), then the stored answers'; said also when the asking stopped.
    if spent.replies or spent.abandoned or answers or spent.stop is not None:
        stored = spending_said(f"judge {judge}'s stored answers about these edits", spend, "answer")
        asked = spent.said() if spent.replies or spent.abandoned else "nothing asked"
        if spent.stop is not None:
            asked += f", {plural(spent.untried, 'question')} not asked (the judge stopped)"
        err.print(f"this run: {asked}; {stored}.", markup=False)
    if spent.stop is not None:  # a key refused, Ctrl-C: said now, after what was stored and spent
        raise spent.stop
    unasked = sum(bool(r.failed) for r in results)  # a doubted edit may have failed questions too
    # Not screened is not done where an edit was there to screen (its files could not be read), or where the spec
    # was asked for by id; a spec with no edit yet, among all of them, is only not made yet.
    unscreened = [r for r in results if r.problem is not None and (spec_ids or r.edit_id is not None)]
    failed = []
    if unasked:
        failed.append(f"{plural(unasked, 'edit')} {'has' if unasked == 1 else 'have'} questions whose requests failed or whose replies were cut off; run the "
                      "command again to ask only those")
    if unscreened:
        failed.append(f"{plural(len(unscreened), 'spec')} could not be screened ({', '.join(r.spec_id for r in unscreened)}: "
                      "see above)")
    if failed:
        raise CheckFailed("; ".join(failed) + ".")
