"""``cfkit study``: several models on several suites from one file (new, validate, run, status, report)."""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape

from cfkit.cli.console import err, out, print_json, status, warn, workspace_option
from cfkit.errors import CheckFailed, OutputError, RunIncomplete
from cfkit.money import Cost, usd
from cfkit.plural import agree, plural
from cfkit.vocabulary import REPORT_FORMATS

FILE = click.argument("file", metavar="FILE", type=click.Path(dir_okay=False, path_type=Path))


@click.group()
def study() -> None:
    """Run several models on several suites from one study file, and report them together.

    \b
    Start with:
      cfkit study new study.toml        a commented example (two baselines on four suites)
      cfkit study validate study.toml   what it would ask, and what it would cost
      cfkit study run study.toml        every run; run it again to resume
      cfkit study status study.toml
      cfkit study report study.toml --format md
    """


def _load(ws, file: Path):
    from cfkit.study import load_study

    return load_study(file, ws.root)


def _again(ws, file: Path, *extra: str) -> str:
    from cfkit.study.state import study_command

    return study_command(ws.root, file, *extra)


@study.command("new")
@FILE
@click.option("--force", is_flag=True, help="Replace FILE if it exists.")
@workspace_option
def new(ws, file: Path, force: bool) -> None:
    """Write a commented example study file to FILE (in the workspace when FILE is a bare name)."""
    from cfkit.files import write_text_atomic
    from cfkit.study.example import example_text

    target = file if file.is_absolute() or file.parent != Path(".") else ws.root / file
    if target.exists() and not force:
        raise OutputError(f"{target} exists; give --force to replace it, or another name.")
    write_text_atomic(target, example_text(target.name, target.stem))
    status(f"Wrote {target}. Edit it, then: cfkit study validate {target}")


@study.command("validate")
@FILE
@click.option("--batch", is_flag=True, help="Price what would be sent at batch prices.")
@click.option("--json", "as_json", is_flag=True, help="Print the check as JSON.")
@workspace_option
def validate(ws, file: Path, batch: bool, as_json: bool) -> None:
    """Check FILE: every run's start-up checks, every endpoint reached, every file present; print what it asks.

    Nothing is sent to a model and nothing is written. Exit status 0 when the
    study can run, 1 when a check failed (each problem is listed), 2 when the
    file itself is wrong.
    """
    from dataclasses import asdict

    from cfkit.store import Store
    from cfkit.study.check import check_study

    s = _load(ws, file)
    if ws.db_path.is_file():
        with Store(ws.db_path) as store:
            result = check_study(ws, s, store, batch=batch)
    else:
        result = check_study(ws, s, None, batch=batch)
    if as_json:
        print_json({"study": s.name, "runs": [asdict(r) for r in result.runs], "endpoints": result.endpoints,
                    "problems": result.problems, "notes": result.notes})
    else:
        for r in result.runs:
            cost = f", at most {usd(r.cost_max)}" if r.cost_max is not None else ""
            what = r.problem or f"{plural(r.requests, 'request')}, {r.to_send} to send{cost}"
            out.print(f"{escape(r.display)}  {r.suite}: {escape(what)}", highlight=False, soft_wrap=True)
        known = [r.cost_max for r in result.runs if r.cost_max is not None]
        total = sum(r.to_send for r in result.runs)
        status(f"study '{s.name}': {plural(len(result.runs), 'run')}, {plural(total, 'request')} to send"
               + (f", at most {usd(sum(known))} for the {plural(len(known), 'priced run')}" if known else "") + ".")
    for note in result.notes:
        warn(note)
    if result.problems:
        for problem in result.problems:
            warn(problem)
        raise CheckFailed(f"study '{s.name}': {plural(len(result.problems), 'problem')}; fix {agree(len(result.problems), 'them')} and validate again.")


@study.command("run")
@FILE
@click.option("--batch", is_flag=True,
              help="Runs whose backend has a provider Batch API are submitted there (half price, within 24 h); "
                   "'cfkit probe collect RUN' stores the results. The others run live.")
