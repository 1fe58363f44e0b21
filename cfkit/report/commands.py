"""The commands a report's notes recommend, as they work where the report is made.

A note built for ``cfkit report`` names that command's options (``cfkit
report --reviewed-only``, ``--all-cases``) and the command that asks a run
again (``cfkit probe run``). The same notes are shown under ``cfkit study
report``, whose runs come from a study file: there the options are the study
report's (``cfkit study report FILE --reviewed-only``) or the study file's
(``all_cases = true`` in its ``[suites.modality]``), and a run is asked again
with ``cfkit study run FILE``. Every note that recommends a command takes it
from here, so it is one that works where the note is shown.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cfkit.store.runs import RunRecord


@dataclass(frozen=True)
class Commands:
    """``study``: the study file when ``cfkit study report`` makes the report (``workspace``: the workspace it
    names, as the study commands' own lines name it); None for ``cfkit report`` and the browser view."""

    study: Path | None = None
    workspace: Path | None = None

    @property
    def _file(self) -> str:
        return shlex.quote(str(self.study))

    def _study(self, command: str) -> str:
        where = [] if self.workspace is None else ["-w", str(self.workspace)]
        return shlex.join(["cfkit", *where, "study", command, str(self.study)])

    @property
    def report(self) -> str:
        """The command that makes this report again (and says on stderr what its notes say)."""
        return "cfkit report" if self.study is None else self._study("report")

    @property
    def reviewed_only(self) -> str:
        """The modality rows over the cases whose captions a person wrote or reviewed, quoted."""
        return f"'{self.report} --reviewed-only'"

    @property
    def all_cases(self) -> str:
        """What scores every case of the modality suite, not only the subset's, quoted."""
        if self.study is None:
            return "'cfkit report --all-cases'"
        return f"'all_cases = true' in [suites.modality] of {self._file}"

    @property
    def raise_limit(self) -> str:
        """What raises the token limit of a run whose replies were cut off at it, and asks again (a sentence)."""
        from cfkit.parse.trouble import RAISE_LIMIT

        if self.study is None:
            return RAISE_LIMIT
        return f"Raise the model's max_tokens in {self._file} and run '{self._study('run')}' again"

    def rerun(self, model: str, suite: str) -> str:
        """What asks ``model`` on ``suite`` again, quoted."""
        if self.study is None:
            return f"'cfkit probe run -m {model} -s {suite}'"
        return f"'{self._study('run')}'"


#: ``cfkit report``'s (and the view's).
SINGLE = Commands()


def made_by(run: RunRecord, workspace: Path | None = None) -> Commands:
    """The commands that ask ``run`` again: a study's (``cfkit study run FILE``, its file's ``max_tokens``) for a
    run ``cfkit study run`` sent last (its notes name the study file), else ``cfkit probe run``'s."""
    study = run.notes.get("study")
    return Commands(Path(study), workspace) if isinstance(study, str) and study else SINGLE
