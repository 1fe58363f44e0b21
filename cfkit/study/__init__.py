"""Studies: several models on several suites from one file, one command and one report.

Rooms: :mod:`~cfkit.study.file` (the study file and its checks),
:mod:`~cfkit.study.example` (what ``study new`` writes),
:mod:`~cfkit.study.jobs` (each (model, suite) as a probe job),
:mod:`~cfkit.study.running` (every run at once, one pacer per endpoint),
:mod:`~cfkit.study.state` (``study status``), :mod:`~cfkit.study.check`
(``study validate``) and :mod:`~cfkit.study.reporting` (``study report``).
The runs themselves are the probe engine's (:mod:`cfkit.probe`): a study's run
is the run ``cfkit probe run`` would make with the same settings.
"""

from cfkit.study.file import Study, load_study

__all__ = ["Study", "load_study"]