@click.option("--json", "as_json", is_flag=True, help="Print each run's outcome as JSON.")
@workspace_option
def run(ws, file: Path, batch: bool, as_json: bool) -> None:
    """Run every model of FILE on every suite of FILE; a rerun asks only what is missing.

    Runs go at the same time; the runs behind one endpoint share its
    concurrency and rate. Before anything is sent, each endpoint is asked
    for its models (GET /models), as 'study validate' asks: a model whose
    endpoint does not answer or does not list it is skipped, and says why.
    A run that fails does not stop the others. What 'probe run' warns of a
    run (inputs no person reviewed, pairs or cases skipped) is said of it
    here too. Ctrl-C or
    SIGTERM stops cleanly, every reply received kept. Exit status 0 when every
    run is complete and clean, 1 when some are not (the last line names them
    and the command that resumes; or the runs whose replies were cut off at
    the token limit, are mostly empty, or came from servers that said they
    were different models), 130 after Ctrl-C, 143 after SIGTERM.
    """
    from cfkit.cli.study_display import LiveDisplay
    from cfkit.store import open_store
    from cfkit.report.commands import Commands
    from cfkit.study.running import run_study

    s = _load(ws, file)
    with open_store(ws.db_path) as store, LiveDisplay(err) as display:
        result = run_study(ws, s, store, batch=batch, on_update=display.update)
    unclean = _reply_troubles(ws, result.runs, Commands(s.path.resolve(), ws.root))
    _summary(s.name, result.runs, as_json)
    again = _again(ws, s.path.resolve(), "run")
    if result.interrupted:
        warn(f"interrupted; every reply received is saved. Resume with: {again}")
        raise click.exceptions.Exit(result.exit_code)  # 130, or 143 after SIGTERM; ended by the CLI's entry point
    incomplete = [r for r in result.incomplete if r.state != "submitted"]
    if incomplete:
        names = ", ".join(f"{r.display} {r.suite} ({r.state})" for r in incomplete)
        # A skipped run was never started: the lines above say why, and 'study status' says it again (it reaches
        # the endpoints of the runs not started, as this command did).
        why = f"'cfkit study status {file}' says why"
        if all(r.state == "skipped" for r in incomplete):
            why = f"The lines above say why (and 'cfkit study status {file}' again)"
        raise RunIncomplete(f"study '{s.name}': {len(incomplete)} of {plural(len(result.runs), 'run')} incomplete: {names}. "
                            f"{why}; resume with: {again}")
    if unclean:
        raise CheckFailed(f"study '{s.name}': {plural(len(unclean), 'run')} complete but not clean "
                          f"({', '.join(f'{r.display} {r.suite}' for r in unclean)}): their replies were cut off at "
                          "the token limit, are mostly empty, or came from servers that named different models, as "
                          "the lines above say.")


def _reply_troubles(ws, runs, commands) -> list:
    """Note on each finished run whose replies were cut off or mostly lack an answer the line 'probe run' prints
    for it (the likely cause and the command that shows them); the runs that are therefore not clean."""
    from cfkit.cli.probe_replies import reply_lines

    from cfkit.backends.replicas import NOTE_START

    unclean = []
    for r in runs:
        if r.summary is not None:  # a replica left out, or failing, as 'probe run' says it
            r.notes.extend(n for n in r.summary.notes if n.startswith(NOTE_START))
            r.notes.extend(_asked_lines(r.summary, commands.report))
        if r.summary is None or r.state != "done":
            continue
        said, failing = reply_lines(ws, r.summary, commands.raise_limit)
        r.notes.extend(line.removeprefix(f"{r.summary.model} {r.summary.suite}: ") for line in failing + said)
        if failing:
            unclean.append(r)
    return unclean


def _asked_lines(summary, report: str) -> list[str]:
    """What 'probe run' warns of a run's plan, in the study's terms: inputs no person reviewed that it asked about
    (drafted captions, edits never accepted), and the pairs (or cases) it left out, each with why; ``report``: the
    study's report command, which --reviewed-only is given to."""
    from cfkit.cli.probe_plan import names

    said = []
    ids = summary.unreviewed
    if ids and summary.suite == "counterfactual":
        said.append(f"asked {plural(len(ids), 'pair')} with an edit no person has accepted (it passed its own check "
                    f"only): {names(ids)}; review {agree(len(ids), 'them')} with 'cfkit review', or ask only "
                    "accepted edits with "
                    "'accepted_only = true' in [suites.counterfactual]")
    elif ids:
        said.append(f"asked {plural(len(ids), 'case')} with a caption a model drafted and no person has reviewed: "
                    f"{names(ids)}; read {agree(len(ids), 'them')} and set 'reviewed: true', or leave "
                    f"{agree(len(ids), 'them')} out: of the report with '{report} "
                    "--reviewed-only', of the runs with 'reviewed_only = true' in [suites.modality]")
    if summary.skipped:
        shown = [f"{s.pair_id} ({s.reason})" for s in summary.skipped]
        said.append(f"{plural(len(shown), summary.skipped[0].unit)} skipped: {names(shown)}")
    return said


