"""Probe prompts: the templates and the four conditions rendered from them.

The modality probe asks one question four ways (paper, Table S9):

* ``text``     question and options only;
* ``neutral``  a description of the visible content, with no names and no verdict;
* ``evidence`` the same description followed by the decisive visible cue, stated plainly;
* ``image``    the image itself (two images for the paired-image case).

All four are rendered from the same templates and differ only in the visual
slot, so a change in accuracy between two conditions is a change in the visual
information and nothing else. Gold, rationale and provenance never reach a model.

Templates live in ``cfkit/templates/`` and may be replaced file by file from
``<workspace>/probes/templates/``:

``system.txt``         the system message
``user.txt``           the user message; ``{visual}``, ``{question}`` and ``{options}`` once each
``visual-text.txt``    the visual slot of the text condition
``visual-neutral.txt`` … of the neutral condition; ``{neutral}``
``visual-evidence.txt``… of the evidence condition; ``{neutral}`` and ``{evidence}``
``visual-image.txt``   … of the image condition with one image
``visual-images.txt``  … with two images (names them the first and the second image)

``draft-system.txt`` and ``draft-user.txt`` (``{images}``) instruct a model
drafting a caption (:mod:`cfkit.drafts`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from cfkit.cases import Case
from cfkit.errors import CaptionError, CaseError, TemplateError, UsageError
from cfkit.files import read_text
from cfkit.subsets import select_cases, workspace_cases
from cfkit.vocabulary import MODALITY_CONDITIONS
from cfkit.workspace import Workspace

if TYPE_CHECKING:
    from cfkit.captions import Caption

# Captions (a pydantic model, built at import) load where a caption condition is rendered: the image condition,
# all a contextcanvas run asks, needs none.

CONDITIONS: tuple[str, ...] = MODALITY_CONDITIONS

#: The probe templates, in the order they are hashed.
PROBE_TEMPLATES: tuple[str, ...] = (
    "system.txt",
    "user.txt",
    "visual-text.txt",
    "visual-neutral.txt",
    "visual-evidence.txt",
    "visual-image.txt",
    "visual-images.txt",
)

_SLOT = re.compile(r"\{(visual|question|options|neutral|evidence|images)\}")


@dataclass(frozen=True)
class Prompt:
    """Exactly what a model receives: a system message, a user text and the images, in order."""

    system: str
    user: str
    images: tuple[Path, ...]


@dataclass(frozen=True)
class Templates:
    """The probe templates in force for a workspace, with where each one came from."""

    texts: dict[str, str]
    sources: dict[str, Path]

    def __getitem__(self, name: str) -> str:
        return self.texts[name]


#: The packaged templates' folder where cfkit is installed as plain files (as pip installs it).
_PACKAGED = Path(__file__).parent / "templates"


def packaged_template(name: str) -> str:
    """cfkit's own text of template ``name`` (what is in force where the workspace has none)."""
    return _packaged_template(name)[0]


def _packaged_template(name: str) -> tuple[str, Path]:
    """A packaged template's text and file. Read straight from the package's folder where it is one: what
    importlib.resources gives there too, without its import and its first look-up (10-15 ms of CPU before a run's
    first request, on a slow shared machine); through importlib.resources elsewhere (a zip archive)."""
    path = _PACKAGED / name
    if path.is_file():
        return path.read_text(encoding="utf-8"), path
    from importlib import resources

    ref = resources.files("cfkit") / "templates" / name
    return ref.read_text(encoding="utf-8"), Path(str(ref))


def load_templates(ws: Workspace, names: Iterable[str] = PROBE_TEMPLATES) -> Templates:
    """Each template from ``<workspace>/probes/templates/`` when present there, else the packaged default."""
    override_dir = ws.probes_dir / "templates"
    texts: dict[str, str] = {}
    sources: dict[str, Path] = {}
    for name in names:
        local = override_dir / name
        if local.is_file():
            texts[name] = read_text(local, "template", TemplateError)
            sources[name] = local
        else:
            texts[name], sources[name] = _packaged_template(name)
    _check_templates(texts, sources)
    return Templates(texts, sources)


_REQUIRED_SLOTS = {
    "user.txt": {"visual": 1, "question": 1, "options": 1, "neutral": 0, "evidence": 0},
    "visual-text.txt": {"neutral": 0, "evidence": 0, "visual": 0},
    "visual-neutral.txt": {"neutral": 1, "evidence": 0, "visual": 0},
    "visual-evidence.txt": {"neutral": 1, "evidence": 1, "visual": 0},
    "visual-image.txt": {"neutral": 0, "evidence": 0, "visual": 0},
    "visual-images.txt": {"neutral": 0, "evidence": 0, "visual": 0},
    "draft-user.txt": {"images": 1},
}


