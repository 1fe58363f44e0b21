"""``cfkit probe`` (run, backends); the stored runs are ``cfkit runs`` (:mod:`cfkit.cli.runs`)."""

from __future__ import annotations

from pathlib import Path

import click

from cfkit.cli import params
from cfkit.cli import console  # its consoles (Rich) are made when first printed to
from cfkit.cli.console import print_json, status, warn, workspace_option
from cfkit.errors import RunIncomplete, UsageError
from cfkit.money import Cost
from cfkit.plural import agree, plural
from cfkit.vocabulary import MAX_CONCURRENCY, SUITES

SUITE_CHOICE = click.Choice(SUITES)


@click.group()
def probe() -> None:
    """Ask a model every question of a suite and store every reply."""


@probe.command("run")
@click.option("-m", "--model", metavar="KIND:NAME", default=None,
              help="Backend and model, e.g. openai:gpt-5.5, hf:/models/qwen, baseline:always-no "
                   "(default: [probe] model in cfkit.toml).")
@click.option("-s", "--suite", type=SUITE_CHOICE, required=True,
              help="Which questions to ask (swap: each two-option case in both option orders, for position bias).")
@click.option("-o", "--option", "pairs", multiple=True, metavar="KEY=VALUE",
              help="Backend option, repeatable; 'cfkit probe backends' lists them.")
@click.option("--base-url", "url_flags", multiple=True, metavar="URL",
              help="OpenAI-compatible server (openai backend); repeat it for replicas of one model: requests are "
                   "spread over them, -j requests at each (default: [probe] base_urls).")
@click.option("--api-key-env", default=None, metavar="NAME",
              help="Environment variable holding the key for --base-url (openai backend).")
@click.option("-j", "--concurrency", type=params.positive(MAX_CONCURRENCY), default=None,
              help="Requests in flight (default: [probe] concurrency for APIs, 1 for local models).")
@click.option("--max-cost", type=params.Decimal(min=0), default=None, metavar="USD",
              help="Stop before spending more than this (prices: -o price_in=… -o price_out=…, and -o "
                   "price_cached_in=… for cached input; cfkit.toml [probe.prices]; or cfkit's built-in estimate "
                   "for OpenAI's own API).")
@click.option("--max-tokens", type=params.Integer(1, 65536), default=None,
              help="Longest reply, in tokens (default 512; the preset's with --protocol paper).")
@click.option("--protocol", type=click.Choice(["default", "paper"]), default=None,
              help="Settings preset (default: [probe] protocol). paper: the AesCanvas supplement's: temperature 0, "
                   "180 s timeout, 3 retries, 4 at once and its token limits for APIs; greedy, 256 tokens, 448 px "
                   "for local models.")
@click.option("--limit", type=params.positive(), default=None, metavar="N",
              help="A smoke test: only the first N cases (pairs for counterfactual), as a run of its own.")
@click.option("--cases", "cases_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              metavar="FILE", help="Only these cases (one id a line; a pair is kept when its case is listed), as a "
                                   "run of its own.")
@click.option("--accepted-only", is_flag=True, help="Counterfactual: use only edits a person accepted.")
@click.option("--subset", metavar="FILE", default=None,
              help="Modality: the cases of this subset file (default: the configured [probe] modality_subset).")
@click.option("--all-cases", is_flag=True, help="Modality: every case of the cases file instead of the subset.")
@click.option("--reviewed-only", is_flag=True,
              help="Modality: leave out cases whose caption is a model's draft no person has reviewed.")
@click.option("--dry-run", is_flag=True,
              help="Check everything and print the plan: requests, images, approximate tokens, estimated cost. "
                   "Nothing is sent or written.")
@click.option("--batch", is_flag=True,
              help="Send what is missing through the provider's Batch API (half price, answers within 24 h); "
                   "'cfkit probe collect RUN' stores the results.")
