"""Display names: ``report --label MODEL=NAME`` shows a model under another name in every table, plot, the JSON
and the EGA section (``--compare`` and ``--groups`` then use the new name).

The names are checked before anything is renamed: every MODEL must be a model
of the report, and no two models may end up under one name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from cfkit.errors import UsageError
from cfkit.report.sources import Sources

if TYPE_CHECKING:  # the EGA section's module (and the audit's) is loaded only for report --ega
    from cfkit.report.grounding import EgaSection


def parse_label(text: str) -> tuple[str, str]:
    """``"MODEL=NAME"`` → ``(MODEL, NAME)``; the model's own name may hold '=', so the last '=' splits."""
    model, sep, name = text.rpartition("=")
    if not sep or not model.strip() or not name.strip():
        raise UsageError(f"--label '{text}' is not MODEL=NAME; give a model as the report names it and the name to "
                         "show, e.g. --label 'openai:gpt-5.5=GPT-5.5'.")
    return model.strip(), name.strip()


def check_labels(labels: Mapping[str, str], models: Iterable[str]) -> None:
    """Refuse a label for a model the report does not have, and two models under one name."""
    known = list(dict.fromkeys(models))
    for model in labels:
        if model not in known:
            raise UsageError(f"--label: the report has no model '{model}' (models: {', '.join(known) or 'none'}).")
    shown: dict[str, str] = {}
    for model in known:
        name = labels.get(model, model)
        if name in shown:
            raise UsageError(f"--label: models '{shown[name]}' and '{model}' would both be shown as '{name}'; "
                             "give each its own name.")
        shown[name] = model


def relabel_sources(sources: Sources, labels: Mapping[str, str]) -> Sources:
    """The predictions and what is known about their runs, under the display names."""
    if not labels:
        return sources
    name = lambda model: labels.get(model, model)  # noqa: E731
    return dataclasses.replace(
        sources,
        preds=[p.model_copy(update={"model": name(p.model)}) for p in sources.preds],
        runs={(name(m), suite): dataclasses.replace(run, model=name(m)) for (m, suite), run in sources.runs.items()},
        details={(name(key[0]), *key[1:]): detail for key, detail in sources.details.items()},
        set_aside=[dataclasses.replace(a, model=name(a.model)) for a in sources.set_aside],
    )


def relabel_ega(section: EgaSection, labels: Mapping[str, str]) -> EgaSection:
    """The EGA section under the display names."""
    if not labels:
        return section
    return dataclasses.replace(
        section, rows=[dataclasses.replace(r, model=labels.get(r.model, r.model)) for r in section.rows],
        pending=[dataclasses.replace(p, model=labels.get(p.model, p.model)) for p in section.pending],
        audited_runs=tuple((labels.get(m, m), run) for m, run in section.audited_runs))


def labels_from(texts: Sequence[str]) -> dict[str, str]:
    """The ``--label`` options as a mapping; one model labelled twice is refused."""
    labels: dict[str, str] = {}
    for text in texts:
        model, name = parse_label(text)
        if model in labels and labels[model] != name:
            raise UsageError(f"--label gives model '{model}' two names ('{labels[model]}', '{name}'); keep one.")
        labels[model] = name
    return labels
