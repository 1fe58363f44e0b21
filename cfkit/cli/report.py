"""``cfkit report``: the paper's tables from stored runs or predictions files."""

from __future__ import annotations

import sys

import click

from cfkit.cli.console import out, warn, workspace_option
from cfkit.vocabulary import REPORT_FORMATS as FORMATS
MISSING_SHOWN = 20


@click.command()
@click.option("--predictions", "prediction_paths", multiple=True, metavar="FILE",
              help="Predictions JSONL (repeatable; any mix of models and suites). Default: the latest stored "
                   "run of each model and suite.")
@click.option("--compare", "compare_specs", multiple=True, metavar="BASE=OTHER",
              help="Paired ContextCanvas test of two models (repeatable; Bonferroni over all given).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True,
              help="table: Rich tables laid out like the paper; json: the object of docs/report-schema.md; "
                   "csv: one number a row; md / latex: the table cells.")
@click.option("--reference", is_flag=True, help="Show the paper's published rows beside yours (arXiv 2608.26713).")
@click.option("--resamples", default=10_000, show_default=True, type=click.IntRange(min=1),
              help="Bootstrap resamples for the intervals.")
@click.option("--seed", default=0, show_default=True, type=int, help="Bootstrap seed.")
@click.option("--ega", is_flag=True, help="Add evidence-grounded accuracy from the audit's final labels (Table S8).")
@click.option("--audit", "audit_ref", metavar="ID", default=None, help="With --ega: which audit (default: the newest).")
@workspace_option
def report(ws, prediction_paths: tuple[str, ...], compare_specs: tuple[str, ...], fmt: str, reference: bool,
           resamples: int, seed: int, ega: bool, audit_ref: str | None) -> None:
    """Accuracy, Macro-F1, pair accuracy, NCU, modality deltas and paired tests.

    A case or pair a model did not answer is counted wrong and listed on stderr
    (and under "missing" in JSON).

    \b
    Examples:
      cfkit report --reference
      cfkit report --predictions gpt.jsonl --predictions qwen.jsonl --format json
      cfkit report --predictions all.jsonl --compare hf:base=hf:specialist --format latex
      cfkit report --ega --reference
    """
    from cfkit import report as lib

    compare = [lib.parse_compare(spec) for spec in compare_specs]
    if audit_ref is not None and not ega:
        from cfkit.errors import UsageError

        raise UsageError("--audit chooses the audit of --ega; give --ega too.")
    result = lib.make_report(ws, list(prediction_paths), compare=compare, n_resamples=resamples, seed=seed, ega=ega,
                             audit=audit_ref)
    if fmt == "table":
        out.print(lib.ReportView(result, reference=reference))
    else:
        text = {"json": lambda: lib.to_json(result, reference=reference), "csv": lambda: lib.to_csv(result),
                "md": lambda: lib.to_markdown(result, reference=reference),
                "latex": lambda: lib.to_latex(result, reference=reference)}[fmt]()
        sys.stdout.write(text)
    if result.missing:
        warn(f"{len(result.missing)} unanswered unit(s) counted wrong:")
        for m in result.missing[:MISSING_SHOWN]:
            pair = f" pair {m.pair}" if m.pair else ""
            warn(f"  {m.model} {m.suite}: case {m.case}{pair}, condition {m.condition}")
        if len(result.missing) > MISSING_SHOWN:
            warn(f"  … and {len(result.missing) - MISSING_SHOWN} more (see 'missing' in --format json).")
    if result.ega is not None and result.ega.pending:
        from cfkit.errors import Incomplete

        pending = result.ega.pending
        warn(f"{len(pending)} audited item(s) have no final label yet and are left out of the EGA section:")
        for p in pending[:MISSING_SHOWN]:
            warn(f"  {p.model}: case {p.case}, item {p.item}")
        if len(pending) > MISSING_SHOWN:
            warn(f"  … and {len(pending) - MISSING_SHOWN} more (see 'ega_pending' in --format json).")
        raise Incomplete(f"the EGA section covers {result.ega.cases} of {result.ega.planned_cases} audited cases; "
                         "finish with 'cfkit audit status' and 'cfkit audit adjudicate --as NAME'.")