@click.option("--batch-file", type=click.Path(dir_okay=False, path_type=Path), default=None, metavar="OUT.jsonl",
              help="Write what is missing to OUT.jsonl in the OpenAI batch format for an offline runner (vllm "
                   "run-batch); 'cfkit probe collect RUN --from-file RESULTS.jsonl' stores the results.")
@click.option("--force", is_flag=True, help="With --batch-file: replace an existing OUT.jsonl.")
@click.option("--json", "as_json", is_flag=True, help="Print the run summary (or the plan) as JSON.")
@workspace_option
def run(ws, model, suite, pairs, url_flags, api_key_env, concurrency, max_cost, max_tokens, protocol, limit,
        cases_file, subset, all_cases, accepted_only, reviewed_only, dry_run, batch, batch_file, force, as_json) -> None:
    """Run MODEL on SUITE; a rerun sends only what is missing.

    Exit status: 0 when every planned request has a stored reply, 1 when the
    run ended incomplete (the last line says what is missing and how to
    resume) or when it is complete but not clean: replies cut off at the
    token limit (raise --max-tokens; for a replay, raise it where the replies
    were made), or most replies empty; 2 for bad input or a backend that
    cannot run here.

    \b
    Examples:
      cfkit probe run -m openai:gpt-5.5 -s counterfactual --dry-run
      cfkit probe run -m openai:gpt-5.5 -s contextcanvas --limit 5          a smoke test first
      cfkit probe run -m openai:gpt-5.5 -s contextcanvas --protocol paper --max-tokens 800 --max-cost 20
      cfkit probe run -m openai:Qwen/Qwen3-VL-8B-Instruct --base-url http://localhost:8000/v1 -s modality
      cfkit probe run -m baseline:majority -s contextcanvas
      cfkit probe run -m openai:gpt-5.5 -s swap                             position bias: both option orders
      cfkit probe run -m openai:gpt-5.5 -s contextcanvas --batch            then: cfkit probe collect RUN
    """
    from cfkit.endpoints import configured_base_url
    from cfkit.options import Setting, parse_option_pairs
    from cfkit.probe.selection import Selection
    from cfkit.store import open_store

    given = Setting.of(model, "--model", ws.config.probe.model, "[probe] model")
    if not given.value:
        raise UsageError("no model given. Pass --model KIND:NAME (e.g. openai:gpt-5.5) or set [probe] model "
                         "in cfkit.toml.")
    model = given.value
    options = parse_option_pairs(pairs)
    base_url = ((url_flags[0] if len(url_flags) == 1 else list(url_flags)) if url_flags else
                configured_base_url(list(ws.config.probe.base_urls), model, options))
    for flag, key, value in (("--base-url", "base_url", base_url), ("--api-key-env", "api_key_env", api_key_env)):
        if value is not None:
            if not model.startswith("openai:"):
                raise UsageError(f"{flag} is for openai: models; {model} does not take it.")
            if key in options:
                raise UsageError(f"{flag} and -o {key}=… both given; keep one.")
            options[key] = value
    for flag, value, wanted in (("--accepted-only", accepted_only, "counterfactual"),
                                ("--reviewed-only", reviewed_only, "modality"),
                                ("--subset", subset is not None, "modality"), ("--all-cases", all_cases, "modality")):
        if value and suite != wanted:
            raise UsageError(f"{flag} is for the {wanted} suite, not {suite}.")
    if subset is not None and all_cases:
        raise UsageError(f"give --subset {subset} or --all-cases, not both.")
    if force and batch_file is None:
        raise UsageError("--force replaces an existing --batch-file OUT.jsonl; give it with --batch-file.")
    if subset is not None:
        from cfkit.subsets import resolve_subset  # only where one is named: it loads the file helpers
    selection = Selection(limit=limit, cases=cases_file, accepted_only=accepted_only, reviewed_only=reviewed_only,
                          subset=None if subset is None else resolve_subset(ws, subset), all_cases=all_cases)
    settings = dict(options=options, concurrency=concurrency, max_tokens=max_tokens, protocol=protocol,
                    selection=selection)
    if dry_run:
        from cfkit.probe.job import preview_run

        if ws.db_path.is_file():
            with open_store(ws.db_path) as store:
                preview = preview_run(ws, store, given, suite, batch=batch, **settings)
        else:  # a dry run never creates the store
            preview = preview_run(ws, None, given, suite, batch=batch, **settings)
        from cfkit.cli.probe_plan import render_preview

        render_preview(preview, max_cost, as_json)
        return
    key = None
    if batch_file is None and not batch:
        # The same command again on a finished run: found by what the command was given (cfkit.probe.shortcut),
        # checked by stat as the full path checks it, answered without building the backend.
        from cfkit.probe.shortcut import command_key

        key = command_key(ws, {"model": given.value, "model_from": given.where, "suite": suite, "options": options,
                               "concurrency": concurrency, "max_cost": max_cost, "max_tokens": max_tokens,
                               "protocol": protocol, "selection": selection.as_dict()})
        summary = _shortcut(ws, key, suite)
        if summary is not None:
            _after_run(ws, summary, summary.notes, as_json, model, suite, pairs, url_flags, api_key_env, concurrency,
                       max_tokens, protocol, limit, cases_file, accepted_only, reviewed_only, max_cost)
            return
    # The backend is built before the store is opened: a bad --base-url or a missing key writes nothing.
    from cfkit.probe.job import prepare_probe

    job = prepare_probe(ws, given, suite, max_cost=max_cost, **settings)  # a refused kind names its source
    for note in job.notes:
        warn(note)
    if batch_file is not None:
        if batch or max_cost is not None:
            raise UsageError(f"--batch-file writes a file for you to run; drop {'--batch' if batch else '--max-cost'}.")
        from cfkit.cli.probe_batch import render_written
        from cfkit.probe.batch_file import write_batch_file

        with open_store(ws.db_path) as store:
            written = write_batch_file(job, store, batch_file, on_plan=_warn_unreviewed, force=force)
        render_written(written, as_json)
        return
    if batch:
        from cfkit.cli.probe_batch import render_submission
        from cfkit.probe.batch import submit_batch

        with open_store(ws.db_path) as store:
            submission = submit_batch(job, store, on_plan=_warn_unreviewed, max_cost=max_cost)
        render_submission(submission, as_json)
        return
    from cfkit.cli.progress_bar import ProgressBar
    from cfkit.probe.progress import RunInterrupted  # (the runner is loaded only where a request is sent)

    with open_store(ws.db_path) as store:
        try:
            with ProgressBar(suite) as bar:
                summary = job.run(store, on_progress=bar.update, on_plan=_warn_unreviewed)
        except RunInterrupted as stop:  # what was received and spent (in flight: abandoned), then the stop's line
            _render_summary(stop.summary, as_json, said=job.notes)
            raise
        job.remember(store, key, summary)
    _after_run(ws, summary, job.notes, as_json, model, suite, pairs, url_flags, api_key_env, concurrency, max_tokens,
               protocol, limit, cases_file, accepted_only, reviewed_only, max_cost)