def _counts(s) -> dict:
    """The counts of a run's summary that 'study run --json' gives of each run, as 'probe run --json' gives them
    (None for a run that did not end here)."""
    if s is None:
        return dict.fromkeys(("kept", "from_cache", "sent", "errors", "invalid", "truncated", "empty"))
    return {"kept": s.kept, "from_cache": s.from_cache, "sent": s.sent, "errors": s.errors, "invalid": s.invalid,
            "truncated": s.truncated, "empty": s.empty}


def _summary(name: str, runs, as_json: bool) -> None:
    from cfkit.cli.study_display import columns, run_line

    if as_json:
        print_json([{"model": r.model, "display": r.display, "suite": r.suite, "state": r.state, "run_id": r.run_id,
                     "error": r.error, "notes": r.notes,
                     "total": r.summary.total if r.summary else None,
                     "missing": r.summary.missing if r.summary else None,
                     # where this invocation's replies came from, and what they lack, as 'probe run --json' says
                     **_counts(r.summary),
                     "cost_usd": r.cost.usd, "cost_unreported": r.cost.unreported,  # the run's total
                     "abandoned_attempts": r.cost.abandoned, "abandoned_usd": r.cost.abandoned_usd,
                     "spent_now_usd": r.spent_now.usd, "spent_now_unreported": r.spent_now.unreported,
                     "spent_now_abandoned_attempts": r.spent_now.abandoned,
                     "spent_now_abandoned_usd": r.spent_now.abandoned_usd}
                    for r in runs])
        return
    shown = columns(runs)
    ended = [r.summary for r in runs if r.summary is not None]
    for r in runs:
        out.print(escape(run_line(r, 200, error=False, **shown)), highlight=False, soft_wrap=True)
        if r.error:
            warn(f"{r.display} {r.suite}: {r.error}")
        for note in r.notes:
            warn(f"{r.display} {r.suite}: {note}")
    if ended:  # as 'probe run' says it of one run: what was sent, and what the stored replies and the cache gave
        status(f"study '{name}': {plural(sum(s.total for s in ended), 'request')} of {plural(len(ended), 'run')} "
               f"ended here: {sum(s.kept for s in ended)} already stored, {sum(s.from_cache for s in ended)} from "
               f"cache, {sum(s.sent for s in ended)} sent ({sum(s.errors for s in ended)} failed).")
    if shown["costs"]:
        now = sum((r.spent_now for r in runs), Cost())
        said = (f"this invocation spent {now.shown() or usd(0)}" if now.priced or not now.abandoned
                else f"this invocation's cost: {now.shown()}")  # no prices: its abandoned attempts
        status(f"study '{name}': {said}; the cost column is each run's "
               "total, as 'cfkit study status' and 'cfkit runs show' give it.")


