"""Where each stored run stands with the report, for the places that list runs (``cfkit runs list``, ``cfkit
runs show``, the browser view's runs page): whether ``cfkit report`` reads it for its model and suite, or why
not, and how many of its answers are stale now, with why and what asks them again.

Nothing here has a rule of its own. The run read is the one
:func:`cfkit.report.choice.read_runs` takes, as the report's
:func:`~cfkit.report.sources.from_store` does; an answer is stale where
:meth:`~cfkit.report.sources.Sources.stale` says so once :func:`check_inputs`
and :func:`check_stored` (the checks ``make_report`` makes) have compared the
run's inputs then with the workspace now: its edits, images, captions, cases,
the gold labels a majority baseline rests on, and its probe templates. A run
the report does not read is checked as ``cfkit report --run RUN`` would check
it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cfkit.errors import CfkitError
from cfkit.plural import agree, plural

if TYPE_CHECKING:
    from cfkit.report.gold import Gold
    from cfkit.report.sources import Sources
    from cfkit.store import Store
    from cfkit.store.runs import RunRecord
    from cfkit.workspace import Workspace


def check_inputs(source: Sources, ws: Workspace, gold: Gold) -> list[str]:
    """Mark stale each answer of ``source``'s runs whose captions, case, gold labels (a majority baseline's) or
    probe templates changed since its run; the notes on runs whose templates cannot be compared."""
    from cfkit.report.majority import note_majority
    from cfkit.report.prompts_now import note_templates  # (the templates are read only for a report of runs)

    source.note_captions(ws)  # (runs that recorded nothing, and plain predictions files, are not compared)
    source.note_cases(gold.cases)
    note_majority(source, gold)  # a majority baseline's answers rest on every gold label of its suite
    return note_templates(source, ws, gold.cases)  # answers to prompts whose templates changed since


def check_stored(source: Sources, store: Store, gold: Gold) -> None:
    """What only the store can tell of stored runs' answers: each pair's selected edit now, and the image each
    reply records against the case's image file now."""
    source.note_selected_edits(store)
    source.note_images(store, gold.cases)


@dataclass(frozen=True)
class Standing:
    """One run as the listings of runs show it beside the report."""

    read: bool  # the report's numbers for its model and suite come from it
    why: str  # "read", or in a few words why not
    reads: str | None  # the run the report reads for its model and suite (itself where read), or None
    stale: int | None = 0  # its answers stale now (None: not checked, see ``stale_why``)
    stale_why: str = ""  # the first stale answer's reason, which says what asks it again

    @property
    def short(self) -> str:
        """A word for a table's column: read, older (superseded), newer (not read) or left out."""
        return "read" if self.read else self.why.split(":")[0]

    def to_dict(self) -> dict:
        return {"read": self.read, "why": self.why, "reads": self.reads,
                "stale": {"answers": self.stale, "why": self.stale_why or None}}

    def stale_line(self, run: RunRecord) -> str | None:
        """A line saying that answers of ``run`` are stale, with why and what asks them again; None if none is."""
        if self.stale is None:
            return f"{run.id}: whether its answers are stale was not checked: {self.stale_why}"
        if not self.stale:
            return None
        return (f"{run.id}: {plural(self.stale, 'answer')} stale now (a report counts {agree(self.stale, 'them')}"
                f" wrong); e.g. {self.stale_why}.")


def standings(ws: Workspace, store: Store, records: Sequence[RunRecord],
              check: Sequence[str] | None = None) -> dict[str, Standing]:
    """Each run of ``records`` (every stored run) as the report stands to it; the stale answers of the runs
    ``check`` names (None: of every run). Inputs that cannot be read (a broken cases file) leave the staleness
    not checked, with why, rather than refusing the listing."""
    from cfkit.report.choice import read_runs

    made, _shown = read_runs(store)
    read = {(r.model, r.suite): r.id for r in made.runs}
    why: dict[str, str] = {}
    refused = {a.model: a.why for a in made.set_aside if a.refused}
    for aside in made.set_aside:
        for run_id in aside.runs:
            why.setdefault(run_id, f"left out: {aside.why or 'see cfkit report'}")
    shown: dict[str, Standing] = {}
    for r in records:
        reads = read.get((r.model, r.suite))
        if reads == r.id:
            shown[r.id] = Standing(True, "read", reads)
            continue
        reason = why.get(r.id) or (f"left out: {refused[r.model]}" if r.model in refused else
                                   "older: superseded by the run read" if reads else
                                   "not read: no run of its model and suite is")
        shown[r.id] = Standing(False, reason, reads)
    wanted = [r for r in records if check is None or r.id in check]
    if wanted:
        try:
            counts = _stale(ws, store, wanted)
        except CfkitError as exc:
            counts = {r.id: (None, str(exc)) for r in wanted}
        for run_id, (n, first) in counts.items():
            s = shown[run_id]
            shown[run_id] = Standing(s.read, s.why, s.reads, n, first)
    return shown