def _shortcut(ws, key: str, suite: str):
    """The summary of the finished run the same command found before (its notes said again first), or None."""
    if not ws.db_path.is_file():
        return None
    from cfkit.cli.progress_bar import ProgressBar
    from cfkit.probe.shortcut import finished_summary, recall
    from cfkit.store import open_store

    with open_store(ws.db_path) as store:
        found = recall(ws, store, key)
        if found is None:
            return None
        record, remembered = found
        for note in remembered.notes:
            warn(note)
        with ProgressBar(suite) as bar:
            return finished_summary(store, record, suite, priced=remembered.priced, notes=remembered.notes,
                                    protocol=remembered.protocol, on_progress=bar.update)


def _after_run(ws, summary, said, as_json, model, suite, pairs, url_flags, api_key_env, concurrency, max_tokens,
               protocol, limit, cases_file, accepted_only, reviewed_only, max_cost) -> None:
    """The summary, the line about replies that are not answers, and the exit status of a run."""
    _render_summary(summary, as_json, said=said)
    incomplete = None
    if summary.missing:
        again = [("-m", model), ("-s", suite), *(("-o", pair) for pair in pairs),
                 *(("--base-url", url) for url in url_flags), ("--api-key-env", api_key_env), ("-j", concurrency),
                 ("--max-tokens", max_tokens),
                 ("--protocol", protocol), ("--limit", limit), ("--cases", cases_file),
                 ("--accepted-only", accepted_only), ("--reviewed-only", reviewed_only),
                 ("--max-cost", _resume_budget(summary, max_cost))]
        incomplete = _incomplete_line(summary, _command_line(ws, again))
    _collect_end(ws, summary, incomplete)


