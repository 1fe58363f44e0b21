"""Which source column fills which case field: explicit ``--map`` entries, then the defaults."""

from __future__ import annotations

import difflib
import re

from cfkit.errors import CaseError
from cfkit.cases_import.sources import SourceTable, normalize_column

#: Default mapping: case field -> the column names (after :func:`normalize_column`) it is read from.
#: Names follow the AesCanvas supplement's case record (evaluation id, original case id, image
#: descriptor(s), question, options, gold option id and text, rationale, source basis,
#: provenance and rights fields) and cfkit's own field names.
DEFAULT_COLUMNS: dict[str, tuple[str, ...]] = {
    "id": ("id", "evaluation_id", "eval_id", "stable_evaluation_id"),
    "images": ("images", "image", "image_path", "image_paths", "image_file", "image_files", "image_descriptor",
               "image_descriptors", "image_descriptor_s"),
    "question": ("question", "question_text"),
    "options": ("options", "choices", "fixed_options"),
    "gold": ("gold", "gold_id", "gold_option", "gold_option_id", "answer", "answer_id", "label"),
    "gold_text": ("gold_text", "gold_option_text", "answer_text"),
    # The gold option's 0-based position among the options, as Hugging Face datasets store an answer into a
    # 'choices' list. Never guessed from a column name (an integer 'answer' may be an id): only --map sets it.
    "gold_index": (),
    "yes_option": ("yes_option", "yes_option_id"),
    "rationale": ("rationale", "source_grounded_rationale", "explanation"),
    "domain": ("domain",),
    "provenance": ("provenance",),
    "provenance.title": ("title", "source_title", "provenance_title"),
    "provenance.creator": ("creator", "artist", "provenance_creator"),
    "provenance.provider": ("provider", "source_provider", "provenance_provider"),
    "provenance.url": ("url", "source_url", "provenance_url"),
    "provenance.license": ("license", "licence", "provenance_license"),
    "provenance.redistribution": ("redistribution", "rights", "redistribution_rights", "provenance_redistribution"),
    "provenance.original_id": ("original_case_id", "original_id", "case_id", "provenance_original_id"),
    "provenance.source_basis": ("source_basis", "provenance_source_basis"),
}
#: Fields that may be spread over several columns (one per option / image), e.g. option_A, option_B.
NUMBERED = {"options": re.compile(r"(?:option|choice)(?:_([a-z])|_?(\d+))"), "images": re.compile(r"(?:image|img)_?(\d+)")}
REQUIRED = ("id", "images", "question", "options")


def resolve_mapping(table: SourceTable, entries: list[str]) -> dict[str, tuple[str, ...]]:
    """Which source columns fill which case field (an empty tuple: the field is left out)."""
    fields: dict[str, tuple[str, ...]] = {}
    for entry in entries:
        name, sep, value = entry.partition("=")
        name = name.strip()
        if not sep:
            raise CaseError(f"--map '{entry}' is not FIELD=COLUMN (FIELD= leaves a field out).")
        if name not in DEFAULT_COLUMNS:
            raise CaseError(f"--map '{entry}': unknown field '{name}'. Fields: {', '.join(DEFAULT_COLUMNS)}.")
        if name in fields:
            raise CaseError(f"--map gives field '{name}' twice; give it once.")
        fields[name] = _explicit_columns(table, name, value)
    if fields.get("gold") and fields.get("gold_index"):
        raise CaseError(f"--map gold={','.join(fields['gold'])} and --map gold_index={','.join(fields['gold_index'])} "
                        "both give the gold answer; keep one (gold: an option id or text, gold_index: its 0-based "
                        "position among the options).")
    if fields.get("gold_index"):
        fields.setdefault("gold", ())  # the index gives the gold: no other column is taken for it by its name
    claimed = {c for cols in fields.values() for c in cols}
    by_norm: dict[str, list[str]] = {}
    for column in table.columns:
        if column not in claimed:
            by_norm.setdefault(normalize_column(column), []).append(column)
    for name, aliases in DEFAULT_COLUMNS.items():
        if name in fields:
            continue
        found = [c for alias in aliases for c in by_norm.get(alias, [])]
        numbered = _numbered(name, [c for cols in by_norm.values() for c in cols])
        if numbered and found:
            found = found + [", ".join(numbered)]
        elif numbered:
            fields[name] = tuple(numbered)
            continue
        if len(found) > 1:
            shown = ", ".join(f"'{c}'" for c in found)
            raise CaseError(f"{table.path}: field '{name}' could come from the columns {shown}; choose one with "
                            f"--map {name}=COLUMN (or leave it out with --map {name}=).")
        fields[name] = tuple(found)
    missing = [f for f in REQUIRED if not fields.get(f)]
    if not fields.get("gold") and not fields.get("gold_text") and not fields.get("gold_index"):
        missing.append("gold")
    if missing:
        free = [c for c in table.columns if c not in {x for cols in fields.values() for x in cols}]
        raise CaseError(f"{table.path}: no column for {', '.join(map(repr, missing))}; the unmapped columns are "
                        f"{', '.join(map(repr, free)) or 'none'}; give --map {missing[0]}=COLUMN.")
    return {name: fields[name] for name in DEFAULT_COLUMNS if name in fields}


def _explicit_columns(table: SourceTable, name: str, value: str) -> tuple[str, ...]:
    value = value.strip()
    if not value:
        return ()
    if value in table.columns:
        return (value,)
    parts = [p.strip() for p in value.split(",")]
    if len(parts) > 1 and name not in NUMBERED:
        raise CaseError(f"--map {name}={value}: only options and images take several columns.")
    for part in parts:
        if part not in table.columns:
            near = difflib.get_close_matches(part, table.columns, n=3)
            hint = f" Did you mean {', '.join(map(repr, near))}?" if near else ""
            raise CaseError(f"--map {name}={value}: {table.path} has no column '{part}'.{hint} "
                            f"Columns: {', '.join(table.columns)}.")
    return tuple(parts)


def column_suffix(match: re.Match[str]) -> str:
    return next(g for g in match.groups() if g is not None)


def _numbered(name: str, columns: list[str]) -> list[str]:
    pattern = NUMBERED.get(name)
    if pattern is None:
        return []
    hits = [(column_suffix(m), c) for c in columns if (m := pattern.fullmatch(normalize_column(c)))]
    if len(hits) < 2 and name == "options":
        return []
    # Columns in their natural order: option_A, option_B …; image_1, image_2, image_10.
    return [c for _, c in sorted(hits, key=lambda h: (len(h[0]), h[0]) if h[0].isdigit() else (0, h[0]))]
