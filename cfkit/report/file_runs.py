"""Runs read from ``cfkit runs export`` files given to ``cfkit report --predictions``.

An export records, beside each reply, what its run was shown of the case, the
image the reply was asked with, the parser version of the reading and how the
run ended. The report takes them as it takes a stored run's record
(:class:`~cfkit.report.sources.RunInfo`), so that an answer about a case, a
caption or an image changed since the run is stale, and an incomplete run's
rows are marked, exactly as after ``cfkit runs import`` of the same file.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from cfkit.errors import PredictionError
from cfkit.report.sources import RunInfo, Sources

if TYPE_CHECKING:
    from cfkit.cases import CaseSet


@dataclass(frozen=True)
class FileRun:
    """A run as an export file records it: what a report reads of a stored run (:meth:`RunInfo.of`), the parser
    versions that read its replies, and the image each reply was asked with (what its rows say of each reply that
    gave no answer, the report reads of any converted file: :func:`cfkit.interop.reporting.reply_details`)."""

    info: RunInfo
    parsers: tuple[tuple[str, int], ...] = ()  # (parser version, replies it read), for the replies a parser read
    images: tuple[tuple[str, str, str], ...] = ()  # (case, condition, SHA-256 of the case's image as sent)


def note_file_runs(sources: Sources, file_runs: Sequence[FileRun]) -> None:
    """Take the runs the export files record as the runs of their rows in ``sources``; two runs of one model and
    suite (two files) stand together, as one run of both."""
    for run in file_runs:
        key = (run.info.model, run.info.suite)
        known = sources.runs.get(key)
        sources.runs[key] = run.info if known is None or known.id == run.info.id else _together(known, run.info)


def note_file_images(sources: Sources, file_runs: Sequence[FileRun], cases: CaseSet,
                     sha256_now: Callable[[list[str]], Mapping[str, str | None]] | None = None) -> None:
    """:meth:`Sources.note_images` for runs read from export files (after :func:`note_file_runs`): the image each
    row records, against the case's image file now (``sha256_now``: each path's digest, None where it cannot be
    read; by default each file is read)."""
    replies = [(sources.runs.get((run.info.model, run.info.suite), run.info).id, case, condition, digest)
               for run in file_runs for case, condition, digest in run.images]
    sources.note_recorded_images(cases, {(case, digest) for _, case, _, digest in replies},
                                 sha256_now or _read_digests,
                                 lambda changed: [r for r in replies if r[1] in changed])


def _together(first: RunInfo, second: RunInfo) -> RunInfo:
    """Two runs of one model and suite read from two files, as one: complete only if both are, and what each was
    shown of its cases."""
    def both(a: Mapping | None, b: Mapping | None) -> Mapping | None:
        return {**(a or {}), **(b or {})} or None

    templates = _same_templates(first, second)
    return replace(first, id=f"{first.id} + {second.id}", templates=templates, status=second.status if first.complete else first.status,
                   complete=first.complete and second.complete, n_requests=first.n_requests + second.n_requests,
                   n_done=first.n_done + second.n_done, imported=f"{first.imported} + {second.imported}",
                   captions=both(first.captions, second.captions), asked=both(first.asked, second.asked),
                   unreviewed=tuple(dict.fromkeys((*first.unreviewed, *second.unreviewed))),
                   asked_whole=first.asked_whole and second.asked_whole,
                   # a unit is left out of both only where each file's selection left it out
                   left_out=None if first.left_out is None or second.left_out is None
                   else tuple(u for u in first.left_out if u in set(second.left_out)),
                   asked_pairs=None if first.asked_pairs is None or second.asked_pairs is None
                   else first.asked_pairs | second.asked_pairs)


def _same_templates(first: RunInfo, second: RunInfo) -> Mapping[str, str] | None:
    """The templates two runs read as one were asked with (each template's digest, both runs' together), or a
    refusal where they record other texts for one template, or one records them and the other cannot tell: an
    answer is stale by its own run's templates (cfkit.report.prompts_now), which one run of both cannot hold."""
    a, b = first.templates, second.templates
    if a is not None and b is not None:
        differ = sorted(n for n in a.keys() & b.keys() if a[n] != b[n])
        if not differ:
            return {**a, **b}
        why = f"{', '.join(differ)} had another text for one than for the other"
    elif a is None and b is None and first.templates_sha256 == second.templates_sha256:
        return None
    elif a is None and b is None:
        why = "their probe templates had other texts"
    else:
        why = (f"{(second if a is not None else first).imported} was written by an earlier cfkit, which recorded no "
               "digest of each template, so which templates its answers were asked with cannot be told")
    raise PredictionError(
        f"{second.imported}: run {second.id} and run {first.id} ({first.imported}) are both of {first.model} on "
        f"{first.suite}, and two such exports are read as one run, but {why}; report each file on its own, or "
        "import each with 'cfkit runs import FILE --label NAME' and report them as two models.")


def _read_digests(paths: Sequence[str]) -> dict[str, str | None]:
    """Each file's SHA-256, read now (None where it cannot be read): for a report without a store."""
    import hashlib

    found: dict[str, str | None] = {}
    for path in dict.fromkeys(paths):
        try:
            with open(path, "rb") as fh:
                found[path] = hashlib.file_digest(fh, "sha256").hexdigest()
        except OSError:
            found[path] = None
    return found
