"""``cfkit report``: the paper's tables from stored runs or predictions files."""

from __future__ import annotations

import atexit
import gc
import os
import sys
from pathlib import Path

import click

from cfkit.cli import params
from cfkit.cli import console
from cfkit.cli.console import data_console, status, warn, workspace_option
from cfkit.errors import UsageError
from cfkit.plural import plural
from cfkit.vocabulary import REPORT_FORMATS as FORMATS
MISSING_SHOWN = 20


@click.command()
@click.option("--predictions", "prediction_paths", multiple=True, metavar="FILE",
              help="Predictions JSONL (repeatable; any mix of models and suites). Default: the newest stored "
                   "run of each model and suite.")
@click.option("--predictions-format", "predictions_format", default="auto", show_default=True,
              type=click.Choice(("auto", "native", "export", "inspect", "lmms", "vlmevalkit")),
              help="The format of the --predictions files: cfkit's own, a 'runs export', an inspect_ai log, an "
                   "lmms-eval samples JSONL or a VLMEvalKit table (auto: told from the name and content).")
@click.option("--map", "map_path", metavar="FILE", default=None,
              help="With peers' files: their sample ids mapped to case ids (CSV/TSV: peer id, case id; or JSON).")
@click.option("--epoch", type=click.IntRange(min=1), default=None, metavar="N",
              help="With inspect_ai logs that hold several epochs (inspect eval --epochs): the one to read.")
@click.option("--run", "run_refs", multiple=True, metavar="RUN",
              help="A stored run to report (repeatable; an id or a unique start of one, see 'cfkit runs list'). "
                   "Needed when one model has runs with different settings.")
@click.option("--only-named", is_flag=True,
              help="With --run: report only the runs named (by default --run chooses for its model and suite, and "
                   "every other model is reported too).")
@click.option("--label", "label_specs", multiple=True, metavar="MODEL=NAME",
              help="Show MODEL under NAME in every table, plot, the JSON and the EGA section (repeatable); "
                   "--compare and --groups then use NAME. A bare --label NAME names the model of another "
                   "harness's --predictions file (else the name the file records).")
@click.option("--mixed-settings", is_flag=True,
              help="Report a model whose full runs differ in settings anyway: each suite from its newest run (a "
                   "line names the runs and what differs). Without it such a model is left out, alone.")
@click.option("--compare", "compare_specs", multiple=True, metavar="BASE=OTHER",
              help="Paired ContextCanvas test of two models (repeatable; Bonferroni over all given).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True,
              help="table: Rich tables laid out like the paper; json: the object of docs/report-schema.md; "
                   "csv: one number a row; md / latex: the table cells, then the notes that qualify them.")
@click.option("--reference", is_flag=True, help="Show the paper's published rows beside yours (arXiv 2608.26713).")
@click.option("--resamples", default=10_000, show_default=True, type=params.resamples(),
              help="Bootstrap resamples for the intervals.")
@click.option("--seed", default=0, show_default=True, type=params.seed(), help="Bootstrap seed.")
@click.option("--subset", metavar="FILE", default=None,
              help="The modality cases (default: the configured [probe] modality_subset).")
@click.option("--all-cases", is_flag=True, help="Every case as the modality cases, instead of the subset.")
@click.option("--reviewed-only", is_flag=True,
              help="Modality: only the cases whose caption a person wrote or reviewed (a model's unreviewed drafts "
                   "left out, and named); a 'probe run --reviewed-only' run stands for the suite where a model has no full "
                   "run.")
@click.option("--ega", is_flag=True, help="Add evidence-grounded accuracy from the audit's final labels (Table S8).")
@click.option("--audit", "audit_ref", metavar="ID", default=None, help="With --ega: which audit (default: the newest).")
@click.option("--unblind", is_flag=True,
              help="With --ega: show the section while annotators are still labelling (un-blinds the audit: "
                   "its items' models).")
@click.option("--ega-labels", type=click.Choice(("people", "judge", "people+judge")), default="people",
              show_default=True, help="With --ega: whose labels count: the people's final labels, a judge model's "
                                      "pre-labels ('cfkit audit prelabel'), or the people's with the judge's where "
                                      "no person's final label is in (those items are counted and said).")
@click.option("--judge", "judge", metavar="KIND:NAME", default=None,
              help="With --ega-labels judge or people+judge: the judge model whose pre-labels count.")
