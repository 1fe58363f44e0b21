"""Which stored runs a report reads, one per model and suite, and the runs it leaves out with why.

The rule (docs/report-schema.md, "Which runs"): a run named with ``--run``
stands for its model and suite; otherwise, among a model's runs with one set
of settings (endpoint, generation settings, options, protocol), the newest
run of the whole suite stands for each suite (the run used last first, so a
resumed run counts as new), a subset run (``--limit``, ``--cases``,
``--reviewed-only``) only where there is none. Rows of one model label come
from one set of settings, so a smoke test whose settings differ from the
model's full runs is left out, and a model whose full runs differ is refused
alone until ``--run`` says which (or ``--mixed-settings`` reports it anyway).
Every run of a model and suite that is newer than the run read there and is
not read gets a line saying which, what it asked and how to report it: a
newer run never loses silently to an older one. The older runs a newer one
supersedes are counted in the report's list of the runs it read
(:mod:`cfkit.report.runs_read`). A run with no reply stored yet (batches
submitted and not collected, a server down from the start) has nothing to
count: where its model and suite have a run with replies, the newest such run
(by the same rule) is read, and a line names both and how the newer one gets
its replies; where none has, the newest is chosen and the report leaves it
out with a line (:func:`cfkit.report.sources.from_store`).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cfkit.errors import UsageError
from cfkit.plural import plural
from cfkit.report.reviewed import partial_run, reviewed_only_run

if TYPE_CHECKING:
    from cfkit.store import Store
    from cfkit.store.runs import RunRecord


def setting_values(settings: Mapping[str, Any]) -> dict[str, Any]:
    """A run's recorded settings (:func:`cfkit.probe.identity.run_settings`) as one flat mapping of the names a
    line shows them by: ``endpoint``, ``protocol``, each generation setting, ``option NAME``."""
    values = {"endpoint": settings.get("endpoint"), "protocol": settings.get("protocol") or "default"}
    values.update({k: v for k, v in (settings.get("generation") or {}).items()})
    values.update({f"option {k}": v for k, v in (settings.get("identity") or {}).items()})
    return values


def _differences(records: Sequence[RunRecord]) -> list[str]:
    """Per run, the settings in which it differs from the others (what the refusal shows)."""
    def flat(record: RunRecord) -> dict[str, Any]:
        if record.settings_sha256 is None:
            return {"settings": "not recorded (a run from before cfkit recorded them)"}
        return setting_values(record.settings)

    flats = [flat(r) for r in records]
    keys = sorted({k for f in flats for k in f})
    differing = [k for k in keys if len({repr(f.get(k)) for f in flats}) > 1]
    return [f"{r.id} ({', '.join(f'{k} {f.get(k)}' for k in differing)})" for r, f in zip(records, flats)]


@dataclass(frozen=True)
class SetAside:
    """Runs of one model that the report leaves out, and why, in one line."""

    model: str
    runs: tuple[str, ...]
    refused: bool  # True: the model has no row at all (its full runs differ); False: only these runs are left out
    message: str
    empty: bool = False  # the run has no reply yet: nothing of it to report
    why: str = ""  # the reason in a few words, where a page marks the left-out runs' answers (``cfkit view``)

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "runs": list(self.runs), "refused": self.refused, "message": self.message}


def _per_suite(records: Sequence[RunRecord], pinned: Mapping[str, RunRecord] | None = None,
               reviewed_only: bool = False) -> list[RunRecord]:
    """One run per suite: the pinned one, else the newest run of the whole suite, else (``reviewed_only``) the
    newest modality ``--reviewed-only`` run, else the newest run. A full run comes before a ``--reviewed-only``
    one even in that view: it answered every case the view counts, also those whose captions were reviewed since."""
    chosen = dict(pinned or {})
    for suite in dict.fromkeys(r.suite for r in records):
        if suite not in chosen:
            of_suite = [r for r in records if r.suite == suite]
            chosen[suite] = next((r for r in of_suite if not r.subset),
                                 next((r for r in of_suite if not partial_run(r, reviewed_only)), of_suite[0]))
    return list(chosen.values())


def selection_flags(selection: Mapping[str, Any] | None) -> str:
    """The options with which a run asked only part of its suite, as typed (``--limit 5``, ``--cases FILE``,
    ``--reviewed-only``); "a selection" where the run did not record them."""
    chosen = selection or {}
    flags = [f"--limit {chosen['limit']}"] if chosen.get("limit") else []
    if isinstance(cases := chosen.get("cases"), dict) and cases.get("path"):
        flags.append(f"--cases {cases['path']}")
    if chosen.get("reviewed_only"):
        flags.append("--reviewed-only")
    return " ".join(flags) or "a selection"


def _asked(run: RunRecord) -> str:
    """What a run asked, in a few words: its requests and, for a subset run, how it chose them."""
    return plural(run.n_requests, "request") + (f", {selection_flags(run.selection)}" if run.subset else "")


def _newer_runs(records: Sequence[RunRecord], picked: Sequence[RunRecord], *, reviewed_only: bool = False,
                skip: Iterable[str] = (), named: Iterable[str] = ()) -> list[SetAside]:
    """A line for each run of a picked suite that is newer than the run read there and is not read (a smoke
    test, a ``--cases`` run, a run with other settings): which, what it asked, and how to report it instead.
    ``records``: the model's runs, the run used last first; ``skip``: suites whose run ``--run`` named;
    ``named``: runs a line already names."""
    lines, said, ids, skip = [], set(named), [r.id for r in records], set(skip)
    for chosen in (r for r in picked if r.suite not in skip and r.id in ids):
        for run in records[:ids.index(chosen.id)]:
            if run.suite != chosen.suite or run.id in said:
                continue
            said.add(run.id)
            if run.suite == "modality" and reviewed_only_run(run) and not reviewed_only:
                newest = run.id == next(r.id for r in records if r.suite == run.suite)
                lines.append(SetAside(run.model, (run.id,), False, (
                    f"{run.model}: its {'newest' if newest else 'newer'} modality run {run.id} asked only the cases "
                    "whose captions a person wrote or reviewed (--reviewed-only); the rows read its run of the whole "
                    f"suite, {chosen.id}, "
                    "which answered those cases too: 'cfkit report --reviewed-only' reports them alone."),
                    why="a --reviewed-only run, read by 'cfkit report --reviewed-only'"))
                continue
            if run.settings_sha256 != chosen.settings_sha256:
                why, short = f"its settings differ ({'; '.join(_differences([chosen, run]))})", "has other settings"
            elif reviewed_only and reviewed_only_run(run):  # the run read answered every case this view counts
                why, short = ("it asked only the cases whose captions a person wrote or reviewed, which the run of "
                              "the whole suite read answered too"), "its run of the whole suite is read"
            elif run.subset:
                why, short = "it asked only part of the suite", "asked only part of the suite"
            else:
                why, short = "it is not the run the report reads for this model and suite", "is not the run read"
            lines.append(SetAside(run.model, (run.id,), False, (
                f"{run.model}: a newer {run.suite} run, {run.id} ({_asked(run)}), was left out: {why}; the rows "
                f"read {chosen.id} ({_asked(chosen)}). 'cfkit report --run {run.id}' reports the newer run "
                f"instead; 'cfkit runs rm {run.id}' removes it."),
                why=f"newer than the run read, but {short}"))
    return lines


def _answered_first(records: Sequence[RunRecord], answered: set[str]) -> list[RunRecord]:
    """``records`` without the runs that have no reply yet, of the suites that have a run with replies: a run
    with nothing to count never stands for a suite another run has answers for."""
    suites = {r.suite for r in records if r.id in answered}
    return [r for r in records if r.id in answered or r.suite not in suites]


def how_to_answer(run: RunRecord, status: str) -> str:
    """How a run with no reply yet gets its replies, by its status as shown (``status``)."""
    if run.status == "waiting":
        return f"'cfkit probe collect {run.id}' collects its batches"
    if run.status == "running" and status == "running":
        return "a process sends it now; report again when it has replies"
    return (f"run the command that made it again to resume it ('cfkit probe run -m {run.model} -s {run.suite}' with "
            "its options, or 'cfkit study run' for a study's run)")


def _unanswered_newer(records: Sequence[RunRecord], picked: Sequence[RunRecord], answered: set[str],
                      statuses: Mapping[str, str], skip: Iterable[str] = ()) -> list[SetAside]:
    """A line for each run with no reply yet that is newer than the run read for its suite (``records``: the
    model's runs, the run used last first): which, its state, the run read instead, and how it gets replies."""
    lines, ids, skip = [], [r.id for r in records], set(skip)
    for chosen in (r for r in picked if r.suite not in skip and r.id in answered and r.id in ids):
        for run in records[:ids.index(chosen.id)]:
            if run.suite != chosen.suite or run.id in answered:
                continue
            stopped = run.notes.get("stopped")
            lines.append(SetAside(run.model, (run.id,), False, (
                f"{run.model}: its newer {run.suite} run {run.id} ({_asked(run)}) has no reply yet "
                f"({statuses[run.id]}{f': {stopped}' if isinstance(stopped, str) and stopped else ''}); the rows "
                f"read {chosen.id} ({_asked(chosen)}, {plural(chosen.n_done, 'reply', 'replies')}) until it has "
                f"one: {how_to_answer(run, statuses[run.id])}."), empty=True, why="newer than the run read, but "
                "has no reply yet"))
    return lines


def _newest_of_each_settings(records: Sequence[RunRecord]) -> list[RunRecord]:
    newest: dict[str | None, RunRecord] = {}
    for r in records:
        newest.setdefault(r.settings_sha256, r)
    return list(newest.values())


@dataclass(frozen=True)
class Choice:
    """The runs a report reads, the runs it leaves out with why, and for each run read how many other runs of its
    model and suite are not read: (newer, older) than it."""

    runs: list[RunRecord]
    set_aside: list[SetAside]
    others: dict[str, tuple[int, int]]  # run read -> (newer, older) runs of its model and suite not read
    unanswered: tuple[str, ...] = ()  # runs chosen that have no reply yet, set aside (:func:`read_runs`)


def choose_runs(store: Store, refs: Sequence[str] = (), *, mixed: bool = False, only_named: bool = False,
                reviewed_only: bool = False) -> tuple[list[RunRecord], list[SetAside]]:
    """The runs a report reads, one per model and suite, and the runs it leaves out with why (:func:`choose`)."""
    made = choose(store, refs, mixed=mixed, only_named=only_named, reviewed_only=reviewed_only)
    return made.runs, made.set_aside


def _others(every: Sequence[RunRecord], chosen: Sequence[RunRecord]) -> dict[str, tuple[int, int]]:
    """Per run read: the runs of its model and suite not read, newer and older than it (``every``: the run used
    last first)."""
    ids = [r.id for r in every]
    others = {}
    for run in chosen:
        place = ids.index(run.id) if run.id in ids else 0
        same = [k for k, r in enumerate(every) if (r.model, r.suite) == (run.model, run.suite) and r.id != run.id]
        others[run.id] = (sum(k < place for k in same), sum(k > place for k in same))
    return others


def choose(store: Store, refs: Sequence[str] = (), *, mixed: bool = False, only_named: bool = False,
           reviewed_only: bool = False) -> Choice:
    """The runs a report reads, one per model and suite, and the runs it leaves out with why.

    Per model: the runs named in ``refs`` stand for their suites (two of one
    model and suite are refused), its other suites take runs with the same
    settings; a model none names takes, by default, the newest run of each
    suite when all its runs share their settings. When they do not, a subset
    run (``--limit``, ``--cases``: a smoke test) whose settings differ from the
    model's full runs is left out with a line; a model whose full runs differ
    is refused alone (or, with ``mixed``, reported from the newest run of each
    suite, with a line). Other models are never dropped, unless
    ``only_named``: then the runs named in ``refs`` are all there is (a
    study's report). With ``reviewed_only`` a modality run made with
    ``--reviewed-only`` stands for the suite where the model has no run of the
    whole suite. Every run newer than the run read for its model and suite
    that is not read gets a line (:func:`_newer_runs`): which, what it
    asked, why it is not read and how to report it.
    """
    from cfkit.store import leases, runs

    pinned: dict[tuple[str, str], RunRecord] = {}
    for record in (runs.find_run(store, ref) for ref in refs):
        key = (record.model, record.suite)
        if key in pinned and pinned[key].id != record.id:
            raise UsageError(f"--run {pinned[key].id} and --run {record.id} are both {record.model} on the "
                             f"{record.suite} suite; a report shows one run per model and suite. Keep one.")
        pinned[key] = record
    # The run used last first: a run resumed after a newer one stands for its settings again.
    every = sorted(runs.list_runs(store), key=lambda r: r.last_active, reverse=True)
    if only_named and pinned:
        return Choice(list(pinned.values()), [], _others(every, list(pinned.values())))
    answered = runs.with_replies(store, [r.id for r in every])
    empty = [r for r in every if r.id not in answered]
    shown = leases.statuses(store, empty) if empty else {}
    by_model: dict[str, list[RunRecord]] = {}
    for record in every:
        by_model.setdefault(record.model, []).append(record)
    chosen: list[RunRecord] = []
    aside: list[SetAside] = []
    for model, all_records in by_model.items():
        records = _answered_first(all_records, answered)  # a run with no reply yet stands for no suite it can
        pins = {suite: r for (m, suite), r in pinned.items() if m == model}  # leave to one with replies
        if pins:
            same = {r.settings_sha256 for r in pins.values()}
            picked = _per_suite([r for r in records if r.settings_sha256 in same], pins)
            chosen += picked
            left = [r for r in records if r.suite not in {p.suite for p in picked}]
            aside += _newer_runs(records, picked, skip=pins, named=[r.id for r in left])
            if left:
                shown = _newest_of_each_settings(left)
                aside.append(SetAside(model, tuple(r.id for r in shown), False, (
                    f"{model}: left out its {plural(len(left), 'run')} of "
                    f"{', '.join(dict.fromkeys(r.suite for r in left))}, whose settings differ from those of the "
                    f"{plural(len(pins), 'run')} named with --run: "
                    f"{'; '.join(_differences([*pins.values(), *shown]))}. Name one with --run to report it."),
                    why="settings other than those of the runs named with --run"))
            continue
        if len({r.settings_sha256 for r in records}) == 1:
            chosen += (picked := _per_suite(records, reviewed_only=reviewed_only))
            aside += _newer_runs(records, picked, reviewed_only=reviewed_only)
            continue
        full = [r for r in records if not partial_run(r, reviewed_only)]
        if full and len({r.settings_sha256 for r in full}) == 1:
            keep = full[0].settings_sha256
            chosen += (picked := _per_suite([r for r in records if r.settings_sha256 == keep],
                                            reviewed_only=reviewed_only))
            smoke = [r for r in records if r.settings_sha256 != keep]
            left = _newest_of_each_settings(smoke)
            aside += _newer_runs(records, picked, reviewed_only=reviewed_only, named=[r.id for r in smoke])
            aside.append(SetAside(model, tuple(r.id for r in left), False, (
                f"{model}: left out {plural(len(smoke), 'smoke-test run')} of part of a suite whose settings differ "
                f"from its full runs: "
                f"{'; '.join(_differences([full[0], *left]))}. Report one with --run RUN, or remove it with "
                "'cfkit runs rm RUN'."), why="a smoke test with other settings than the full runs"))
            continue
        listing = "; ".join(_differences(_newest_of_each_settings(records)))
        if mixed:
            picked = _per_suite(records)
            chosen += picked
            aside += _newer_runs(records, picked)
            aside.append(SetAside(model, tuple(r.id for r in picked), False, (
                f"{model}: its rows mix runs of different settings (--mixed-settings): {listing}."),
                why="runs of different settings, reported anyway (--mixed-settings)"))
            continue
        aside.append(SetAside(model, tuple(r.id for r in _newest_of_each_settings(records)), True, (
            f"model {model} has runs with different settings in {store.path}: {listing}. A report shows one set "
            f"of settings per model, so it leaves this model out. Choose with --run RUN (repeatable; 'cfkit runs "
            f"list' shows them), report it anyway with --mixed-settings, or remove the runs you do not want with "
            f"'cfkit runs rm RUN'."), why="runs of different settings"))
    for model, all_records in by_model.items():  # the runs with no reply yet newer than the run read
        pins = {suite for (m, suite) in pinned if m == model}
        aside += _unanswered_newer(all_records, [r for r in chosen if r.model == model], answered, shown, pins)
    return Choice(chosen, aside, _others(every, chosen))


def read_runs(store: Store, refs: Sequence[str] = (), *, mixed: bool = False, only_named: bool = False,
              reviewed_only: bool = False) -> tuple[Choice, dict[str, str]]:
    """The runs a report reads (:func:`choose`) less those with no reply yet, which have nothing to count: each
    is set aside with a line saying how it gets its replies (``Choice.unanswered`` names them); and each run
    chosen, with its status as shown (:func:`cfkit.store.leases.statuses`). ``cfkit report`` and the listings of
    runs (:mod:`cfkit.report.standing`) both read through here."""
    from dataclasses import replace

    from cfkit.store import leases, runs

    made = choose(store, refs, mixed=mixed, only_named=only_named, reviewed_only=reviewed_only)
    shown = leases.statuses(store, made.runs)  # a run marked running whose process is gone is said to be interrupted
    answered = runs.with_replies(store, [r.id for r in made.runs])
    aside = list(made.set_aside)
    for record in (r for r in made.runs if r.id not in answered):  # nothing to count: said, and left out
        aside.append(SetAside(record.model, (record.id,), False, (
            f"{record.model}: its {record.suite} run {record.id} has no reply yet ({shown[record.id]}"
            + (f": {record.notes['stopped']}" if record.notes.get("stopped") else "")
            + f"); the report leaves it out until it has one. To get its replies: "
            f"{how_to_answer(record, shown[record.id])}."), empty=True, why="no reply yet"))
    return replace(made, runs=[r for r in made.runs if r.id in answered], set_aside=aside,
                   unanswered=tuple(r.id for r in made.runs if r.id not in answered)), shown
