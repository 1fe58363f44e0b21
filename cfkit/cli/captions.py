"""``cfkit captions``: the Text / Neutral / Evidence / Image conditions and the leakage lint."""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape

from cfkit.cli.console import err, out, print_json, status, warn, workspace_option
from cfkit.errors import OutputError, UsageError
from cfkit.plural import agree, plural

#: Where a drafting model's prices are given, said when it has none.
PRICES_HINT = "give the model's prices: -o price_in=… -o price_out=…, or cfkit.toml [probe.prices]"
CONDITION_CHOICE = click.Choice(["text", "neutral", "evidence", "image"])


@click.group()
def captions() -> None:
    """Captions for the modality probe: build, lint, show and draft.

    A caption file captions/CASE.yaml holds 'neutral' (what is visible, with no
    names and no verdict), 'evidence' (the decisive visible cue), 'author' and
    'reviewed'. Templates: cfkit's defaults, replaced file by file from
    probes/templates/.
    """


@captions.command()
@click.argument("case_ids", nargs=-1)
@click.option("--subset", metavar="FILE", default=None,
              help="Case ids, one a line (default: the configured [probe] modality_subset).")
@click.option("--all-cases", is_flag=True, help="Every case of the cases file instead of the subset.")
@click.option("--condition", "conditions", type=CONDITION_CHOICE, multiple=True,
              help="Only these conditions (repeatable; default: all four).")
@click.option("--output", "out_path", metavar="FILE.jsonl", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="Write JSONL here instead of stdout.")
@click.option("--force", is_flag=True, help="Replace an existing --output file.")
@workspace_option
def build(ws, case_ids: tuple[str, ...], subset: str | None, all_cases: bool, conditions: tuple[str, ...],
          out_path: Path | None, force: bool) -> None:
    """Render the four conditions of each case as JSONL, for inspection.

    One line per case and condition: case, condition, system, user, images.

    \b
    Example:
      cfkit captions build --subset modality-100.txt --output conditions.jsonl
    """
    import sys

    from cfkit.prompts import CONDITIONS, build_conditions, conditions_jsonl
    from cfkit.files import write_text_atomic

    rendered = build_conditions(ws, case_ids, subset=subset, all_cases=all_cases, conditions=conditions or CONDITIONS)
    text = conditions_jsonl(rendered, ws.root)
    if out_path is None:
        sys.stdout.write(text)
        return
    if out_path.exists() and not force:
        raise OutputError(f"{out_path} already exists; choose another --output file or pass --force to replace it.")
    write_text_atomic(out_path, text)
    n_cases = len({r.case for r in rendered})
    status(f"Wrote {plural(len(rendered), 'prompt')} for {plural(n_cases, 'case')} to {out_path}")


@captions.command()
@click.argument("case_ids", nargs=-1)
@click.option("--subset", metavar="FILE", default=None,
              help="Case ids, one a line (default: the configured [probe] modality_subset).")
@click.option("--all-cases", is_flag=True, help="Every case of the cases file instead of the subset.")
@click.option("--json", "as_json", is_flag=True, help="Print findings as JSON.")
@workspace_option
def lint(ws, case_ids: tuple[str, ...], subset: str | None, all_cases: bool, as_json: bool) -> None:
    """Check captions for names, verdict words, missing evidence and unreviewed drafts.

    Exits 1 when any finding is an error; warnings (unreviewed drafts) do not
    fail. Extend the verdict words with probes/verdict-words.txt.

    \b
    Example:
      cfkit captions lint HB084 HB120
    """
    from cfkit.lint import lint_captions
    from cfkit.errors import CheckFailed

    report = lint_captions(ws, case_ids, subset=subset, all_cases=all_cases)
    if as_json:
        print_json({"ok": report.ok, "cases": len(report.cases), "files": report.files,
                    "errors": len(report.errors), "warnings": len(report.warnings),
                    "findings": [f.as_dict(ws.root) for f in report.findings]})
    else:
        for f in report.findings:
            style = "red" if f.level == "error" else "yellow"
            out.print(f"[{style}]{f.level}[/] {escape(f.describe(ws.root))}")
        err.print(f"{plural(len(report.cases), 'case')}, {plural(report.files, 'caption file')}: "
                  f"{plural(len(report.errors), 'error')}, {plural(len(report.warnings), 'warning')}.")
    if not report.ok:
        raise CheckFailed(f"caption lint found {plural(len(report.errors), 'error')}; fix the files named above.")


