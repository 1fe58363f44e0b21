"""``cfkit study report``: the report of the study's runs, through :func:`cfkit.report.make_report`.

The runs are those ``study status`` finds for the study's current inputs
(done, or incomplete and marked so by the report); a run never started, or
stale, is left out and named, and ``study report`` then ends with one line
saying the report is not the whole study (exit status 1). Rows are shown under each model's display name
(``display``, else the model as its runs recorded it, as ``cfkit report`` does),
given to the report as ``--label MODEL=NAME``; the study's groups and compare
pairs are translated to those names, and its modality suite's subset is the
report's, as is its ``reviewed_only`` (the rows over the cases whose captions a
person wrote or reviewed, as ``cfkit report --reviewed-only``; ``study report
--reviewed-only`` asks it of a study that asked every case). A compare pair is made on the contextcanvas cases; a pair one of
whose models has no contextcanvas run in the report is left out and named
(the rest of the report stands).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cfkit.errors import ConfigError, NotFoundError
from cfkit.plural import agree, plural
from cfkit.store import Store, runs
from cfkit.study.file import Study
from cfkit.study.state import RunState, study_status
from cfkit.workspace import Workspace


@dataclass
class ReportInputs:
    """What the report of a study reads: its runs, and its settings in the report's terms (model labels)."""

    run_ids: list[str]
    groups: dict[str, str]  # model label -> group
    compare: list[tuple[str, str]]  # (base label, other label)
    subset: object = None  # the modality cases the study asked (a subset file), as make_report takes them
    all_cases: bool = False
    left_out: list[RunState] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)  # study model name -> the model its runs recorded
    renames: dict[str, str] = field(default_factory=dict)  # recorded model -> display name, where they differ
    compare_left_out: list[str] = field(default_factory=list)  # a line for each compare pair the report cannot make
    partial: list[RunState] = field(default_factory=list)  # reported runs still incomplete (or running)
    reviewed_only: bool = False  # the study asks modality of the cases with reviewed captions alone

    def left_out_lines(self) -> list[str]:
        """A line for each run left out of the report (its state, and why) and each compare pair it cannot make,
        said with the report's notes."""
        return [f"{x.said}; left out of the report." for x in self.left_out] + self.compare_left_out

    def short_of_the_study(self, again: str) -> str | None:
        """One line when the report is not the whole study (a run left out, a run reported incomplete, a compare
        pair it cannot make): how many of each, the first few named, and the way on; else None."""
        parts = []
        # A run with no reply yet has nothing the report could count: it is left out, however far it got.
        left_out = self.left_out + [s for s in self.partial if not s.done]
        partial = [s for s in self.partial if s.done]
        if left_out:
            parts.append(f"{plural(len(left_out), 'run')} left out ({_named(left_out)})")
        if partial:
            parts.append(f"{plural(len(partial), 'run')} reported incomplete, {agree(len(partial), 'their')} "
                         "missing answers counted wrong "
                         f"({_named(partial)})")
        if self.compare_left_out:
            parts.append(f"{plural(len(self.compare_left_out), 'compare pair')} left out")
        if not parts:
            return None
        return (f"the report is not the whole study: {'; '.join(parts)}, as said above; {again} asks what is "
                "missing.")


def _named(states: list[RunState], most: int = 3) -> str:
    shown = ", ".join(f"{s.display} {s.suite}: {s.state}" for s in states[:most])
    return shown + (f" and {len(states) - most} more" if len(states) > most else "")


@dataclass
class StudyReport:
    """The report, and what the study did not contribute to it."""

    report: object  # cfkit.report.Report
    inputs: ReportInputs