@click.option("--units", is_flag=True,
              help="Print the per-unit outcomes instead of the tables: each case or pair, each model's answer "
                   "under every condition, right or wrong, a pair's category (csv: flat, one row per unit and "
                   "condition; json: the report's 'units').")
@click.option("--plot", "plot_dir", metavar="DIR", default=None, type=click.Path(file_okay=False),
              help="Also draw the paper's figures into DIR (made if needed), each with its data as CSV beside it: "
                   "comparisons (Fig. 4a), NCU, modality conditions, ContextCanvas. Needs the 'plots' extra.")
@click.option("--plot-format", type=click.Choice(("png", "svg", "pdf")), default="png", show_default=True,
              help="Image format of the --plot figures.")
@click.option("--force", is_flag=True, help="With --plot: replace figure files already in DIR.")
@click.option("--groups", "groups_path", metavar="FILE", default=None,
              help="YAML mapping each model to its group (closed, open, aesthetic as in Table 2, or any name); "
                   "rows are shown under their groups. The paper's model names get Table 2's groups without it.")
@click.option("-v", "--verbose", is_flag=True,
              help="List on stderr every unit counted wrong for want of an answer, with why (by default one line "
                   "per model and reason).")
@click.option("--note", "given_notes", multiple=True, hidden=True,
              help="A line to put first among the report's notes (how 'cfkit study report' names the study's runs "
                   "it leaves out, in the JSON and wherever the notes are shown).")
@click.option("--study-file", "study_file", default=None, hidden=True, type=click.Path(path_type=Path),
              help="The study file 'cfkit study report' reports: the commands the notes recommend are its.")