def _stale(ws: Workspace, store: Store, records: Sequence[RunRecord]) -> dict[str, tuple[int | None, str]]:
    """Per run: its answers stale now and the first one's reason, as a report reading it would mark them. A
    report reads one run per model and suite, so the runs are checked in layers of one run per model and suite."""
    from cfkit.predictions import unit_predictions
    from cfkit.report.gold import load_gold
    from cfkit.report.sources import RunInfo, Sources
    from cfkit.store.runs import with_replies

    answered = with_replies(store, [r.id for r in records])
    counts: dict[str, tuple[int | None, str]] = {r.id: (0, "") for r in records}
    layers: list[dict[tuple[str, str], RunRecord]] = []
    for r in (r for r in records if r.id in answered):
        layer = next((layer for layer in layers if (r.model, r.suite) not in layer), None)
        if layer is None:
            layers.append(layer := {})
        layer[(r.model, r.suite)] = r
    if not layers:
        return counts
    from cfkit.majority import MAJORITY_MODEL  # only a majority baseline's counterfactual answers rest on the
    gold = load_gold(ws, pairs_too=any(r.model == MAJORITY_MODEL and r.suite == "counterfactual"  # pairs' golds:
                                       for layer in layers for r in layer.values()))  # the specs read only then
    for layer in layers:
        source = Sources(preds=unit_predictions(store, [r.id for r in layer.values()]))
        source.runs = {key: RunInfo.of(r) for key, r in layer.items()}
        check_stored(source, store, gold)
        check_inputs(source, ws, gold)
        ids = {key: r.id for key, r in layer.items()}
        for p in source.preds:
            if p.error in ("transport", "refused"):  # no answer to be stale (the report lists them as such)
                continue
            if (why := source.stale(p)) is not None:
                run_id = ids[(p.model, p.suite)]
                n, first = counts[run_id]
                counts[run_id] = ((n or 0) + 1, first or f"case {p.case}: {why}")
    return counts


#: How many runs a line of runs stale for one reason names; the others are counted (and listed under it).
NAMED_RUNS = 3


@dataclass(frozen=True)
class StaleGroup:
    """The runs stale now for one reason (or whose staleness could not be checked, for one reason): one line for
    them all (:meth:`line`), as a case changed under many runs makes them all stale alike."""

    why: str  # the first stale answer's reason, the same for each of them (its run said as "each run"), or why
    # they were not checked
    checked: bool
    runs: tuple[RunRecord, ...]
    stale: tuple[int, ...]  # each run's answers stale now (0 where not checked)

    def line(self, shown: Standing | None = None) -> str:
        """One line: the reason once, how many runs and answers, and the first :data:`NAMED_RUNS` runs. A group of
        one run is said as ``cfkit runs show`` says it (``shown``: its standing)."""
        if len(self.runs) == 1 and shown is not None:
            return shown.stale_line(self.runs[0]) or ""
        ids = [r.id for r in self.runs]
        named = ", ".join(ids[:NAMED_RUNS]) + (f" and {len(ids) - NAMED_RUNS} more" if len(ids) > NAMED_RUNS else "")
        runs = f"{plural(len(ids), 'run')} ({named})"
        if not self.checked:
            return f"{runs}: whether {agree(len(ids), 'their')} answers are stale was not checked: {self.why}"
        counts = set(self.stale)
        each = (f"{plural(self.stale[0], 'answer')} stale now" + (" in each" if len(ids) > 1 else "")
                if len(counts) == 1
                else f"{plural(sum(self.stale), 'answer')} stale now ({min(counts)} to {max(counts)} a run)")
        return f"{runs}: {each} (a report counts {agree(sum(self.stale), 'them')} wrong); e.g. {self.why}."


def stale_groups(runs: Sequence[RunRecord], shown: dict[str, Standing]) -> list[StaleGroup]:
    """The runs of ``runs`` with answers stale now (or not checked), grouped by the reason said for them, in the
    order of each group's first run."""
    groups: dict[tuple[bool, str], list[RunRecord]] = {}
    for r in runs:
        s = shown[r.id]
        if s.stale is None or s.stale:  # a reason names the run that asked ("since run RUN asked it")
            why = s.stale_why.replace(f"run {r.id}", "each run").replace(r.id, "each run")
            groups.setdefault((s.stale is not None, why), []).append(r)
    return [StaleGroup(why, checked, tuple(rs), tuple(shown[r.id].stale or 0 for r in rs))
            for (checked, why), rs in groups.items()]
