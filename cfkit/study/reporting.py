"""``cfkit study report``: the report of the study's runs, through :func:`cfkit.report.make_report`.

The runs are those ``study status`` finds for the study's current inputs
(done, or incomplete and marked so by the report); a run never started, or
stale, is left out and named. Rows are labelled by the model each run
recorded (as in ``cfkit report``); the study's groups and compare pairs are
translated to those labels.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cfkit.errors import ConfigError, NotFoundError
from cfkit.store import Store, runs
from cfkit.study.file import Study
from cfkit.study.state import RunState, study_status
from cfkit.workspace import Workspace


@dataclass
class StudyReport:
    """The report, and what the study did not contribute to it."""

    report: object  # cfkit.report.Report
    run_ids: list[str]
    left_out: list[RunState] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)  # study model name -> the report's label


def study_report(ws: Workspace, study: Study) -> StudyReport:
    from cfkit.report import make_report

    if not ws.db_path.is_file():
        raise NotFoundError(f"no stored runs ({ws.db_path} does not exist); run 'cfkit study run {study.path}' first.")
    with Store(ws.db_path) as store:
        states = study_status(ws, study, store)
        reported = [s for s in states if s.run_id is not None and s.state in ("done", "incomplete", "running")]
        labels: dict[str, str] = {}
        for s in reported:
            labels[s.model] = runs.get_run(store, s.run_id).model
    owners: dict[str, str] = {}
    for model, label in labels.items():
        if owners.setdefault(label, model) != model:
            raise ConfigError(f"study file {study.path}: models '{owners[label]}' and '{model}' are both {label} in "
                              "the store, and a report shows one row per model; keep one in the study.")
    if not reported:
        raise NotFoundError(f"no run of study {study.name} has replies yet; run 'cfkit study run {study.path}'.")
    groups = {labels[name]: m.group for name, m in study.models.items() if m.group and name in labels}
    compare = [(labels[a], labels[b]) for a, b in study.data.report.compare if a in labels and b in labels]
    settings = study.data.report
    modality = {}
    if "modality" in study.suites:  # the report reads the modality cases the study asked
        from cfkit.study.jobs import selection_of

        chosen = selection_of(ws, study, "modality")
        modality = {"subset": chosen.subset, "all_cases": chosen.all_cases}
    result = make_report(ws, run_refs=[s.run_id for s in reported], compare=compare, n_resamples=settings.resamples,
                         seed=settings.seed, groups=groups or None, **modality)
    left = [s for s in states if s not in reported]
    return StudyReport(result, [s.run_id for s in reported], left, labels)