_STUDY_HINT = ("a probe run is one model on one suite. For several, write a study file ('cfkit study new "
               "study.toml') and run them all with 'cfkit study run study.toml'.")
for _param in run.params:
    if _param.name in ("model", "suite"):
        _param.repeat_hint = _STUDY_HINT  # type: ignore[attr-defined]  # read by cfkit.cli.once


def _warn_unreviewed(plan) -> None:
    """Before anything is sent: how many questions rest on inputs no person has reviewed."""
    if not plan.unreviewed:
        return  # nothing to say: the lines' module (and Rich, to say them) stays off the path to the first request
    from cfkit.cli.probe_plan import unreviewed_lines

    for line in unreviewed_lines(plan):
        warn(line)


def _command_line(ws, flags: list[tuple[str, object]]) -> str:
    """The ``cfkit probe run`` command with these flags (None and False left out), quoted for a POSIX shell."""
    import shlex

    words = ["cfkit", "-w", str(ws.root), "probe", "run"]
    for flag, value in flags:
        if value is None or value is False:
            continue
        words += [flag] if value is True else [flag, str(value)]
    return shlex.join(words)


def _resume_budget(summary, max_cost: float | None) -> float | None:
    """A --max-cost for the rest of a run a budget stopped: the mean cost of this invocation's requests, times
    those not sent, plus a quarter; the same limit when nothing was spent to learn from."""
    if max_cost is not None and summary.stopped and summary.cost_unreported:
        return None  # a budget cannot be kept without the server's token counts (the stop reason says so)
    if max_cost is None or not summary.stopped or not summary.sent or not summary.cost_usd:
        return max_cost
    import math

    per_request = (summary.cost_usd + (summary.abandoned_usd or 0)) / summary.sent  # abandoned attempts may be billed
    cents = math.ceil(round(per_request * summary.missing * 1.25 * 100, 6))  # up to the next cent
    return max(cents / 100, max_cost)


def _incomplete_line(summary, command: str) -> str:
    """One line: how many planned requests have no reply, why, and the command that resumes the run."""
    why = []
    if summary.failed:
        why.append(f"{summary.failed} failed ({(summary.first_failure or 'no detail').rstrip('.')})")
    if summary.not_sent:
        why.append(f"{summary.not_sent} not sent ({summary.stopped or 'the run stopped before sending them'})")
    counted = ("Reports count them wrong and list them" if summary.missing < summary.total
               else "Reports leave the run out until it has a reply")  # nothing of it to read yet
    return (f"run {summary.run_id} is incomplete: {summary.missing} of {plural(summary.total, 'planned request')} "
            f"{agree(summary.missing, 'have')} no "
            f"reply: {'; '.join(why)}. {counted}. 'cfkit runs show {summary.run_id}' "
            f"lists each one; resume with: {command}")


