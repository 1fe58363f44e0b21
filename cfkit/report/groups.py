"""Model groups, as the paper's Table 2 sets them out: closed-source, open-weight general, aesthetic-specific.

A model's group comes from the ``--groups FILE`` mapping (model label →
group) when the file names it, else from the paper's Table 2 when the label is
one of the paper's model names (``cfkit/data/reference.json``), else it has
none. The three groups of the paper have an id (``closed``, ``open``,
``aesthetic``), a label and an order; any other group a file names is shown
under its own name after them, in the order first met, and models without a
group come last.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path


from cfkit.errors import NotFoundError, UsageError
from cfkit.files import read_text
from cfkit.report.reference import load_reference
from cfkit.yamlfile import load_yaml

#: The heading of models without a group, where other rows have one.
UNGROUPED = "Other models"


def paper_groups() -> dict[str, str]:
    """The group id of each model the paper names: Table 2's rows, and the short names its other tables use."""
    ref = load_reference()
    groups = {row["model"]: row["group"] for row in ref["tables"]["table2"]["rows"]}
    for alias, name in ref["groups"]["aliases"].items():
        groups[alias] = groups[name]
    return groups


def group_labels() -> dict[str, str]:
    """Group id → the heading the paper gives it, in the paper's order."""
    return dict(load_reference()["groups"]["labels"])


def load_groups(path: Path | str) -> dict[str, str]:
    """A ``--groups`` file: a YAML (or JSON) mapping of model label to group, e.g. ``"hf:artquant": aesthetic``.

    The group is one of the paper's ids (``closed``, ``open``, ``aesthetic``) or
    any other name, shown as it is written.
    """
    path = Path(path)
    try:
        text = read_text(path, "--groups file", UsageError)
    except FileNotFoundError:
        raise NotFoundError(f"--groups file {path} not found; give a YAML file mapping each model to its group, "
                            "e.g. 'openai:gpt-5.5: closed'.") from None
    data = load_yaml(text, f"--groups file {path}", UsageError, shape="write one 'model: group' a line")
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UsageError(f"--groups file {path} holds a {type(data).__name__}, not a mapping; write one "
                         "'model: group' a line (quote a model name that has a colon).")
    groups = {}
    for model, group in data.items():
        if not isinstance(model, str) or not isinstance(group, str) or not model.strip() or not group.strip():
            raise UsageError(f"--groups file {path}: entry {model!r}: {group!r} is not 'model: group' with two "
                             "non-empty names; quote them if YAML reads them as something else.")
        groups[model.strip()] = group.strip()
    return groups


def resolve_groups(models: Iterable[str], given: Mapping[str, str] | None = None) -> dict[str, str | None]:
    """Each model's group id: from ``given`` (a ``--groups`` file) first, else the paper's, else None."""
    paper = paper_groups()
    given = given or {}
    return {m: given.get(m, paper.get(m)) for m in models}


def group_label(group: str | None) -> str:
    """The heading of a group: the paper's label for its own ids, the name itself for others."""
    if group is None:
        return UNGROUPED
    return group_labels().get(group, group)


def group_rank(groups: Iterable[str | None]) -> dict[str | None, int]:
    """A position for every group met: the paper's groups first in its order, then others as met, None last."""
    order: list[str | None] = [g for g in group_labels()]
    for g in groups:
        if g is not None and g not in order:
            order.append(g)
    rank: dict[str | None, int] = {g: i for i, g in enumerate(order)}
    rank[None] = len(order)
    return rank
