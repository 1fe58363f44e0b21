"""From answers to outcomes: a prediction is correct only when its option id equals the gold id."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cfkit.plural import plural


def as_answers(values: Sequence[str | None] | np.ndarray) -> np.ndarray:
    """Answers (option ids, texts or None) as a 1-D object array, one entry per unit (a 1-D object array is
    taken as it is, unchanged: callers only read it, and a report passes its gold columns once for every model)."""
    if isinstance(values, np.ndarray) and values.dtype == object and values.ndim == 1:
        return values
    return np.asarray(list(values), dtype=object)


def read_only_answers(values: Sequence[str | None]) -> np.ndarray:
    """``values`` as a read-only 1-D object array, for a column shared by many calls (each takes it as it is)."""
    array = np.empty(len(values), dtype=object)
    array[:] = values
    array.flags.writeable = False
    return array


def correct_mask(predicted: Sequence[str | None], gold: Sequence[str | None]) -> np.ndarray:
    """True where the predicted option id equals the gold id; a null answer is never correct."""
    pred = as_answers(predicted)
    ref = as_answers(gold)
    if pred.shape != ref.shape:
        raise ValueError(f"predicted has {plural(pred.shape[0], 'entry', 'entries')} but gold has {ref.shape[0]}; give one per unit")
    # Compared a whole column at a time (numpy calls == on each pair of objects in C): ``p is not None and p == g``.
    return np.equal(pred, ref).astype(bool) & np.not_equal(pred, None).astype(bool)


def percent(mask: np.ndarray) -> float:
    """Share of True entries in percent (0 for an empty mask)."""
    return 100.0 * float(mask.mean()) if mask.size else 0.0


def as_flags(values: Sequence[bool] | np.ndarray, name: str) -> np.ndarray:
    """Yes/no labels (bool, or 0/1) as a 1-D bool array; anything else is refused with its position."""
    if isinstance(values, np.ndarray) and values.dtype == bool:
        return values.reshape(-1)
    items = values.reshape(-1).tolist() if isinstance(values, np.ndarray) else list(values)
    for i, value in enumerate(items):
        if not (isinstance(value, (bool, int, float, np.bool_, np.number)) and value in (0, 1)):
            raise ValueError(f"{name}[{i}] is {value!r}; labels must be yes/no (True/False or 1/0). "
                             "Leave out units without a label before computing.")
    return np.array(items, dtype=bool)