def _check_templates(texts: dict[str, str], sources: dict[str, Path]) -> None:
    for name, wanted in _REQUIRED_SLOTS.items():
        if name not in texts:
            continue
        found = [m.group(1) for m in _SLOT.finditer(texts[name])]
        for slot, count in wanted.items():
            have = found.count(slot)
            if have != count:
                need = "must not contain" if count == 0 else f"must contain exactly {count} of"
                raise TemplateError(
                    f"template {sources[name]}: {need} '{{{slot}}}' (found {have}). "
                    "Fix it, or delete it to use cfkit's default."
                )


def templates_sha256(ws: Workspace) -> str:
    """SHA-256 over the names and bytes of the probe templates in force for ``ws``.

    Every run records it (the ``templates_sha256`` of its record); what the
    report compares is the digest of each template a run's requests were
    rendered from (:func:`template_digests`, kept in the run's notes). A run
    made before cfkit kept those has only this one.
    """
    return sha256_of_texts(load_templates(ws).texts)


def sha256_of_texts(texts: dict[str, str]) -> str:
    """:func:`templates_sha256` of the probe templates' ``texts`` (name -> text)."""
    digest = hashlib.sha256()
    for name in PROBE_TEMPLATES:
        data = texts[name].encode("utf-8")
        digest.update(name.encode("utf-8") + b"\0" + str(len(data)).encode("ascii") + b"\0" + data)
    return digest.hexdigest()


@functools.lru_cache(maxsize=16)
def prompt_templates(condition: str, n_images: int = 1) -> tuple[str, ...]:
    """The probe templates a prompt of ``condition`` (text | neutral | evidence | image) with ``n_images`` images
    is rendered from: the system and user messages and the visual slot's template."""
    visual = f"visual-{condition}.txt" if condition != "image" else (
        "visual-image.txt" if n_images == 1 else "visual-images.txt")
    return "system.txt", "user.txt", visual


def template_digest(text: str) -> str:
    """SHA-256 of what a prompt takes of a template: its text without leading and trailing white space (every
    prompt strips the filled template, so white space at its ends never reaches a model)."""
    return hashlib.sha256(text.strip().encode("utf-8")).hexdigest()


def template_digests(templates: Templates, names: Iterable[str]) -> dict[str, str]:
    """:func:`template_digest` of each of ``names`` in ``templates``, by name, in :data:`PROBE_TEMPLATES` order."""
    wanted = set(names)
    return {name: template_digest(templates[name]) for name in PROBE_TEMPLATES if name in wanted}


@functools.lru_cache(maxsize=64)
def _cut_at_slots(template: str) -> tuple[str, ...]:
    """``template`` cut where :data:`_SLOT` matches: text, slot name, text, …, text (a run fills one template
    for every request: it is cut once)."""
    return tuple(_SLOT.split(template))


def fill_slots(template: str, values: dict[str, str]) -> str:
    """Each ``{slot}`` of ``template`` replaced by its value in ``values`` (one not there is left as it is), in
    one pass, so a question that happens to contain "{options}" is not expanded again."""
    parts = _cut_at_slots(template)
    filled = list(parts)
    for at in range(1, len(parts), 2):
        filled[at] = values.get(parts[at], "{" + parts[at] + "}")
    return "".join(filled)


def format_options(case: Case) -> str:
    """Options as lines "A. Yes"."""
    return "\n".join(f"{option.id}. {option.text}" for option in case.options)


def visual_slot(templates: Templates, condition: str, *, caption: Caption | None, n_images: int) -> str:
    """The text that fills ``{visual}`` for ``condition``."""
    if condition == "text":
        return templates["visual-text.txt"].strip()
    if condition in ("neutral", "evidence"):
        assert caption is not None
        neutral = caption.neutral.strip()
        evidence = (caption.evidence or "").strip()
        return fill_slots(templates[f"visual-{condition}.txt"], {"neutral": neutral, "evidence": evidence}).strip()
    if condition == "image":
        return templates["visual-image.txt" if n_images == 1 else "visual-images.txt"].strip()
    raise UsageError(f"condition '{condition}' is not one of {', '.join(CONDITIONS)}.")


