"""What ``cfkit probe run --batch`` and ``cfkit probe collect`` print."""

from __future__ import annotations

from dataclasses import asdict

from cfkit.cli.console import out, print_json, status, warn
from cfkit.money import usd
from cfkit.plural import agree, plural


def render_submission(submission, as_json: bool) -> None:
    """The run id on stdout, then what was submitted and the command that collects it."""
    if submission.finished is not None:  # nothing was missing
        summary = submission.finished
        if as_json:
            print_json({"run_id": summary.run_id, "status": summary.status, "submitted": 0, "batches": []})
        else:
            out.print(summary.run_id)
            status(f"{summary.status}: every one of {plural(summary.total, 'request')} already has a reply; nothing to send.")
        return
    for note in submission.notes:  # the model not checked before the batch was submitted (also in the JSON)
        warn(note)
    if as_json:
        print_json(asdict(submission) | {"status": "waiting" if submission.batch_ids else "done"})
        return
    out.print(submission.run_id)
    if not submission.batch_ids:
        status(f"done: {plural(submission.total, 'request')}; {submission.kept} already stored, {submission.from_cache} "
               "from cache; nothing left to send.")
        return
    status(f"waiting: {plural(submission.total, 'request')}; {submission.kept} already stored, {submission.from_cache} from "
           f"cache, {submission.submitted} sent in {plural(len(submission.batch_ids), 'batch', 'batches')} "
           f"({', '.join(submission.batch_ids)}), answered within 24 hours at batch prices. Collect the results "
           f"with: cfkit probe collect {submission.run_id}")


def collection_line(result, *, final: bool = False) -> str:
    """One line: what was stored, what is still running or lost, what is missing (``final``: the command's last
    line, with what to do next)."""
    parts = [f"{plural(result.stored, 'result')} stored now" + (f" ({result.failed} not answered by the batch)"
                                                       if result.failed else "")]
    if result.given_up:
        parts.append(f"{plural(result.given_up, 'request')} of batches given up stored as failed (--final)")
    if result.running:
        states = ", ".join(f"{b.id} {b.status}" + (f" {b.counts.get('completed', 0)}/{b.counts.get('total', '?')}"
                                                   if b.counts else "") for b in result.running)
        parts.append(f"{plural(len(result.running), 'batch', 'batches')} still running ({states})")
    if result.lost:
        lost = ", ".join(b.id for b in result.lost)
        parts.append(f"{plural(len(result.lost), 'batch', 'batches')} the provider no longer knows ({lost})")
    if not result.waiting and (missing := result.missing):
        unpaid = (f"{'it was' if missing == 1 else f'{result.unpaid} of them'} refused for quota or billing: add "
                  "credit to the account, then " if result.unpaid else "")
        parts.append(f"{plural(missing, 'planned request')} {agree(missing, 'have')} no reply ({unpaid}run the same "
                     f"'cfkit probe run' again to send {agree(missing, 'them')})")
    line = f"run {result.run_id}: " + "; ".join(parts)
    if final and result.running:
        line += f". Run 'cfkit probe collect {result.run_id}' again later, or add --wait"
    if final and result.lost:
        line += (f". If no result will ever come, 'cfkit probe collect {result.run_id} --final' stores what is "
                 "missing as failed, and the same 'cfkit probe run' then sends it again")
    return line + ("" if line.endswith(".") else ".")


