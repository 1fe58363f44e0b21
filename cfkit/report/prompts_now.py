"""Each stored answer's probe templates against the templates in force now.

A run records the digest of each probe template its requests were rendered
from (``templates`` in its notes: :func:`cfkit.prompts.template_digests`, the
template's text without the white space at its ends, which no prompt keeps).
An answer whose prompt was rendered from a template that has changed since
(or cannot be read now) is an answer to another prompt: it is stale
(``Sources.stale_prompts``), counted wrong and marked as any stale answer is,
with the command that asks again. Only the templates of the answer's own
prompt count: ``system.txt``, ``user.txt`` and its condition's visual
template (``visual-image.txt`` or ``visual-images.txt`` by the case's number
of images), so an edit to the modality suite's ``visual-neutral.txt`` leaves
every ContextCanvas answer, and the modality Text and Image answers, standing.

A run made before cfkit recorded them has one digest over all seven
templates (``templates_sha256``). Where that digest is the one of the
templates now, nothing changed. Otherwise the texts it was taken from are
looked for among the templates now and cfkit's packaged defaults (each
template either): where one combination gives the digest, the run's texts are
known and its answers are compared as above. Where none does, which
templates changed cannot be told: its answers are not marked, and a note per
suite says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import product
from typing import TYPE_CHECKING

from cfkit.errors import TemplateError
from cfkit.plural import plural
from cfkit.prompts import (PROBE_TEMPLATES, load_templates, packaged_template, prompt_templates, sha256_of_texts,
                           template_digest)
from cfkit.vocabulary import MODALITY_CONDITIONS

if TYPE_CHECKING:
    from cfkit.cases import CaseSet
    from cfkit.predictions import Prediction
    from cfkit.report.sources import RunInfo, Sources
    from cfkit.workspace import Workspace


class _Now:
    """The probe templates in force now, each read on its own: its text and file, or why it cannot be read."""

    def __init__(self, ws: Workspace):
        self.texts: dict[str, str] = {}
        self.where: dict[str, str] = {}
        self.problems: dict[str, str] = {}
        for name in PROBE_TEMPLATES:
            try:
                read = load_templates(ws, (name,))
            except TemplateError as exc:
                self.problems[name] = str(exc)
                self.where[name] = str(ws.probes_dir / "templates" / name)
                continue
            self.texts[name], self.where[name] = read[name], str(read.sources[name])
        self.overridden = [n for n in PROBE_TEMPLATES if (ws.probes_dir / "templates" / n).is_file()]
        self.digests = {name: template_digest(text) for name, text in self.texts.items()}

    def asked_with(self, run: RunInfo) -> Mapping[str, str] | None:
        """The digest of each template ``run`` was asked with, where it can be told (see the module docstring)."""
        if run.templates is not None:
            return run.templates
        if not run.templates_sha256 or self.problems:
            return None
        # Each template the workspace overrides now was either this text or cfkit's default when the run asked.
        choices = [(self.texts[n], packaged_template(n)) if n in self.overridden else (self.texts[n],)
                   for n in PROBE_TEMPLATES]
        for texts in product(*choices):
            if sha256_of_texts(dict(zip(PROBE_TEMPLATES, texts))) == run.templates_sha256:
                return {name: template_digest(text) for name, text in zip(PROBE_TEMPLATES, texts)}
        return None


def note_templates(sources: Sources, ws: Workspace, cases: CaseSet) -> list[str]:
    """Mark stale each answer whose prompt's templates changed since its run (``sources.stale_prompts``); return a
    note per suite whose runs recorded one digest over all the templates, taken from texts that cannot be told."""
    runs = [r for r in sources.runs.values() if r.templates is not None or r.templates_sha256]
    if not runs:
        return []
    now = _Now(ws)
    unknown: dict[str, list[str]] = {}
    preds: dict[tuple[str, str], list[Prediction]] | None = None  # by (model, suite), once a run has changes
    for run in runs:
        then = now.asked_with(run)
        if then is None:
            unknown.setdefault(run.suite, []).append(run.id)
            continue
        changed = {name for name, digest in then.items() if now.digests.get(name) != digest}
        if changed:
            if preds is None:
                preds = {}
                for p in sources.preds:
                    preds.setdefault((p.model, p.suite), []).append(p)
            _mark(sources, run, preds.get((run.model, run.suite), []), then, changed, now, cases)
    return [f"{suite}: {plural(len(ids), 'run')} ({', '.join(ids[:5])}{' …' if len(ids) > 5 else ''}) "
            f"{'was' if len(ids) == 1 else 'were'} made by an earlier cfkit, which recorded one digest over all the "
            f"probe templates, and the templates now ({ws.probes_dir / 'templates'}, else cfkit's defaults) "
            + ("cannot all be read" if now.problems else "give another") + ": which of them changed since cannot be "
            "told, so its answers are not marked stale; run the suite again to be sure (the requests whose prompts "
            "did not change come from the cache)." for suite, ids in unknown.items()]


def _mark(sources: Sources, run: RunInfo, preds: list[Prediction], then: Mapping[str, str], changed: set[str],
          now: _Now, cases: CaseSet) -> None:
    """Mark stale each of ``run``'s answers ``preds`` whose prompt was rendered from a template in ``changed``."""
    for p in preds:
        if p.case not in cases:
            continue  # (a case no longer in the cases file is said where its answers are read)
        condition = p.condition if p.condition in MODALITY_CONDITIONS else "image"
        names = prompt_templates(condition, len(cases.get(p.case).images))
        hit = [n for n in names if n in changed and n in then]
        if hit:
            sources.stale_prompts[(run.id, p.case, p.condition)] = (
                "answered an earlier prompt: "
                + "; ".join(now.problems[n].rstrip(".") if n in now.problems else
                            f"{now.where[n]} has another text than when run {run.id} asked it" for n in hit)
                + f"; run the {run.suite} suite again (only the requests whose prompts changed are sent, the rest "
                "come from the cache)")
