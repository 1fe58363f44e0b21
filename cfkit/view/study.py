"""The view's study page (``cfkit view --study FILE``): where each run of a study stands, and its report.

The states are :func:`cfkit.study.state.study_status`'s, as ``cfkit study
status`` prints them, with the line it ends with; the tables are
:func:`cfkit.study.reporting.study_report`'s, as ``cfkit study report`` prints
them (the study's groups, compare pairs, display names, modality cases and
reference setting), with the lines that qualify them. The view's own report
page reads the workspace's newest runs instead, which may be other runs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from cfkit.errors import CfkitError

if TYPE_CHECKING:
    from cfkit.study.check import EndpointCheck
    from cfkit.study.file import Study
    from cfkit.study.state import RunState
    from cfkit.workspace import Workspace

#: Seconds a check of a study's servers is reused: the page loaded again within them asks no server (one that
#: does not answer holds each check for its time limit, 5 s), and says when they were checked.
KEEP_S = 30.0


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
    checked: datetime | None = None  # when the servers of its runs not started were asked; None: none was


class RecentChecks:
    """:func:`cfkit.study.check.check_endpoints` of each study, its answer reused for ``keep_s`` seconds (the same
    study, the same runs not started): the served page, loaded again and again, asks the servers once in
    ``keep_s``."""

    def __init__(self, keep_s: float | None = None):
        self.keep_s = KEEP_S if keep_s is None else keep_s
        self._kept: dict[tuple[str, frozenset[str]], tuple[float, datetime, EndpointCheck]] = {}

    def check(self, study: Study, models) -> tuple[EndpointCheck, datetime]:
        """The check of ``models``' servers and when it was made (now, or within ``keep_s``)."""
        from cfkit.study.check import check_endpoints

        key = (str(study.path), frozenset(models))
        kept = self._kept.get(key)
        if kept is None or time.monotonic() - kept[0] >= self.keep_s:
            began, at = time.monotonic(), datetime.now().astimezone()
            kept = self._kept[key] = (began, at, check_endpoints(study, models))
        return kept[2], kept[1]


def study_shown(ws: Workspace, study: Study, checks: RecentChecks | None = None) -> StudyShown:
    """``study`` as the page shows it: its runs' states and its report (nothing sent to a model or written);
    ``checks``: its servers' check, reused while recent (a new one by default)."""
    from cfkit.store import Store
    from cfkit.study.state import status_line, study_command, study_status

    checks = checks if checks is not None else RecentChecks()
    checked: list[datetime] = []  # when the check this page shows was made (none when no server was asked)

    def reach(study: Study, models) -> EndpointCheck:
        check, at = checks.check(study, models)
        checked.append(at)
        return check

    if ws.db_path.is_file():
        with Store(ws.db_path) as store:
            states = study_status(ws, study, store, reach=reach)
    else:
        states = study_status(ws, study, None, reach=reach)
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
                      status_line(ws.root, study, states), commands, tables, said, short, problem,
                      checked[-1] if checked else None)
