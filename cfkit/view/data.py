"""What the view shows, read once from a workspace: runs, cases, every stored reply by case, the units the
report counts wrong for want of a usable answer, filters.

Read-only: a workspace without a store shows no runs, and nothing here writes.
Each model's answers come from the run the report counts for its model and
suite (as ``cfkit report`` chooses by default). Where the report leaves runs
out (a model refused for runs of different settings, a smoke test of other
settings, a run with no reply) their answers are shown too, each marked with
why it is in none of the numbers; so is the newest run of a model and suite
the report counts nothing of, and every answer when the report cannot be made.
The runs page lists every run.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING

from cfkit.errors import CfkitError

if TYPE_CHECKING:
    from cfkit.cases import Case, CaseSet
    from cfkit.report import Report
    from cfkit.report.rows import Missing
    from cfkit.report.standing import Standing
    from cfkit.store.runs import ReplyRecord, RunRecord
    from cfkit.workspace import Workspace

#: The case filters, in the order the pages list them, and what each keeps.
FILTERS = {
    "all": "every case",
    "wrong": "a model answered wrong, gave no valid option or has no usable answer (counted wrong)",
    "invalid": "a reply with no valid option",
    "truncated": "a reply cut off by the token limit",
    "swap-inconsistent": "a model chose different option texts when the two options were exchanged",
    "peer-disagrees": "the answer another harness extracted differs from cfkit's reading",
}


@dataclass(frozen=True)
class Answer:
    """One stored reply as the case page shows it."""

    model: str
    run_id: str
    suite: str
    condition: str
    pair_id: str
    reply: ReplyRecord
    correct: bool | None  # None where the case has no gold for this condition (e.g. an edit's answer)
    peer: str | None = None  # an imported peer's own answer where cfkit's parser reads another ("" for none)
    missing: Missing | None = None  # the report lists this unit under missing (e.g. stale) and counts it wrong
    left_out: str | None = None  # why the report's numbers leave this answer out (its run is not counted), or None

    @property
    def counted(self) -> bool | None:
        """Right or wrong as the report counts it: wrong when the report has no usable answer here (a stale one:
        its case, caption, image or edit changed since), None when its run is in none of the numbers, else
        :attr:`correct`."""
        if self.left_out is not None:
            return None
        return False if self.missing is not None else self.correct

    @property
    def invalid(self) -> bool:
        return self.reply.answer is None

    @property
    def truncated(self) -> bool:
        """The reply stopped at the token limit (finish reason ``length``, or the backend's equivalent)."""
        return self.reply.truncated


@dataclass
class ViewData:
    """The workspace as the view reads it (loaded lazily, once per reading: the served view makes a new
    reading when the workspace changed, :mod:`cfkit.view.fresh`)."""

    ws: Workspace
    notes: list[str] = field(default_factory=list)
    # When this reading was made, in local time (each page says it).
    read_at: datetime = field(default_factory=lambda: datetime.now().astimezone())

    @cached_property
    def runs(self) -> list[RunRecord]:
        if not self.ws.db_path.is_file():
            return []
        from cfkit.store import open_store
        from cfkit.store.runs import list_runs

        with open_store(self.ws.db_path) as store:
            return list_runs(store)

    @cached_property
    def statuses(self) -> dict[str, str]:
        """Each run's status as ``cfkit runs list`` shows it: a run the store marks running whose process is gone
        says so (:func:`cfkit.store.leases.statuses`), never "running"."""
        if not self.runs:
            return {}
        from cfkit.store import open_store
        from cfkit.store.leases import statuses

        with open_store(self.ws.db_path) as store:
            return statuses(store, self.runs)

    @cached_property
    def servers_said(self) -> dict[str, list[str]]:
        """By run id, what ``cfkit runs show`` says of the servers that answered it: replies from several model
        ids (not one model's answers), from several builds, or all from one model plainly not the one asked."""
        if not self.runs:
            return {}
        from cfkit.servers import asked_name, servers_of
        from cfkit.store import open_store
        from cfkit.store.runs import servers

        with open_store(self.ws.db_path) as store:
            said = {r.id: servers_of(servers(store, r.id)).lines(f"{r.model} {r.suite}", r.id, asked_name(r.model, r.replayed))
                    for r in self.runs}
        return {run_id: lines for run_id, lines in said.items() if lines}

    @cached_property
    def not_clean(self) -> dict[str, str]:
        """By run id, what ``cfkit runs show`` says of the replies of a run that are not clean (some cut off at the
        token limit, or most of them empty: :func:`cfkit.parse.trouble.not_clean`), the runs ``study status``
        calls complete but not clean (or incomplete, "not clean either") and whose rows the report marks."""
        if not self.runs:
            return {}
        from cfkit.parse.trouble import not_clean, reply_trouble
        from cfkit.report.commands import made_by
        from cfkit.store import open_store
        from cfkit.store.runs import count_unanswered

        said = {}
        with open_store(self.ws.db_path) as store:
            for r in self.runs:
                invalid, truncated, empty = count_unanswered(store, r.id)
                if not_clean(truncated, empty, r.n_done):
                    said[r.id] = reply_trouble(
                        f"{r.model} {r.suite}", r.n_done, invalid, empty, truncated,
                        r.made_with_max_tokens, f"cfkit runs unparsed {r.id}" if invalid else "",
                        replayed=r.replayed, made_with=r.made_with_max_tokens,
                        again=made_by(r, self.ws.root).raise_limit) or "not clean"
        return said

    @cached_property
    def standings(self) -> dict[str, Standing]:
        """By run id, what ``cfkit runs list`` says of it beside the report: whether the report reads it, and its
        answers stale now with why (:mod:`cfkit.report.standing`, the report's own checks)."""
        if not self.runs:
            return {}
        from cfkit.report.standing import standings
        from cfkit.store import open_store

        with open_store(self.ws.db_path) as store:
            return standings(self.ws, store, self.runs)

    @cached_property
    def cases(self) -> CaseSet | None:
        from cfkit.specs import try_load_cases

        try:
            return try_load_cases(self.ws)
        except CfkitError as exc:
            self.notes.append(f"the cases file could not be read: {exc}")
            return None

    @cached_property
    def answers(self) -> dict[str, list[Answer]]:
        """Every case's answers: from the runs the report counts, and marked (:attr:`Answer.left_out`) from the runs
        it leaves out (see :attr:`shown_runs`)."""
        if not self.runs:
            return {}
        from cfkit.store import open_store
        from cfkit.store.runs import replies

        by_case: dict[str, list[Answer]] = {}
        runs = {r.id: r for r in self.runs}
        with open_store(self.ws.db_path) as store:
            for run_id, left_out in self.shown_runs.items():
                run = runs[run_id]
                peers = _peer_disagreements(run)
                for reply in replies(store, run_id):
                    case = self.case(reply.case_id)
                    by_case.setdefault(reply.case_id, []).append(
                        Answer(run.model, run.id, run.suite, reply.condition, reply.pair_id, reply,
                               _correct(case, run.suite, reply), peers.get(reply.key), left_out=left_out))
        listed = {(m.run, m.case, m.pair or "", m.condition): m for units in self.missing.values() for m in units}
        for case_id, answers in by_case.items():
            answers.sort(key=lambda a: (a.model, a.suite, a.left_out is not None, a.run_id, a.pair_id, a.condition))
            answers[:] = [replace(a, missing=listed.get((a.run_id, case_id, a.pair_id, a.condition)))
                          for a in answers]
        return by_case

    @cached_property
    def shown_runs(self) -> dict[str, str | None]:
        """The runs whose answers the pages show, each with why the report's numbers leave it out (None: it
        counts). The report's own runs; the runs it sets aside, with its reason in a few words; and the newest
        run of each model and suite it counts nothing of. Without a report, the newest run of each model and
        suite, every one in none of the numbers."""
        if not self.runs:
            return {}
        from cfkit.store import open_store
        from cfkit.store.runs import latest_run_ids

        report, _ = self.report
        with open_store(self.ws.db_path) as store:
            latest = latest_run_ids(store)
        if report is None:
            return dict.fromkeys(latest, "not in any report: the report could not be made (see the report page)")
        known = {r.id: r for r in self.runs}
        counted = [r for r in sorted(report.counted_runs()) if r in known]
        shown: dict[str, str | None] = dict.fromkeys(counted)
        refused = {a.model: a.why for a in report.set_aside if a.refused}
        for aside in report.set_aside:
            for run in aside.runs:
                if run in known and run not in shown:
                    shown[run] = f"left out of the report: {aside.why or 'see the report page'}"
        covered = {(known[r].model, known[r].suite) for r in counted}
        for run in latest:
            record = known.get(run)
            if record is not None and run not in shown and (record.model, record.suite) not in covered:
                why = refused.get(record.model) or "not the run the report counts for this model and suite"
                shown[run] = f"left out of the report: {why}"
        return shown

    @cached_property
    def in_report(self) -> dict[str, str]:
        """Per run, what the report makes of it, for the runs page: "read" (numbers of the report come from it), or
        why not (as :attr:`shown_runs`; a run none of those name is older than a run of its model and suite that
        stands for it)."""
        report, _ = self.report
        if report is None:
            return {r.id: "not read: the report could not be made (see the report page)" for r in self.runs}
        counted, shown = report.counted_runs(), self.shown_runs
        refused = {a.model: a.why for a in report.set_aside if a.refused}
        return {r.id: "read" if r.id in counted else shown.get(r.id) or (
            f"left out of the report: {refused[r.model]}" if r.model in refused else
            "not read: older than the run of its model and suite that stands for it") for r in self.runs}

    def pair_runs(self) -> dict[str, str | None]:
        """One counterfactual run per model for the pairs page (whose answers are one per model and pair): the
        run the report counts, else the one it leaves out, with why (as :attr:`shown_runs`)."""
        runs = {r.id: r for r in self.runs}
        chosen: dict[str, tuple[str, str | None]] = {}
        for run_id, left_out in self.shown_runs.items():  # the counted runs come first
            if runs[run_id].suite == "counterfactual":
                chosen.setdefault(runs[run_id].model, (run_id, left_out))
        return dict(chosen.values())

    @cached_property
    def report(self) -> tuple[Report | None, str | None]:
        """The report over the workspace, as ``cfkit report`` makes it by default; or None and why not."""
        from cfkit.report import make_report

        try:
            return make_report(self.ws), None
        except CfkitError as exc:
            return None, str(exc)

    @cached_property
    def missing(self) -> dict[str, list[Missing]]:
        """Each case's units without a usable answer (no reply, a failed request, a refusal, a stale answer): the
        report counts them wrong, and a case page says why."""
        report, _ = self.report
        by_case: dict[str, list[Missing]] = {}
        for m in report.missing if report is not None else ():
            by_case.setdefault(m.case, []).append(m)
        for units in by_case.values():
            units.sort(key=lambda m: (m.model, m.suite))  # as the answers; conditions stay in the suite's order
        return by_case

    @cached_property
    def tallies(self) -> dict[str, tuple[int, int, int]]:
        """Each case's (right, wrong, no valid option) over the report's own units and conditions, as the report
        counts them: a unit with no reply at all (a run that stopped, a pair it skipped) is wrong too, and among
        those with no valid option, as the report's Inv. counts it; an answer of a run it leaves out is in none."""
        report, _ = self.report
        if report is None:
            return {}
        from cfkit.report.units import flat_rows

        counts: dict[str, list[int]] = {}
        for row in flat_rows(report.units):
            tally = counts.setdefault(row["case"], [0, 0, 0])
            tally[0 if row["correct"] else 1] += 1
            tally[2] += row["answer"] is None
        return {case: (right, wrong, invalid) for case, (right, wrong, invalid) in counts.items()}

    def case(self, case_id: str) -> Case | None:
        cases = self.cases
        return cases.get(case_id) if cases is not None and case_id in cases else None

    @cached_property
    def case_ids(self) -> list[str]:
        """The cases file's order, then any case answered but not in the file."""
        ids = [c.id for c in self.cases] if self.cases is not None else []
        known = set(ids)
        return ids + sorted(c for c in self.answers if c not in known)

    @cached_property
    def models(self) -> list[str]:
        return sorted({r.model for r in self.runs})

    def matches(self, case_id: str, name: str) -> bool:
        """Whether a case belongs under the filter ``name`` (see :data:`FILTERS`)."""
        answers = self.answers.get(case_id, [])
        if name == "all":
            return True
        if name == "wrong":
            return any(a.counted is False for a in answers) or case_id in self.missing
        if name == "invalid":
            return any(a.invalid for a in answers)
        if name == "truncated":
            return any(a.truncated for a in answers)
        if name == "swap-inconsistent":
            return bool(self.swap_inconsistent(case_id))
        if name == "peer-disagrees":
            return any(a.peer is not None for a in answers)
        raise KeyError(name)

    def filtered(self, name: str) -> list[str]:
        return [c for c in self.case_ids if self.matches(c, name)]

    def swap_inconsistent(self, case_id: str) -> list[str]:
        """The models whose two answers in the swap suite name different option texts."""
        case = self.case(case_id)
        if case is None:
            return []
        from cfkit.swap import answer_text

        texts: dict[str, dict[str, str | None]] = {}
        for a in self.answers.get(case_id, []):
            if a.suite == "swap" and a.reply.answer is not None:
                try:
                    texts.setdefault(a.model, {})[a.condition] = answer_text(case, a.condition, a.reply.answer)
                except ValueError:
                    continue
        return sorted(m for m, t in texts.items() if len(t) == 2 and len(set(t.values())) == 2)


def _correct(case: Case | None, suite: str, reply: ReplyRecord) -> bool | None:
    """Right or wrong against the case's gold, where the gold applies (not to an edited image's answer)."""
    if case is None:
        return None
    if reply.condition == "edit":  # the edit removes the decisive cue: its gold is the case's Yes option
        return None if case.yes_option is None else reply.answer == case.yes_option
    if suite == "swap":
        from cfkit.swap import answer_text

        gold_text = next((o.text for o in case.options if o.id == case.gold), None)
        try:
            return reply.answer is not None and answer_text(case, reply.condition, reply.answer) == gold_text
        except ValueError:
            return False
    return reply.answer == case.gold


def _peer_disagreements(run: RunRecord) -> dict[tuple[str, str, str], str]:
    """An imported run's replies that cfkit reads otherwise than the peer did, with the peer's answer ('' for
    none), as ``cfkit runs import`` noted them."""
    imported = run.imported or {}
    found = {}
    for d in imported.get("peer_disagrees") or []:
        if isinstance(d, dict):
            found[(str(d.get("case")), str(d.get("pair") or ""), str(d.get("condition")))] = d.get("peer") or ""
    return found
