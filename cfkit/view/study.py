"""The view's study page (``cfkit view --study FILE``): where each run of a study stands, and its report.

The states are :func:`cfkit.study.state.study_status`'s, as ``cfkit study
status`` prints them, with the line it ends with; the tables are
:func:`cfkit.study.reporting.study_report`'s, as ``cfkit study report`` prints
them (the study's groups, compare pairs, display names, modality cases and
reference setting), with the lines that qualify them. The view's own report
page reads the workspace's newest runs instead, which may be other runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cfkit.errors import CfkitError

if TYPE_CHECKING:
    from cfkit.study.file import Study
    from cfkit.study.state import RunState
    from cfkit.workspace import Workspace


@dataclass(frozen=True)
class StudyShown:
    """One study as its section of the page shows it."""

    name: str
    file: str
    models: dict[str, str]  # the study's model name -> KIND:NAME as the study file gives it
    states: list[RunState]
    last: str | None  # study status's last line, when a run is not done
    commands: dict[str, str]  # what a researcher runs next: status, run, report
    tables: list[Any]  # cfkit.report.tables.DisplayTable of the study's report
    said: list[str]  # the lines that qualify the tables, as study report says them on stderr
    short: str | None  # the study report's last line when the report is not the whole study
    problem: str | None  # why there is no report (no run can be reported yet), or None


def study_shown(ws: Workspace, study: Study) -> StudyShown:
    """``study`` as the page shows it: its runs' states and its report (nothing sent to a model or written)."""
    from cfkit.store import Store
    from cfkit.study.state import status_line, study_command, study_status

    if ws.db_path.is_file():
        with Store(ws.db_path) as store:
            states = study_status(ws, study, store)
    else:
        states = study_status(ws, study, None)
    file = study.path.resolve()
    commands = {verb: study_command(ws.root, file, verb) for verb in ("status", "run", "report")}
    tables, said, short, problem = [], [], None, None
    try:
        from cfkit.report import display_tables
        from cfkit.study.reporting import study_report

        made = study_report(ws, study, states=states)
    except CfkitError as exc:
        problem = str(exc)
    else:
        tables = display_tables(made.report, reference=study.data.report.reference)
        said = made.inputs.left_out_lines() + made.report.said()
        short = made.inputs.short_of_the_study(f"'{commands['run']}'")
    return StudyShown(study.name, str(file), {name: m.model for name, m in study.models.items()}, states,
                      status_line(ws.root, study, states), commands, tables, said, short, problem)