@workspace_option
def report(ws, prediction_paths: tuple[str, ...], run_refs: tuple[str, ...], compare_specs: tuple[str, ...],
           fmt: str, reference: bool, resamples: int, seed: int, subset: str | None, all_cases: bool, ega: bool,
           audit_ref: str | None, unblind: bool, ega_labels: str, judge: str | None, units: bool, plot_dir: str | None,
           plot_format: str, force: bool, groups_path: str | None, mixed_settings: bool, verbose: bool,
           label_specs: tuple[str, ...], only_named: bool, predictions_format: str = "auto",
           map_path: str | None = None, epoch: int | None = None, given_notes: tuple[str, ...] = (),
           reviewed_only: bool = False, study_file: Path | None = None) -> None:
    """Accuracy, Macro-F1, pair accuracy, NCU, modality deltas, paired tests and position bias (swap).

    A unit a model gave no usable answer for (no reply, a failed request, a
    refusal, an answer about an edit that is no longer selected) is counted
    wrong and listed on stderr with the reason (and under "missing" in JSON);
    a row from an incomplete run is marked. By default the newest stored run
    of each model and suite is read, a run of the whole suite before a smoke
    test (--limit, --cases); a newer run not read is named on stderr with why,
    and the last table, "Runs read", names the run each row comes from. A
    smoke test (--limit) whose settings
    (endpoint, --max-tokens, options, protocol) differ from the model's full
    runs is left out, and a model whose full runs differ is left out alone
    (exit 1) until --run says which or --mixed-settings reports it anyway;
    --run chooses for its model and suite only, every other model stays.

    \b
    Examples:
      cfkit report --reference
      cfkit report --run contextcanvas-openai-gpt-5.5-1a2b3c4d --run counterfactual-openai-gpt-5.5-5e6f7a8b
      cfkit report --predictions gpt.jsonl --predictions qwen.jsonl --format json
      cfkit report --predictions all.jsonl --compare hf:base=hf:specialist --format latex
      cfkit report --ega --reference
      cfkit report --groups groups.yaml --format md
      cfkit report --label 'openai:Qwen/Qwen3-VL-8B-Instruct=Qwen3-VL-8B'
      cfkit report --units --format csv > units.csv
      cfkit report --compare hf:base=hf:specialist --plot figures/ --plot-format pdf
    """
    one_blas_thread()
    skip_last_collection()
    from cfkit import report as lib
    from cfkit.report.commands import Commands
    from cfkit.report.labels import labels_from

    compare = [lib.parse_compare(spec) for spec in compare_specs]
    if audit_ref is not None and not ega:
        raise UsageError("--audit chooses the audit of --ega; give --ega too.")
    if unblind and not ega:
        raise UsageError("--unblind un-blinds the audit of --ega; give --ega too.")
    if (ega_labels != "people" or judge is not None) and not ega:
        raise UsageError("--ega-labels and --judge choose the labels of --ega; give --ega too.")
    if units and reference:
        raise UsageError("--units lists the units measured here; the paper publishes none. Drop --reference.")
    if plot_dir is None and (force or plot_format != "png"):
        raise UsageError("--plot-format and --force are options of --plot; give --plot DIR too.")
    groups = lib.load_groups(groups_path) if groups_path else None
    from cfkit.interop.reporting import predictions_files
    from cfkit.collector import paused_collection

    renames = [spec for spec in label_specs if "=" in spec]
    label = _file_label([spec for spec in label_specs if "=" not in spec])
    # A study's report builds a few hundred thousand objects and keeps them to the end, none in a cycle: the cycle
    # collector would walk them again and again for nothing (it comes back when the report is built).
    with paused_collection(), predictions_files(ws, prediction_paths, fmt=predictions_format, map_path=map_path,
                                                label=label, epoch=epoch) as (paths, notes, file_runs, details):
        for note in notes:  # how a peer's file was read; a warning when its targets are not the cases' golds
            warn(note.removeprefix("warning: ")) if note.startswith("warning: ") else status(note)
        result = lib.make_report(ws, paths, run_refs=list(run_refs), compare=compare,
                                 n_resamples=resamples, seed=seed, ega=ega, audit=audit_ref, groups=groups,
                                 unblind=unblind, subset=subset, all_cases=all_cases, ega_labels=ega_labels,
                                 judge=judge, mixed_settings=mixed_settings, labels=labels_from(renames),
                                 only_named=only_named, file_runs=file_runs, file_details=details, reviewed_only=reviewed_only,
                                 commands=Commands(study_file, ws.root if study_file else None))
    # How each peer's file was read (and a warning where its targets are not the golds) travels with the report:
    # a saved JSON report says what its numbers rest on. Those lines were said above, before the report was built.
    file_notes = [note.removeprefix("warning: ") for note in notes]
    result.notes[:0] = [*given_notes, *file_notes]
    if units:
        _print(fmt, lambda: [lib.units_table(result)], lambda: lib.units_json(result), lambda: lib.units_csv(result),
               result.said)
    else:
        _print(fmt, lambda: lib.display_tables(result, reference=reference),
               lambda: lib.to_json(result, reference=reference), lambda: lib.to_csv(result, reference=reference),
               result.said)
    if plot_dir is not None:
        from cfkit.report.plots import write_plots

        written = write_plots(result, plot_dir, fmt=plot_format, overwrite=force)
        status(f"Wrote {plural(len(written), 'figure')} to {plot_dir}: "
               + ", ".join(f"{w.image.name} (+ {w.data.name})" for w in written) + ".")
    for aside in result.set_aside:
        warn(aside.message)
    _warn_missing(result.missing, verbose)
    for trouble in result.troubles:
        warn(trouble.message)
    for note in [*given_notes, *result.notes[len(given_notes) + len(file_notes):]]:  # file notes: said above
        if verbose or not note.endswith(lib.COVERAGE_END):  # the lines above already say it per model
            warn(note)
    refused = [a for a in result.set_aside if a.refused]
    if result.ega is not None and result.ega.withheld:
        from cfkit.errors import Incomplete

        raise Incomplete(result.ega.withheld)
    for line in () if result.ega is None else result.ega.said():  # (un-blinded, when it is: the last line)
        warn(line)
    if result.ega is not None and result.ega.pending:
        from cfkit.errors import Incomplete

        from cfkit.report.grounding import JUDGE_INVALID, JUDGE_MISSING, JUDGE_STALE, NO_FINAL

        pending, judge = result.ega.pending, result.ega.judge
        if result.ega.labels == "people":
            warn(f"{plural(len(pending), 'audited item')} {'has' if len(pending) == 1 else 'have'} no final label yet and are left out of the EGA section:")
        else:
            warn(f"{plural(len(pending), 'audited item')} {'has' if len(pending) == 1 else 'have'} no label that counts ({result.ega.labels}) and are left out "
                 "of the EGA section:")
        for p in pending[:MISSING_SHOWN]:
            warn(f"  {p.model}: case {p.case}, item {p.item}" + ("" if p.why == NO_FINAL else f": {p.why}"))
        if len(pending) > MISSING_SHOWN:
            warn(f"  … and {len(pending) - MISSING_SHOWN} more (see 'ega_pending' in --format json).")
        fixes = [how for what, how in (
            (NO_FINAL, "finish with 'cfkit audit status' and 'cfkit audit adjudicate --as NAME'"),
            (JUDGE_MISSING, f"'cfkit audit prelabel --judge {judge}' asks what the judge was not asked or failed"),
            (JUDGE_STALE, f"'cfkit audit prelabel --judge {judge}' asks again what was asked with an older wording"),
            (JUDGE_INVALID, f"a judge's reply without a valid Yes/No is kept until 'cfkit audit prelabel --judge "
                            f"{judge} --retry-unanswered' asks it again; a person's final label of the item counts "
                            "under --ega-labels people+judge"))
            if any(what in p.why for p in pending)]
        raise Incomplete(f"the EGA section covers {result.ega.cases} of {plural(result.ega.planned_cases, 'audited case')}; "
                         + "; ".join(fixes) + ".")
    if refused:
        from cfkit.errors import Incomplete

        raise Incomplete(f"{plural(len(refused), 'model')} left out for runs with different settings "
                         f"({', '.join(a.model for a in refused)}); the lines above say which runs and how to choose.")


