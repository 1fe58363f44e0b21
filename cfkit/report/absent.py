"""Why a stored run holds no prediction for a unit of its suite, told from what the run planned.

A run records what it planned: ``skipped``, the units it could not ask and
why; ``left_out``, the units its selection (``--limit``, ``--cases``,
``--reviewed-only``) left out; and, when an invocation of it ends, ``asked``,
each case it asked, and ``asked_pairs``, each pair (counterfactual). A unit
none of them names was added to the suite (the cases file, the specs, the
modality subset) after the run was planned (of an imported run, only where its
export had a row for every unit it planned, of the whole suite: then the
units its rows answer are all it asked):
resuming the run would never ask it, but the command that made the run, run
again, plans a new run of the suite as it is now (a run's id covers every
request) and asks it, unchanged requests coming from the cache. Runs that
recorded none of this (older runs, peers' files) are told apart by their state
alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cfkit.plural import plural
from cfkit.report.commands import SINGLE, Commands

if TYPE_CHECKING:
    from cfkit.report.sources import RunInfo


def again(run: RunInfo, without: str = "") -> str:
    """What asks a unit added to the suite since ``run`` was planned: the command that made it, run again (without
    the options ``without`` names), plans a new run of the suite as it is now."""
    return (f"run the command that made run {run.id} again{f' without {without}' if without else ''} ('cfkit "
            "probe run', or 'cfkit study run' for a study's run): it plans a new run of the suite as it is now, "
            "which asks it (unchanged requests come from the cache)")


def absent(run: RunInfo | None, case: str, pair: str, reviewed_view: bool = False,
           commands: Commands = SINGLE) -> tuple[str, str]:
    """(reason, detail) of a unit that has no prediction: ``skipped`` (the run said why it did not ask it) or
    ``absent`` (docs/report-schema.md, ``missing``). ``reviewed_view``: the report counts only the cases whose
    captions are reviewed now (``report --reviewed-only``)."""
    if run is None:
        return "absent", "no prediction for this unit"
    if (skip := dict(run.skipped).get(pair or case)) is not None:
        return "skipped", f"not asked by run {run.id}: {skip}"  # resuming the run would not ask it
    unit = "pair" if pair else "case"
    left_out = run.left_out is not None and (pair or case) in run.left_out
    if (run.imported is None or run.asked_whole) and not left_out and _planned(run, case, pair) is False:
        return "absent", _added_since(run, unit)
    if run.subset:
        flags = selection_flags(run)
        if flags == "--reviewed-only" and reviewed_view:  # its caption was a draft then, and is reviewed now
            return "absent", (f"not asked: run {run.id} asked only the cases whose captions were reviewed then "
                              f"(--reviewed-only), and this case's caption was reviewed since; {again(run)}")
        return "absent", f"not asked: run {run.id} asked only part of the suite ({flags})" + (
            f"; {commands.reviewed_only} reports the cases whose captions a person wrote or reviewed alone"
            if flags == "--reviewed-only" else "")
    # An imported run that ended (done) has a row for every request it planned, failed ones too: a unit without
    # one was never in its file, whatever its failed requests make of 'complete'.
    if not run.complete and not (run.imported is not None and run.status == "done"):
        return "absent", (f"not answered: run {run.id} is {run.status} ({run.n_done} of {plural(run.n_requests, 'reply', 'replies')}"
                          + (f"; {run.stopped}" if run.stopped else "") + ")")
    if run.imported is not None:
        return "absent", (f"not in {run.imported}, the file imported as run {run.id}: it holds no answer for this "
                          f"{unit}; import a file that covers the suite")
    return "absent", _added_since(run, unit)


def _planned(run: RunInfo, case: str, pair: str) -> bool | None:
    """Whether ``run`` planned the unit: False when its record of the cases it asked leaves the unit's case out, or
    its record of the pairs it asked leaves the pair out; None when it cannot tell (no record; a pair of a case it
    asked, from a run that recorded no pairs, which may have been added since)."""
    if run.asked is None:
        return None
    if pair and case in run.asked:
        return None if run.asked_pairs is None else pair in run.asked_pairs
    return case in run.asked


def _added_since(run: RunInfo, unit: str) -> str:
    if run.subset:
        flags = selection_flags(run)
        return (f"not asked: the {unit} was added to the suite after run {run.id} was planned, and that run asked "
                f"only part of the suite ({flags}); {again(run, flags)}")
    if not run.complete:
        return (f"not asked: the {unit} was added to the suite after run {run.id} was planned, so resuming that "
                f"{run.status} run ({run.n_done} of {plural(run.n_requests, 'reply', 'replies')}) would not ask it; {again(run)}")
    return f"not asked by run {run.id}: the {unit} was not part of the suite then (added since); {again(run)}"


def selection_flags(run: RunInfo) -> str:
    """The options with which ``run`` asked only part of its suite, as typed (``--limit 5``, ``--cases FILE``,
    ``--reviewed-only``); "a selection" where the run did not record them."""
    from cfkit.report.choice import selection_flags as flags

    return flags(run.selection)