def _render_summary(summary, as_json: bool, said: tuple[str, ...] = ()) -> None:
    """The summary line and the notes not already said at the start of the run (a replay's replies were read
    from a file, so those cut off were cut off when they were made)."""
    from dataclasses import asdict

    if as_json:
        print_json(asdict(summary) | {"missing": summary.missing})
    else:
        console.out.print(summary.run_id)
        # What it spent, with the attempts given up once sent (a provider may bill them, priced or not), as
        # 'cfkit runs show' says the run's cost.
        cost = Cost(summary.cost_usd, summary.cost_unreported, summary.abandoned, summary.abandoned_usd).shown()
        cost = f", {cost}" if cost else ""
        shared = f", {summary.elsewhere} answered by another process" if summary.elsewhere else ""
        how = "sent" if summary.replayed_from is None else f"read from {summary.replayed_from}"
        status(f"{summary.status}: {plural(summary.total, 'request')}; {summary.kept} already stored, "
               f"{summary.from_cache} from cache, {summary.sent} {how} ({summary.errors} failed{cost}){shared}; "
               f"{summary.invalid} without a valid answer"
               + (f", {summary.truncated} cut off at the token limit" if summary.truncated else "")
               + (" when they were made." if summary.truncated and summary.replayed_from is not None else "."))
    for note in summary.notes:
        if note not in said:
            warn(note)
    if summary.skipped:
        from rich.markup import escape

        warn(f"{plural(len(summary.skipped), summary.skipped[0].unit)} skipped:")
        for skip in summary.skipped:
            console.err.print(f"  {escape(skip.pair_id)}: {escape(skip.reason)}")


@probe.command("collect")
@click.argument("run_ref", metavar="RUN")
@click.option("--wait", is_flag=True, help="Keep asking until every batch has ended (Ctrl-C stops; run again later).")
@click.option("--poll", "poll_s", type=params.Decimal(min=1.0), default=60.0, show_default=True, metavar="SECONDS",
              help="With --wait: seconds between two looks.")
@click.option("--base-url", default=None, metavar="URL",
              help="The server, when the run's recorded one had credentials (cfkit did not keep them).")
@click.option("--api-key-env", default=None, metavar="NAME", help="Environment variable holding the key.")
@click.option("--timeout", "timeout_s", type=params.Decimal(min=1.0), default=1800.0, show_default=True,
              metavar="SECONDS", help="Seconds one result file's download may take, every attempt together.")
@click.option("--from-file", "from_files", multiple=True, type=click.Path(dir_okay=False, path_type=Path),
              metavar="RESULTS.jsonl", help="Results of a run written with --batch-file (batch output format, e.g. "
                                            "from vllm run-batch); repeatable, e.g. one per part of a split file.")
@click.option("--final", is_flag=True, help="No more results will come: store what is still unanswered as failed "
                                            "(provider batches not ended are given up, and cancelled where still "
                                            "running), so the same 'probe run' sends it again.")