def one_blas_thread() -> None:
    """Ask OpenBLAS for no pool of threads, before numpy first loads it (unless the user chose a number).

    A report's matrix products are split small enough that OpenBLAS runs each on
    one thread (cfkit.stats.bootstrap.PRODUCT_CELLS), so the threads it starts
    when numpy loads would only be started and kept spinning: a tenth of a
    second of CPU in every report on a small machine, for nothing.
    """
    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def skip_last_collection() -> None:
    """At the process's exit, hand every object left to the permanent generation before the interpreter's last
    cycle collection, which would otherwise walk them all once more (numpy's and the report's modules: about a
    tenth of a report's time after its output is written). They are still freed as the modules are cleared;
    registered once, and run only when the process ends (not when a test calls the command in its own)."""
    global _LAST_COLLECTION_SKIPPED
    if not _LAST_COLLECTION_SKIPPED:
        atexit.register(gc.freeze)
        _LAST_COLLECTION_SKIPPED = True


_LAST_COLLECTION_SKIPPED = False


def _file_label(names: list[str]) -> str | None:
    """The one bare ``--label NAME`` (the model of a peer's predictions file), if given."""
    if len(set(names)) > 1:
        raise UsageError(f"--label NAME names the model of a --predictions file, and was given {len(set(names))} "
                         f"names ({', '.join(sorted(set(names)))}); give one, or MODEL=NAME to rename a model.")
    return names[0] if names else None


def _print(fmt: str, tables, as_json, as_csv, notes) -> None:
    """Write the tables (or the JSON, or the CSV) in the format asked for; Markdown and LaTeX with ``notes()``
    (what qualifies the figures, as stderr says it) under the tables, so that a copy of them keeps it."""
    from cfkit import report as lib

    if fmt == "table":
        data_console(_table_width()).print(lib.TablesView(tables()))
        return
    from cfkit.collector import paused_collection

    writers = {"json": as_json, "csv": as_csv, "md": lambda: lib.markdown_tables(tables(), notes()),
               "latex": lambda: lib.latex_tables(tables(), notes())}
    with paused_collection():  # the JSON of a study's units is many small objects, none in a cycle
        text = writers[fmt]()
    sys.stdout.write(text)


#: Width of the tables when stdout is not a terminal and COLUMNS is unset: each table is as wide as its cells.
PIPE_WIDTH = 1000


def _table_width() -> int | None:
    """None (the terminal's width, or COLUMNS) on a terminal; in a pipe or a file, room for every table to lay out
    at its natural width rather than Rich's 80 columns, which would break names and intervals."""
    if console.out.is_terminal or os.environ.get("COLUMNS", "").isdigit():
        return None
    return PIPE_WIDTH


def _warn_missing(missing, verbose: bool) -> None:
    """One line per model and reason: how many units are counted wrong, in which suites, and one example; each
    unit with its detail under -v."""
    if not missing:
        return
    from cfkit.report.rows import missing_lines, unit_name

    for line in missing_lines(missing):
        warn(line)
    if verbose:
        for m in missing:
            warn(f"  {m.model} {m.suite}: {unit_name(m)}, condition {m.condition}: {m.reason}"
                 + (f" ({m.detail})" if m.detail else ""))
    else:
        status("Each unit with its reason: add -v, or see 'missing' in --format json.")