def render_prompt(ws: Workspace, case: Case, condition: str, *, images: list[Path] | None = None,
                  templates: Templates | None = None, caption: Caption | None = None) -> Prompt:
    """The prompt for ``case`` under ``condition`` (text | neutral | evidence | image).

    For ``image``, ``images`` replaces the case's own image files (e.g. with an
    edited image); the count must be 1 or 2. ``templates`` and ``caption`` may be
    passed to avoid re-reading them for every case. Only the question, the
    options, the caption texts and the images are used: gold, rationale and
    provenance never reach the prompt.
    """
    # 1. Check the inputs.
    if condition not in CONDITIONS:
        raise UsageError(f"condition '{condition}' is not one of {', '.join(CONDITIONS)}.")
    if images is not None and condition != "image":
        raise UsageError(f"images are given only to the image condition, not to '{condition}'.")
    templates = templates or load_templates(ws)
    image_paths: tuple[Path, ...] = ()
    if condition == "image":
        image_paths = tuple(p if isinstance(p, Path) else Path(p) for p in images) if images is not None else tuple(
            ws.image_root / name for name in case.images)
        if len(image_paths) not in (1, 2):
            raise CaseError(f"case {case.id}: the image condition takes 1 or 2 images, got {len(image_paths)}.")
    if condition in ("neutral", "evidence"):
        from cfkit.captions import caption_path, load_caption

        caption = caption or load_caption(ws, case.id)
        path = caption_path(ws, case.id)
        if not caption.neutral.strip():
            raise CaptionError(f"{path}: field 'neutral' is empty; the {condition} condition needs a description.")
        if condition == "evidence" and not (caption.evidence or "").strip():
            raise CaptionError(f"{path}: field 'evidence' is missing or empty; write the decisive visible cue.")

    # 2. Fill the visual slot, then the user message.
    slot = visual_slot(templates, condition, caption=caption, n_images=len(image_paths))
    user = fill_slots(templates["user.txt"], {"visual": slot, "question": case.question.strip(),
                                         "options": format_options(case)})
    return Prompt(system=templates["system.txt"].strip(), user=user.strip(), images=image_paths)


@dataclass(frozen=True)
class RenderedCondition:
    case: str
    condition: str
    prompt: Prompt

    def as_record(self, root: Path) -> dict:
        return {"case": self.case, "condition": self.condition, "system": self.prompt.system,
                "user": self.prompt.user, "images": [display_path(p, root) for p in self.prompt.images]}


def display_path(path: Path, root: Path) -> str:
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)


def build_conditions(ws: Workspace, case_ids: Iterable[str] = (), *, subset: str | Path | None = None,
                     all_cases: bool = False, conditions: Iterable[str] = CONDITIONS) -> list[RenderedCondition]:
    """Render every requested condition of every selected case.

    Refuses, naming them, when selected cases have no usable caption, rather
    than leaving their caption conditions out.
    """
    cases = workspace_cases(ws)
    ids = select_cases(ws, cases, case_ids, subset, all_cases=all_cases)
    wanted = list(conditions)
    for condition in wanted:
        if condition not in CONDITIONS:
            raise UsageError(f"condition '{condition}' is not one of {', '.join(CONDITIONS)}.")
    templates = load_templates(ws)
    captions: dict[str, Caption] = {}
    if {"neutral", "evidence"} & set(wanted):
        from cfkit.captions import load_caption, require_captions

        require_captions(ws, ids)
        captions = {i: load_caption(ws, i) for i in ids}
    rendered = []
    for case_id in ids:
        case = cases.get(case_id)
        for condition in wanted:
            prompt = render_prompt(ws, case, condition, templates=templates, caption=captions.get(case_id))
            rendered.append(RenderedCondition(case_id, condition, prompt))
    return rendered


def conditions_jsonl(rendered: list[RenderedCondition], root: Path) -> str:
    return "".join(json.dumps(r.as_record(root), ensure_ascii=False) + "\n" for r in rendered)


@dataclass(frozen=True)
class JudgeTemplates:
    """A judge's system text and its YAML question file, read; ``version`` is the digest of both."""

    system: str
    document: Any  # the question file as YAML read it
    source: str  # where the question file came from, for messages
    version: str


def load_judge_templates(ws: Workspace, system_file: str, question_file: str) -> JudgeTemplates:
    """The workspace's (or the packaged) system text and question file; a file YAML cannot read is one line."""
    import yaml

    templates = load_templates(ws, (system_file, question_file))
    source = templates.sources[question_file]
    try:
        document = yaml.safe_load(templates[question_file])
    except yaml.YAMLError as exc:
        raise TemplateError(f"{source}: not valid YAML ({str(exc).splitlines()[0]}); fix the file.") from exc
    digest = hashlib.sha256((templates[system_file] + "\x00" + templates[question_file]).encode("utf-8")).hexdigest()
    return JudgeTemplates(templates[system_file].strip(), document, str(source), digest[:12])