@click.option("--json", "as_json", is_flag=True, help="Print what was collected as JSON.")
@workspace_option
def collect(ws, run_ref: str, wait: bool, poll_s: float, base_url, api_key_env, timeout_s: float, from_files,
            final: bool, as_json: bool) -> None:
    """Store the results of a run sent with 'probe run --batch', as far as its batches have ended.

    Each batch is read once; what a batch answered is stored, also when it
    expired, was cancelled or failed part way, and a request it did not answer
    is stored as a failure with the provider's words and sent again by the
    next 'probe run'. --final gives
    up on batches that will not end (lost by the provider, or not worth
    waiting for): those still running are cancelled and, once the cancel has
    ended them (up to 10 minutes), what they answered is stored; the rest of
    their requests are stored as failed. Exit status: 0 once every batch is collected and
    every request has a reply, 1 while batches are still running or unknown
    to the provider, or requests are left without a reply, or when the
    replies are not clean (cut off at the token limit, or mostly empty), as
    for 'probe run'.

    \b
    Examples:
      cfkit probe collect contextcanvas-gpt-5.5-1a2b3c4d
      cfkit probe collect contextcanvas-gpt-5.5 --wait --poll 300
      cfkit probe collect contextcanvas-gpt-5.5 --final     no more waiting
    """
    from cfkit.cli.probe_batch import collection_line, render_collection
    from cfkit.dataset import load_cases
    from cfkit.probe.batch import collect_run
    from cfkit.store import open_store
    from cfkit.store.runs import find_run

    if not ws.db_path.is_file():
        raise UsageError(f"no store in {ws.root} yet; nothing was sent in batches here.")
    cases = load_cases(ws.cases_path, ws.image_root)
    with open_store(ws.db_path) as store:
        from cfkit.probe.batch_file import file_batches_pending

        record = find_run(store, run_ref)
        to_files = bool(from_files) or file_batches_pending(store, record.id)
        if to_files and not (from_files or final):
            raise UsageError(f"run {record.id} was written to a batch file; give its results with --from-file "
                             "RESULTS.jsonl (and --final once no more will come).")
        if not to_files:
            result = collect_run(store, cases, record, wait=wait, poll_s=poll_s, file_deadline_s=timeout_s,
                                 overrides={"base_url": base_url, "api_key_env": api_key_env}, final=final,
                                 on_check=None if as_json else lambda r: status(collection_line(r)),
                                 on_wait=None if as_json else status)
    if to_files:
        from cfkit.cli.probe_batch import collect_files

        result = collect_files(ws, cases, run_ref, list(from_files), final, as_json,
                               {"base_url": base_url, "api_key_env": api_key_env})
        return _collect_end(ws, result, None if not (result.missing or result.status != "done") else (
            f"run {result.run_id}: {plural(result.missing, 'request')} written to a batch file "
            f"{'has' if result.missing == 1 else 'have'} no result yet; collect the "
            "remaining result files (or, if no more will come, add --final: what none answered is stored as failed "
            "and the same 'cfkit probe run' with --batch-file writes it to a new file, or without it sends it)."
            if result.missing else
            f"run {result.run_id} ended {result.status}; 'cfkit runs show {result.run_id}' lists the failures, and "
            "the same 'cfkit probe run' with --batch-file writes them to a new file (without it, sends them)."))
    render_collection(result, as_json)
    _collect_end(ws, result, collection_line(result, final=True) if result.waiting or result.missing else None,
                 look=not result.waiting)


def _collect_end(ws, result, incomplete: str | None, *, look: bool = True) -> None:
    """How 'probe run' and 'probe collect' end: the lines on the run's replies (:func:`reply_lines`); exit 1
    (``incomplete``, the last line) while replies are missing, or when not clean."""
    from cfkit.cli.probe_replies import reply_lines

    said, failing = reply_lines(ws, result) if look else ([], [])
    for line in said + (failing if incomplete else []):
        warn(line)
    if incomplete:
        raise RunIncomplete(incomplete)
    if failing:  # every reply is stored, but the run is not clean: exit 1 with the line that says why
        from cfkit.errors import CheckFailed

        raise CheckFailed(" ".join(failing))


@probe.command("backends")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def backends(as_json: bool) -> None:
    """List installed backends with their capabilities, package and options."""
    from dataclasses import asdict

    from cfkit.backends import describe_backends

    infos = describe_backends()
    if as_json:
        print_json([{"kind": i.kind, "package": i.package, "target": i.target, "problem": i.problem,
                     "missing": i.missing, "install": i.install,
                     "capabilities": asdict(i.capabilities) if i.capabilities else None,
                     "options": [asdict(o) for o in i.options]}
                    for i in infos])
        return
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="Backends (cfkit.backends entry points)", title_justify="left")
    for column in ("kind", "images", "pairs", "json schema", "where", "package", "options"):
        table.add_column(column)
    for i in infos:
        if i.capabilities is None:
            table.add_row(i.kind, "", "", "", "", i.package, f"[red]cannot load:[/] {escape(i.problem or '')}")
            continue
        c = i.capabilities
        yes = lambda flag: "yes" if flag else "no"  # noqa: E731
        pairs = "2 images" if c.multi_image else "sheet"
        options = escape(", ".join(o.name for o in i.options))
        if i.missing:
            options = f"[yellow]not installed:[/] {escape(i.install or i.missing)}"
        table.add_row(i.kind, yes(c.images), pairs if c.images else "", yes(c.json_schema),
                      "API" if c.remote else "local", i.package, options)
    console.out.print(table)
