"""Caption files (``captions/CASE.yaml``): the Neutral and Evidence texts of the modality probe.

``neutral`` describes the visible content with no names and no verdict;
``evidence`` states the decisive visible cue plainly; ``author`` is ``human``
or the drafting model; ``reviewed`` is true once a person has read it. The
Evidence condition is Neutral followed by the evidence text
(:mod:`cfkit.prompts`). The lint is :mod:`cfkit.lint`, drafting by a model
:mod:`cfkit.drafts`.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cfkit.cases import check_case_id
from cfkit.errors import CaptionError, describe_validation
from cfkit.files import read_text
from cfkit.plural import agree, plural
from cfkit.workspace import Workspace
from cfkit.yamlfile import load_yaml

HUMAN = "human"



class Caption(BaseModel):
    """One ``captions/CASE.yaml`` file."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)

    neutral: str = Field(description="visible content only: no names, no verdict")
    evidence: str | None = Field(None, description="the decisive visible cue, stated plainly")
    author: str = Field(HUMAN, min_length=1, description="'human' or the drafting model, KIND:NAME")
    reviewed: bool = Field(False, description="true once a person has read the caption")
    identity_terms: list[str] = Field(default_factory=list, description="names that must not appear")
    allow_terms: list[str] = Field(
        default_factory=list,
        description="title or option words a reviewer confirmed are plain description here",
    )

    @property
    def drafted(self) -> bool:
        return self.author != HUMAN


def caption_path(ws: Workspace, case_id: str) -> Path:
    """The caption file of ``case_id``; an id that is not a case id (``../../x``) never becomes a path."""
    return ws.captions_dir / f"{check_case_id(case_id)}.yaml"


def parse_caption(text: str, path: Path) -> Caption:
    """Parse caption YAML; errors name the file and the field."""
    raw = load_yaml(text, path, CaptionError)
    if not isinstance(raw, dict):
        raise CaptionError(f"{path}: expected a mapping with 'neutral', 'evidence', 'author', 'reviewed'.")
    try:
        return Caption.model_validate(raw)
    except ValidationError as exc:
        raise CaptionError(f"{path}: {describe_validation(exc, Caption)}") from exc


def load_caption(ws: Workspace, case_id: str) -> Caption:
    """The caption of ``case_id``; :class:`CaptionError` when it is missing or malformed."""
    path = caption_path(ws, case_id)
    try:
        text = read_text(path, "caption file", CaptionError)
    except FileNotFoundError:
        raise CaptionError(
            f"{path}: no caption for case {case_id}. Write one (neutral, evidence, author, reviewed) "
            f"or run 'cfkit captions draft --model KIND:NAME {case_id}'."
        ) from None
    return parse_caption(text, path)


#: How many missing captions :func:`require_captions` names.
NAMED_MISSING = 5


def require_captions(ws: Workspace, case_ids: list[str]) -> None:
    """A :class:`CaptionError` naming how many of ``case_ids`` have no caption file, and the first few.

    One line, before anything is read or sent, with the command that drafts them.
    """
    missing = [c for c in case_ids if not caption_path(ws, c).is_file()]
    if not missing:
        return
    shown = missing[:NAMED_MISSING]
    named = ", ".join(shown) + (f", … (the first {NAMED_MISSING})" if len(missing) > len(shown) else "")
    them = agree(len(missing), "them")
    draft = "cfkit captions draft --model KIND:NAME" + ("".join(f" {c}" for c in missing)
                                                       if len(missing) == len(shown) else "")
    raise CaptionError(f"{len(missing)} of {plural(len(case_ids), 'selected case')} "
                       f"{agree(len(missing), 'have')} no caption in {ws.captions_dir} "
                       f"({named}). Write {them} (neutral, evidence, author, reviewed) or have a model draft {them} "
                       f"with '{draft}'; 'cfkit captions lint' lists {them}.")


def dump_caption(caption: Caption) -> str:
    """Caption YAML in the field order of the format."""
    data = caption.model_dump(exclude_defaults=False)
    for key in ("identity_terms", "allow_terms"):
        if not data[key]:
            del data[key]
    if data["evidence"] is None:
        del data["evidence"]
    import yaml

    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)


def caption_files(ws: Workspace) -> list[Path]:
    folder = ws.captions_dir
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.yaml") if not p.name.startswith("."))