def report_inputs(ws: Workspace, study: Study, states: list[RunState] | None = None) -> ReportInputs:
    """The runs the study's report reads (see the module docstring), its groups and compare pairs by label;
    ``states``: the study's :func:`~cfkit.study.state.study_status` where the caller has it already (it asks the
    endpoints of runs not started)."""
    if not ws.db_path.is_file():
        raise NotFoundError(f"no stored runs ({ws.db_path} does not exist); run 'cfkit study run {study.path}' first.")
    with Store(ws.db_path) as store:
        if states is None:
            states = study_status(ws, study, store)
        reported = [s for s in states if s.run_id is not None and s.state in ("done", "incomplete", "running")]
        labels: dict[str, str] = {}
        for s in reported:
            labels[s.model] = runs.get_run(store, s.run_id).model
    clash = study.label_clash(labels)
    if clash is not None:
        raise ConfigError(clash)
    if not reported:  # why each is left out: not started, or stale (replies to inputs changed since), failed, …
        said = "; ".join(s.said for s in states[:3])
        more = f"; and {len(states) - 3} more" if len(states) > 3 else ""
        raise NotFoundError(f"no run of study {study.name} can be reported from its current inputs ({said}{more}); "
                            f"run 'cfkit study run {study.path}'.")
    shown = {name: study.models[name].display or label for name, label in labels.items()}
    groups = {shown[name]: m.group for name, m in study.models.items() if m.group and name in labels}
    compare, compare_left_out = _compare_pairs(study, states, reported, shown)
    made = ReportInputs([s.run_id for s in reported], groups, compare,
                        left_out=[s for s in states if s not in reported], labels=labels,
                        renames={labels[name]: shown[name] for name in labels if shown[name] != labels[name]},
                        compare_left_out=compare_left_out, partial=[s for s in reported if s.state != "done"])
    if "modality" in study.suites:  # the report reads the modality cases the study asked
        from cfkit.study.jobs import selection_of

        chosen = selection_of(ws, study, "modality")
        made.subset, made.all_cases = chosen.subset, chosen.all_cases
        # A study that asked only the cases with reviewed captions is reported over them (report --reviewed-only):
        # else the cases it did not ask would be counted wrong.
        made.reviewed_only = chosen.reviewed_only
    return made


def _compare_pairs(study: Study, states: list[RunState], reported: list[RunState],
                   shown: dict[str, str]) -> tuple[list[tuple[str, str]], list[str]]:
    """The study's compare pairs by the names the report shows, those whose two models both have a contextcanvas
    run in it; and a line for each of the others, naming the model without one and where its run stands."""
    answered = {s.model for s in reported if s.suite == "contextcanvas"}
    where = {s.model: s for s in states if s.suite == "contextcanvas"}
    made, left_out = [], []
    for base, other in study.data.report.compare:
        lacking = [m for m in (base, other) if m not in answered]
        if not lacking:
            made.append((shown[base], shown[other]))
            continue
        why = "; ".join(f"{study.display(m)} has no contextcanvas run with replies ({where[m].state}"
                        f"{f': {where[m].detail}' if where[m].detail else ''})" for m in lacking)
        left_out.append(f"[report] compare {study.display(base)} vs {study.display(other)}: left out of the report, "
                        f"as the pair is compared on the contextcanvas cases and {why}; 'cfkit study run "
                        f"{study.path}' runs what is missing.")
    return made, left_out


def study_report(ws: Workspace, study: Study, *, reviewed_only: bool = False,
                 states: list[RunState] | None = None) -> StudyReport:
    """The study's report through :func:`cfkit.report.make_report` (``cfkit study report`` goes through the
    ``cfkit report`` command with the same inputs, so both print alike); ``reviewed_only``: the modality rows over
    the cases whose captions a person wrote or reviewed (``--reviewed-only``; always when the study asked only
    those); ``states``: as :func:`report_inputs` takes them."""
    from cfkit.report import make_report
    from cfkit.report.commands import Commands

    made = report_inputs(ws, study, states)
    settings = study.data.report
    result = make_report(ws, run_refs=made.run_ids, compare=made.compare, n_resamples=settings.resamples,
                         seed=settings.seed, groups=made.groups or None, subset=made.subset,
                         all_cases=made.all_cases, only_named=True, labels=made.renames or None,
                         reviewed_only=reviewed_only or made.reviewed_only,
                         commands=Commands(study.path.resolve(), ws.root))
    return StudyReport(result, made)