@study.command("status")
@FILE
@click.option("--json", "as_json", is_flag=True, help="Print each run's state as JSON.")
@workspace_option
def status_(ws, file: Path, as_json: bool) -> None:
    """Where each run of FILE stands: done, running, incomplete, failed, waiting, stale, not started.

    A done run whose replies were cut off at the token limit (or are mostly
    empty, or came from servers that said they were different models) says it
    is complete but not clean; one whose every reply named a model plainly
    not the one asked says so. A run another process is sending says which
    process; one whose process was killed says it is interrupted (its process
    is gone). A run not started whose endpoint does not answer, or does not
    list its model, says so: 'study run' skips it (each endpoint is asked
    for its models once, GET /models, as 'study validate' asks). Nothing is
    sent to a model or written. Exit status 0 when every run is done, 1
    otherwise.
    """
    from dataclasses import asdict

    from cfkit.store import Store
    from cfkit.study.state import status_line, study_status

    s = _load(ws, file)
    if ws.db_path.is_file():
        with Store(ws.db_path) as store:
            states = study_status(ws, s, store)
    else:
        states = study_status(ws, s, None)
    if as_json:
        print_json([asdict(x) for x in states])
    else:
        for x in states:
            counts = f"{x.done}/{x.total}" if x.total else ""
            cost = x.cost.shown(short=True)  # a priced run all from cache: $0.00; unpriced: abandoned attempts
            cost = f"  {cost}" if cost else ""
            detail = f"  ({x.detail})" if x.detail else ""
            out.print(escape(f"{x.display:<20} {x.suite:<15} {x.state:<12} {counts:>11}{cost}  {x.run_id or ''}"
                             f"{detail}"), highlight=False, soft_wrap=True)
    last = status_line(ws.root, s, states)
    if last is not None:
        raise RunIncomplete(last)


@study.command("report")
@FILE
@click.option("--format", "fmt", type=click.Choice(REPORT_FORMATS), default="table", show_default=True,
              help="As 'cfkit report --format'.")
@click.option("--reference/--no-reference", default=None,
              help="Show the paper's published rows beside the study's (default: [report] reference in FILE).")
@click.option("--plot", "plot_dir", metavar="DIR", default=None, type=click.Path(file_okay=False),
              help="Also draw the paper's figures into DIR, as 'cfkit report --plot'.")
@click.option("--plot-format", type=click.Choice(("png", "svg", "pdf")), default="png", show_default=True,
              help="Image format of the --plot figures.")
@click.option("--force", is_flag=True, help="With --plot: replace figure files already in DIR.")
@click.option("--reviewed-only", is_flag=True,
              help="Modality: only the cases whose caption a person wrote or reviewed, as 'cfkit report "
                   "--reviewed-only' (default: [suites.modality] reviewed_only in FILE).")
@workspace_option
@click.pass_context
def report(ctx, ws, file: Path, fmt: str, reference: bool | None, plot_dir: str | None, plot_format: str,
           force: bool, reviewed_only: bool) -> None:
    """The paper's tables for the study's runs in one report: groups, compare pairs, reference rows.

    It is 'cfkit report' on the runs 'cfkit study status' finds for the
    study's current inputs, with the study's groups, compare pairs (base
    first, Table S10), resamples, seed and modality subset; a run not started
    or stale is left out and named on stderr. The report is printed whole;
    the exit status is 1 when it is not the whole study (a run left out or
    still incomplete, a compare pair left out), and a last line says so.
    """
    import json
    import tempfile

    from cfkit.cli.report import report as report_command
    from cfkit.study.reporting import report_inputs

    s = _load(ws, file)
    made = report_inputs(ws, s)
    # Said with the report's notes: on stderr as before, and in the JSON a saved report keeps.
    left_out = made.left_out_lines()
    settings = s.data.report
    with tempfile.TemporaryDirectory() as tmp:
        groups = None
        if made.groups:
            groups = Path(tmp) / "groups.json"  # a --groups file is YAML, and JSON is YAML
            groups.write_text(json.dumps(made.groups), encoding="utf-8")
        ctx.invoke(report_command, run_refs=tuple(made.run_ids), only_named=True,
                   compare_specs=tuple(f"{a}={b}" for a, b in made.compare), fmt=fmt,
                   reference=settings.reference if reference is None else reference, resamples=settings.resamples,
                   seed=settings.seed, subset=None if made.subset is None else str(made.subset),
                   all_cases=made.all_cases, plot_dir=plot_dir, plot_format=plot_format, force=force,
                   groups_path=None if groups is None else str(groups), workspace_dir=str(ws.root),
                   label_specs=tuple(f"{model}={name}" for model, name in made.renames.items()),
                   given_notes=tuple(left_out), reviewed_only=reviewed_only or made.reviewed_only,
                   study_file=s.path.resolve())
    short = made.short_of_the_study(f"'{_again(ws, s.path.resolve(), 'run')}'")
    if short is not None:  # the report is printed whole; the exit status says it is not the study's
        raise RunIncomplete(f"study '{s.name}': {short}")