@captions.command()
@click.argument("case_id")
@click.option("--condition", "conditions", type=CONDITION_CHOICE, multiple=True,
              help="Only these conditions (repeatable; default: all four).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@workspace_option
def show(ws, case_id: str, conditions: tuple[str, ...], as_json: bool) -> None:
    """Print the conditions of a case exactly as a model receives them.

    \b
    Example:
      cfkit captions show HB084 --condition neutral
    """
    from cfkit.prompts import CONDITIONS, load_templates, render_prompt
    from cfkit.subsets import workspace_cases
    from cfkit.errors import CaptionError

    case = workspace_cases(ws).get(case_id)
    templates = load_templates(ws)
    records, problems = [], []
    for condition in conditions or CONDITIONS:
        try:
            prompt = render_prompt(ws, case, condition, templates=templates)
        except CaptionError as exc:
            problems.append(exc)
            continue
        records.append((condition, prompt))
    if as_json:
        print_json([{"case": case_id, "condition": c, "system": p.system, "user": p.user,
                     "images": [str(i) for i in p.images]} for c, p in records])
    else:
        for condition, prompt in records:
            out.print(f"[bold cyan]══ {case_id} · {condition} ══[/]")
            out.print("[bold]system[/]")
            out.print(prompt.system, markup=False, emoji=False)
            out.print("[bold]user[/]")
            out.print(prompt.user, markup=False, emoji=False)
            if prompt.images:
                out.print("[bold]images[/] " + escape(", ".join(p.name for p in prompt.images)))
            out.print()
    if problems:
        raise problems[0]


@captions.command()
@click.argument("case_ids", nargs=-1)
@click.option("-m", "--model", "model_spec", metavar="KIND:NAME", default=None,
              help="Vision-language backend, e.g. openai:gpt-5.5 (default: [probe] model in cfkit.toml).")
@click.option("-o", "--option", "options", metavar="KEY=VALUE", multiple=True,
              help="Backend option (repeatable), e.g. -o base_url=http://localhost:8000/v1 (without "
                   "base_url: the servers of [probe] base_urls, as for probe run).")
@click.option("--subset", metavar="FILE", default=None,
              help="Case ids, one a line (default: the configured [probe] modality_subset).")
@click.option("--all-cases", is_flag=True, help="Every case of the cases file instead of the subset.")
@click.option("--redraft", is_flag=True, help="Replace unreviewed model drafts (never human or reviewed captions).")
@click.option("--max-tokens", type=click.IntRange(min=1), default=400, show_default=True,
              help="Token limit of each draft's reply (a reasoning model may need more).")
@workspace_option
def draft(ws, case_ids: tuple[str, ...], model_spec: str | None, options: tuple[str, ...], subset: str | None,
          all_cases: bool, redraft: bool, max_tokens: int) -> None:
    """Draft neutral captions with a vision-language model, for a person to review.

    The model sees only the image(s) and instructions that forbid names and
    verdicts. Drafts are saved with author = the model and reviewed: false, and
    linted; the evidence text is left to the reviewer. Existing captions are kept.
    The model is priced as 'probe run' prices one, and the last line says what
    this invocation spent. Stopped part-way (a key refused, an account without
    credit, a server gone, Ctrl-C or SIGTERM), every draft written is kept, the
    cases not asked are listed, and what was spent is said (a request in flight
    counts as an attempt a provider may bill); run it again to draft the rest.

    \b
    Example:
      cfkit captions draft --model openai:gpt-5.5 HB084 HB120
    """
    from cfkit.drafts import draft_captions
    from cfkit.endpoints import configured_base_url
    from cfkit.options import Setting, blamed, parse_option_pairs
    from cfkit.errors import CheckFailed
    from cfkit.judge.costs import Spent, priced_judge, token_option

    model = Setting.of(model_spec, "--model", ws.config.probe.model, "[probe] model")
    if not model.value:
        raise UsageError("no model given; pass --model KIND:NAME (e.g. openai:gpt-5.5) or set [probe] model in cfkit.toml.")
    given = parse_option_pairs(options)
    token_option(given)  # a token limit as -o: refused before blamed() would blame it on the model
    # The server(s) 'probe run' sends this model to: [probe] base_urls, unless -o base_url names one.
    if (base_url := configured_base_url(list(ws.config.probe.base_urls), model.value, given)) is not None:
        given["base_url"] = base_url
    with blamed(model):  # priced as 'probe run' prices a model
        backend = priced_judge(ws, model.value, given)
    for note in backend.notes:  # as probe run says them: a replica left out at start-up, a key withheld …
        warn(note)
    spent = Spent()
    results = draft_captions(ws, backend, case_ids, subset=subset, redraft=redraft, all_cases=all_cases, spent=spent,
                             max_tokens=max_tokens)
    style = {"written": "green", "kept": "dim", "failed": "red"}
    for r in results:
        out.print(f"{r.case}: [{style[r.status]}]{escape(r.message)}[/]")
        for f in r.findings:
            out.print(f"  [yellow]{f.level}[/] {escape(f.describe(ws.root))}")
    counts = {s: sum(r.status == s for r in results) for s in style}
    # What this invocation spent, also when the drafting stopped: every draft written before the stop is kept.
    asked = spent.said(PRICES_HINT) if spent.replies or spent.abandoned else "nothing asked"
    untried = f", {spent.untried} not asked (the drafting stopped)" if spent.stop is not None else ""
    err.print(f"{counts['written']} drafted, {counts['kept']} kept, {counts['failed'] - spent.untried} failed{untried}; "
              f"{asked}. "
              "Next: read each draft, add its evidence, set 'reviewed: true', run 'cfkit captions lint'.", markup=False)
    if spent.stop is not None:  # a key refused, a quota spent, Ctrl-C: said now, after what was written and spent
        raise spent.stop
    if counts["failed"]:
        raise CheckFailed(f"{plural(counts['failed'], 'draft')} failed; run the command again to retry "
                          f"{agree(counts['failed'], 'them')}.")