def render_collection(result, as_json: bool) -> None:
    if as_json:
        print_json(asdict(result) | {"waiting": [b.id for b in result.waiting], "lost": [b.id for b in result.lost]})
        return
    out.print(result.run_id)
    cost = "" if result.cost_usd is None else f", {usd(result.cost_usd)} at batch prices"
    if result.cost_usd is not None and result.cost_unreported:
        cost = f", at least{cost[1:]} ({plural(result.cost_unreported, 'result')} without a reported cost)"
    status(f"{result.status}: {collection_line(result)[len(f'run {result.run_id}: '):].rstrip('.')}{cost}.")
    for batch in result.batches:
        if batch.lost:
            warn(f"batch {batch.id}: the provider has no such batch ({'; '.join(batch.errors)}): it was deleted or "
                 "forgotten, or --base-url points at another server. If it is gone for good, 'cfkit probe collect "
                 f"{result.run_id} --final' stores its requests as failed so the run can be resumed.")
        elif batch.unanswered:
            warn(f"batch {batch.id} ended {batch.status}: {plural(batch.answered, 'result')} stored, "
                 f"{plural(batch.unanswered, 'request')} never answered ({batch.reason.rstrip('.')}); "
                 f"{agree(batch.unanswered, 'they')} {agree(batch.unanswered, 'are')} stored as failed, and the "
                 f"same 'cfkit probe run' sends {agree(batch.unanswered, 'them')} again.")
        elif batch.errors:
            status(f"batch {batch.id} {batch.status}: {'; '.join(batch.errors)}")
    for problem in result.problems:
        warn(problem)
    for note in result.notes:
        warn(note)
    if result.unpaid_line:  # the account could not pay for some requests: said once, not once a request
        warn(result.unpaid_line)


def render_written(written, as_json: bool) -> None:
    """``probe run --batch-file``: the run id on stdout, then the file and how to run and collect it."""
    if as_json:
        print_json(asdict(written) | {"path": str(written.path) if written.path else None,
                                      "status": "waiting" if written.path else "done"})
        return
    out.print(written.run_id)
    if written.path is None:
        status(f"done: {plural(written.total, 'request')}; {written.kept} already stored, {written.from_cache} from cache; "
               "nothing left to write.")
        return
    status(f"waiting: {plural(written.total, 'request')}; {written.kept} already stored, {written.from_cache} from cache, "
           f"{written.lines} written to {written.path}. Run it (e.g. vllm run-batch -i {written.path.name} -o "
           f"results.jsonl --model NAME), then: cfkit probe collect {written.run_id} --from-file results.jsonl")


def collect_files(ws, cases, run_ref: str, paths: list, final: bool, as_json: bool, overrides: dict):
    """``probe collect RUN --from-file …`` (and ``--final``): store what the files answer, print it, return it."""
    from cfkit.probe.batch import collect_backend
    from cfkit.probe.batch_file import collect_from_files
    from cfkit.store import open_store
    from cfkit.store.runs import find_run

    with open_store(ws.db_path) as store:
        record = find_run(store, run_ref)
        result = collect_from_files(store, cases, record, collect_backend(record, overrides), paths, final=final)
    render_file_collection(result, as_json)
    return result


def render_file_collection(result, as_json: bool) -> None:
    """``probe collect --from-file``: the run id, then one line of counts and the first bad lines."""
    if as_json:
        print_json(asdict(result))
        return
    out.print(result.run_id)
    parts = [f"{plural(result.lines, 'line')} read", f"{plural(result.stored, 'result')} stored"]
    # (count, what one of them is, what several are, what is said of them): "1 malformed line skipped".
    for count, one, many, said in (
            (result.failed, "of them a failure (an error line)", "of them failures (error lines)", ""),
            (result.already, "already stored", "already stored", ""),
            (result.malformed, "malformed line", "malformed lines", " skipped"),
            (result.unknown, "line", "lines", " of another run skipped"),
            (result.gone, "line", "lines", " for cases no longer in the cases file skipped"),
            (result.missing, "request", "requests", " still without a result"),
            (result.closed, "request", "requests", " no file answered, stored as failed (--final)")):
        if count:
            parts.append(plural(count, one, many) + said)
    status(f"{result.status}: {', '.join(parts)}.")
    for problem in result.first_problems:
        status(f"  {problem}")
    if result.unpaid_line:  # the account could not pay for some requests: said once, not once a line
        warn(result.unpaid_line)
    if changed := result.changed:
        warn(f"{plural(changed, 'result')} {'answers' if changed == 1 else 'answer'} an earlier version of "
             f"{agree(changed, 'their')} case: its question, options or images changed in the cases file after the "
             f"batch file was written. The report counts {agree(changed, 'them')} stale; run the suite again to ask "
             f"{'that case as it is' if changed == 1 else 'those cases as they are'} now (the rest comes from the "
             "cache).")
