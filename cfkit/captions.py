"""Caption files, the four modality conditions, and the leakage lint.

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

``draft-system.txt`` and ``draft-user.txt`` (``{images}``) are the instructions
:func:`draft_captions` gives a vision-language model to describe an image.

The lint (:func:`lint_captions`) keeps the conditions clean: a caption must not
name the work (title, creator, the caption's ``identity_terms``, option texts that
name things) nor say what the verdict is (:data:`VERDICT_TERMS`, extended by
``<workspace>/probes/verdict-words.txt``).
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Iterable, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cfkit.cases import Case, CaseSet, load_cases
from cfkit.errors import CaptionError, CaseError, InputError, describe_validation
from cfkit.workspace import Workspace

CONDITIONS: tuple[str, ...] = ("text", "neutral", "evidence", "image")
Condition = Literal["text", "neutral", "evidence", "image"]

HUMAN = "human"

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

#: Words and phrases that state or hint at a suitability verdict. A caption
#: describes what is visible; whether it suits the use is the model's call.
#: Matching is whole-word and case-insensitive, and a phrase matches across
#: spaces, hyphens or apostrophes ("well-suited", "well suited"). Inflections are
#: listed one by one on purpose: stemming would make "fitted" match "fits".
#: Left out on purpose, because they describe things far more often than they
#: judge: "suits" (clothing), "fitting"/"fitted" (garments, fixtures), "matches"
#: (matchsticks, sport), "proper", "tasteful", "beautiful" (appeal is not fit).
#: Extend it per workspace with ``probes/verdict-words.txt`` (one term a line).
VERDICT_TERMS: tuple[str, ...] = (
    # suitability
    "suitable", "unsuitable", "suitably", "unsuitably", "suitability", "suited", "unsuited",
    "well-suited", "ill-suited", "better suited", "best suited",
    # appropriateness
    "appropriate", "inappropriate", "appropriately", "inappropriately", "appropriateness",
    "improper", "befitting", "unbefitting",
    # fit and match
    "fits", "fit for", "unfit", "fitting for", "good fit", "poor fit", "perfect fit", "bad fit",
    "mismatch", "mismatched", "mismatches", "incongruous", "out of place", "at odds with",
    "compatible", "incompatible", "clashes with",
    # ideal / perfect / recommendations
    "ideal", "ideally", "perfect for", "perfectly suited", "recommend", "recommends",
    "recommended", "recommendation", "not recommended",
    "should", "shouldn't", "should not", "ought to",
    "acceptable", "unacceptable", "good choice", "poor choice", "right choice", "wrong choice",
    "would work well", "works well for", "well matched",
)

#: Option texts made only of these words do not name anything ("Yes", "No",
#: "The first image"), so they are not identity terms.
_GENERIC_OPTION_WORDS = frozenset(
    "yes no not both neither none either first second left right one two image images "
    "picture pictures photo photograph option the a an".split()
)
_LEADING_ARTICLE = re.compile(r"^(the|a|an)\s+", re.IGNORECASE)
_SLOT = re.compile(r"\{(visual|question|options|neutral|evidence|images)\}")
_WORD = re.compile(r"[^\W_]+")


# ---------------------------------------------------------------------------
# Caption files

# libyaml's safe loader when PyYAML was built with it: the same documents, ten times faster.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class Caption(BaseModel):
    """One ``captions/CASE.yaml`` file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

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


def read_text(path: Path, what: str, error: type[InputError] = InputError) -> str:
    """A UTF-8 text file, or ``error`` saying why it cannot be read (``FileNotFoundError`` passes through)."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{what} {path} is not UTF-8 text (byte {exc.start}: {exc.reason}). Save it as UTF-8.") from exc
    except IsADirectoryError:
        raise error(f"{what} {path} is a folder; give a file.") from None


def caption_path(ws: Workspace, case_id: str) -> Path:
    return ws.captions_dir / f"{case_id}.yaml"


def parse_caption(text: str, path: Path) -> Caption:
    """Parse caption YAML; errors name the file and the field."""
    try:
        raw = yaml.load(text, Loader=_YAML_LOADER)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        raise CaptionError(f"{path}{where}: not valid YAML ({getattr(exc, 'problem', exc)}). Fix the file.") from exc
    if not isinstance(raw, dict):
        raise CaptionError(f"{path}: expected a mapping with 'neutral', 'evidence', 'author', 'reviewed'.")
    try:
        return Caption.model_validate(raw)
    except ValidationError as exc:
        raise CaptionError(f"{path}: {describe_validation(exc)}") from exc


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


def dump_caption(caption: Caption) -> str:
    """Caption YAML in the field order of the format."""
    data = caption.model_dump(exclude_defaults=False)
    for key in ("identity_terms", "allow_terms"):
        if not data[key]:
            del data[key]
    if data["evidence"] is None:
        del data["evidence"]
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)


def caption_files(ws: Workspace) -> list[Path]:
    folder = ws.captions_dir
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.yaml") if not p.name.startswith("."))


# ---------------------------------------------------------------------------
# Subsets


def read_subset(path: Path, cases: CaseSet) -> list[str]:
    """Case ids of a subset file: one id a line, ``#`` comments and blank lines ignored."""
    try:
        lines = read_text(path, "subset file").splitlines()
    except FileNotFoundError:
        raise InputError(f"subset file {path} not found. Give a file with one case id a line.") from None
    ids: list[str] = []
    seen: dict[str, int] = {}
    for lineno, line in enumerate(lines, start=1):
        case_id = line.split("#", 1)[0].strip()
        if not case_id:
            continue
        if case_id not in cases:
            raise CaseError(f"{path}:{lineno}: case '{case_id}' is not in {cases.path}. Fix or remove the line.")
        if case_id in seen:
            raise InputError(f"{path}:{lineno}: case '{case_id}' repeats line {seen[case_id]}. Remove one.")
        seen[case_id] = lineno
        ids.append(case_id)
    return ids


def resolve_subset(ws: Workspace, value: str | Path) -> Path:
    """A subset path as given, or relative to the workspace's probes folder."""
    path = Path(value).expanduser()
    if path.exists() or path.is_absolute():
        return path
    return ws.probes_dir / path


def select_cases(ws: Workspace, cases: CaseSet, case_ids: Iterable[str] = (), subset: str | Path | None = None) -> list[str]:
    """Which cases a captions command covers.

    Explicit ids win; then ``subset``; then the workspace's modality subset
    (``[probe] modality_subset``) when that file exists; otherwise every case.
    """
    ids = list(case_ids)
    if ids and subset is not None:
        raise InputError(f"give case ids or --subset {subset}, not both.")
    if ids:
        for case_id in ids:
            cases.get(case_id)  # raises a CaseError naming the cases file
        return ids
    if subset is not None:
        return read_subset(resolve_subset(ws, subset), cases)
    default = ws.probes_dir / ws.config.probe.modality_subset
    if default.is_file():
        return read_subset(default, cases)
    return list(cases.ids)


def workspace_cases(ws: Workspace) -> CaseSet:
    return load_cases(ws.cases_path, ws.image_root)


# ---------------------------------------------------------------------------
# Templates and prompts


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


def _packaged_template(name: str) -> tuple[str, Path]:
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
            texts[name] = read_text(local, "template")
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
                raise InputError(
                    f"template {sources[name]}: {need} '{{{slot}}}' (found {have}). "
                    "Fix it, or delete it to use cfkit's default."
                )


def templates_sha256(ws: Workspace) -> str:
    """SHA-256 over the names and bytes of the probe templates in force for ``ws``.

    A run records it, so results made with different prompts are never mixed.
    """
    templates = load_templates(ws)
    digest = hashlib.sha256()
    for name in PROBE_TEMPLATES:
        data = templates[name].encode("utf-8")
        digest.update(name.encode("utf-8") + b"\0" + str(len(data)).encode("ascii") + b"\0" + data)
    return digest.hexdigest()


def _fill(template: str, values: dict[str, str]) -> str:
    # One pass, so a question that happens to contain "{options}" is not expanded again.
    return _SLOT.sub(lambda m: values.get(m.group(1), m.group(0)), template)


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
        return _fill(templates[f"visual-{condition}.txt"], {"neutral": neutral, "evidence": evidence}).strip()
    if condition == "image":
        return templates["visual-image.txt" if n_images == 1 else "visual-images.txt"].strip()
    raise InputError(f"condition '{condition}' is not one of {', '.join(CONDITIONS)}.")


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
        raise InputError(f"condition '{condition}' is not one of {', '.join(CONDITIONS)}.")
    if images is not None and condition != "image":
        raise InputError(f"images are given only to the image condition, not to '{condition}'.")
    templates = templates or load_templates(ws)
    image_paths: tuple[Path, ...] = ()
    if condition == "image":
        image_paths = tuple(Path(p) for p in images) if images is not None else tuple(
            ws.image_root / name for name in case.images)
        if len(image_paths) not in (1, 2):
            raise InputError(f"case {case.id}: the image condition takes 1 or 2 images, got {len(image_paths)}.")
    if condition in ("neutral", "evidence"):
        caption = caption or load_caption(ws, case.id)
        path = caption_path(ws, case.id)
        if not caption.neutral.strip():
            raise CaptionError(f"{path}: field 'neutral' is empty; the {condition} condition needs a description.")
        if condition == "evidence" and not (caption.evidence or "").strip():
            raise CaptionError(f"{path}: field 'evidence' is missing or empty; write the decisive visible cue.")

    # 2. Fill the visual slot, then the user message.
    slot = visual_slot(templates, condition, caption=caption, n_images=len(image_paths))
    user = _fill(templates["user.txt"], {"visual": slot, "question": case.question.strip(),
                                         "options": format_options(case)})
    return Prompt(system=templates["system.txt"].strip(), user=user.strip(), images=image_paths)


@dataclass(frozen=True)
class RenderedCondition:
    case: str
    condition: str
    prompt: Prompt

    def as_record(self, root: Path) -> dict:
        return {"case": self.case, "condition": self.condition, "system": self.prompt.system,
                "user": self.prompt.user, "images": [_display_path(p, root) for p in self.prompt.images]}


def _display_path(path: Path, root: Path) -> str:
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)


def build_conditions(ws: Workspace, case_ids: Iterable[str] = (), *, subset: str | Path | None = None,
                     conditions: Iterable[str] = CONDITIONS) -> list[RenderedCondition]:
    """Render every requested condition of every selected case.

    Refuses, naming them, when selected cases have no usable caption, rather
    than leaving their caption conditions out.
    """
    cases = workspace_cases(ws)
    ids = select_cases(ws, cases, case_ids, subset)
    wanted = list(conditions)
    for condition in wanted:
        if condition not in CONDITIONS:
            raise InputError(f"condition '{condition}' is not one of {', '.join(CONDITIONS)}.")
    templates = load_templates(ws)
    captions: dict[str, Caption] = {}
    if {"neutral", "evidence"} & set(wanted):
        missing = [i for i in ids if not caption_path(ws, i).is_file()]
        if missing:
            raise CaptionError(
                f"{len(missing)} of {len(ids)} selected cases have no caption in {ws.captions_dir} "
                f"({_short_list(missing)}). Write them or run 'cfkit captions draft'; 'cfkit captions lint' lists them."
            )
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


def _short_list(items: list[str], limit: int = 8) -> str:
    head = ", ".join(items[:limit])
    return head + (f", … ({len(items)} in all)" if len(items) > limit else "")


# ---------------------------------------------------------------------------
# Term matching


@lru_cache(maxsize=65536)
def _fold(word: str) -> str:
    """Case- and accent-insensitive form of one word ("Dürer" -> "durer")."""
    decomposed = unicodedata.normalize("NFKD", word.casefold())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def _tokens(text: str) -> list[tuple[str, int, int]]:
    """Words of ``text`` with their spans. Hyphens, apostrophes and punctuation separate words."""
    return [(_fold(m.group(0)), m.start(), m.end()) for m in _WORD.finditer(text)]


@lru_cache(maxsize=4096)
def _needle(term: str) -> tuple[str, ...]:
    return tuple(t[0] for t in _tokens(unicodedata.normalize("NFC", term)))


def _term_spans(tokens: list[tuple[str, int, int]], terms: Iterable[str]) -> set[tuple[int, int]]:
    """Character spans of ``tokens`` where a term's words occur in sequence."""
    by_first: dict[str, list[tuple[str, ...]]] = {}
    for term in terms:
        needle = _needle(term)
        if needle:
            by_first.setdefault(needle[0], []).append(needle)
    words = [t[0] for t in tokens]
    spans: set[tuple[int, int]] = set()
    for i, word in enumerate(words):
        for needle in by_first.get(word, ()):
            n = len(needle)
            if tuple(words[i:i + n]) == needle:
                spans.add((tokens[i][1], tokens[i + n - 1][2]))
    return spans


def find_terms(text: str, terms: Iterable[str]) -> list[str]:
    """The terms found in ``text`` as whole words, each as written in the text.

    "Hokusai" is found in "Hokusai-inspired" and "HOKUSAI's"; "should" is not
    found in "shoulder", nor "fits" in "fitted". A phrase ("fit for",
    "well-suited") matches its words in sequence across any separators.
    """
    text = unicodedata.normalize("NFC", text)
    spans = _term_spans(_tokens(text), terms)
    # A hit inside a longer hit ("Hokusai" in "Katsushika Hokusai") is reported once, as the longer one.
    outer = [s for s in spans if not any(o != s and o[0] <= s[0] and s[1] <= o[1] for o in spans)]
    found: list[str] = []
    for start, end in sorted(outer):
        if text[start:end] not in found:
            found.append(text[start:end])
    return found


def _mask_allowed(text: str, allowed: Iterable[str]) -> str:
    """``text`` with allowed phrases blanked, so their words are not matched."""
    text = unicodedata.normalize("NFC", text)
    chars = list(text)
    for start, end in _term_spans(_tokens(text), allowed):
        chars[start:end] = " " * (end - start)
    return "".join(chars)


# ---------------------------------------------------------------------------
# Lint

Level = Literal["error", "warning"]

RULES = {
    "identity": "the neutral text names the work, its creator, a person, place or answer option",
    "verdict": "verdict language: the caption says or hints whether the visual suits the use",
    "evidence-missing": "the evidence text is missing or empty",
    "evidence-copy": "the evidence text repeats the neutral text instead of stating the decisive cue",
    "neutral-missing": "the neutral text is empty",
    "caption-missing": "a case in the subset has no caption file",
    "malformed": "the caption file cannot be read",
    "unreviewed-draft": "a model drafted the caption and no person has reviewed it",
    "unknown-case": "the caption file's case is not in the cases file",
}


@dataclass(frozen=True)
class Finding:
    """One lint finding: where, which rule, the offending words, how bad."""

    case: str
    file: Path
    field: str
    rule: str
    level: Level
    words: tuple[str, ...] = ()
    message: str = ""

    def describe(self, root: Path | None = None) -> str:
        where = _display_path(self.file, root) if root is not None else str(self.file)
        words = f" {', '.join(repr(w) for w in self.words)}:" if self.words else ""
        return f"{where}: {self.field}: {self.rule}:{words} {self.message}"

    def as_dict(self, root: Path | None = None) -> dict:
        return {"case": self.case, "file": _display_path(self.file, root) if root is not None else str(self.file),
                "field": self.field, "rule": self.rule, "level": self.level, "words": list(self.words),
                "message": self.message}


@dataclass(frozen=True)
class LintReport:
    findings: list[Finding]
    cases: list[str]
    files: int = 0
    verdict_terms: tuple[str, ...] = field(default=(), repr=False)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.level == "error"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.level == "warning"]

    @property
    def ok(self) -> bool:
        return not self.errors


def verdict_terms(ws: Workspace | None = None) -> tuple[str, ...]:
    """:data:`VERDICT_TERMS` plus the workspace's ``probes/verdict-words.txt`` (one term a line, ``#`` comments)."""
    terms = list(VERDICT_TERMS)
    if ws is not None:
        path = ws.probes_dir / "verdict-words.txt"
        if path.is_file():
            for line in read_text(path, "verdict word list").splitlines():
                term = line.split("#", 1)[0].strip()
                if term and term not in terms:
                    terms.append(term)
    return tuple(terms)


def names_a_thing(option_text: str) -> bool:
    """Whether an option text names something (a festival, a place), unlike "Yes" or "The first image"."""
    words = [t[0] for t in _tokens(option_text)]
    return bool(words) and not all(w in _GENERIC_OPTION_WORDS or w.isdigit() for w in words)


def identity_terms(case: Case | None, caption: Caption) -> list[str]:
    """Everything the neutral text must not name: title, creator's names, the caption's list, naming options."""
    terms: list[str] = []
    if case is not None and case.provenance is not None:
        title = (case.provenance.title or "").strip()
        if title:
            terms.append(title)
            stripped = _LEADING_ARTICLE.sub("", title)
            if stripped != title and len(_tokens(stripped)) > 1:
                terms.append(stripped)
        terms.extend(_creator_names(case.provenance.creator))
    terms.extend(t.strip() for t in caption.identity_terms if t.strip())
    if case is not None:
        for option in case.options:
            if names_a_thing(option.text):
                terms.append(_LEADING_ARTICLE.sub("", option.text.strip()).rstrip(".!?"))
    return list(dict.fromkeys(terms))


_UNKNOWN_CREATORS = {"unknown", "anonymous", "unidentified", "various", "n a", "na", "none", "unknown artist"}
# Name particles and the generic words of institutional creators ("National Gallery of
# Art") are not distinctive on their own; "art" in a caption names nobody.
_NAME_PARTICLES = frozenset(
    "van von de der den da di del della du la le y and of the after attributed to workshop circle school "
    "follower studio art arts museum gallery collection national library archive archives public domain "
    "photo photography photographer user team staff press group company inc ltd foundation institute "
    "university society contributor contributors unknown anonymous".split()
)


def _creator_names(creator: str | None) -> list[str]:
    """The creator as written and each distinctive part of the name ("Katsushika Hokusai" -> also "Hokusai")."""
    if not creator or " ".join(t[0] for t in _tokens(creator)) in _UNKNOWN_CREATORS:
        return []
    names = [creator.strip()]
    for word, start, end in _tokens(creator):
        if len(word) >= 3 and word not in _NAME_PARTICLES and word not in _UNKNOWN_CREATORS:
            names.append(creator[start:end])
    return list(dict.fromkeys(names))


def lint_caption(caption: Caption, case: Case | None, path: Path, *,
                 verdict: Iterable[str] = VERDICT_TERMS) -> list[Finding]:
    """Every finding for one parsed caption (pure: reads nothing)."""
    case_id = case.id if case is not None else path.stem
    findings: list[Finding] = []

    def add(field_: str, rule: str, level: Level, words: Iterable[str] = (), message: str = "") -> None:
        findings.append(Finding(case_id, path, field_, rule, level, tuple(words), message))

    verdict = tuple(verdict)
    neutral = caption.neutral.strip()
    evidence = (caption.evidence or "").strip()
    if not neutral:
        add("neutral", "neutral-missing", "error", message="write a description of the visible content.")
    else:
        names = find_terms(_mask_allowed(neutral, caption.allow_terms), identity_terms(case, caption))
        if names:
            add("neutral", "identity", "error", names,
                "describe what is visible without naming the work, its creator, people, places or an option; "
                "if a title word is plain description here, list it under allow_terms.")
        verdicts = find_terms(neutral, verdict)
        if verdicts:
            add("neutral", "verdict", "error", verdicts, "leave the judgment to the model; describe only what is visible.")
    if not evidence:
        add("evidence", "evidence-missing", "error", message="state the decisive visible cue plainly.")
    else:
        if neutral and f" {_squash(evidence)} " in f" {_squash(neutral)} ":
            add("evidence", "evidence-copy", "error",
                message="the evidence adds nothing to the neutral text; state the decisive visible cue.")
        verdicts = find_terms(evidence, verdict)
        if verdicts:
            add("evidence", "verdict", "error", verdicts, "state the cue, not the verdict it leads to.")
    if caption.drafted and not caption.reviewed:
        add("reviewed", "unreviewed-draft", "warning", (),
            f"drafted by {caption.author}; read it, fix it, then set 'reviewed: true'.")
    return findings


def _squash(text: str) -> str:
    return " ".join(t[0] for t in _tokens(text))


def lint_captions(ws: Workspace, case_ids: Iterable[str] = (), *, subset: str | Path | None = None) -> LintReport:
    """Lint the captions of the selected cases (see :func:`select_cases`).

    Without explicit ids or a subset, every caption file in the workspace is
    linted as well, and captions of unknown cases are reported.
    """
    # 1. Decide what to check.
    cases = workspace_cases(ws)
    explicit = list(case_ids)
    ids = select_cases(ws, cases, explicit, subset)
    files = {p.stem: p for p in caption_files(ws)}
    to_lint = list(ids)
    if not explicit and subset is None:
        to_lint += [stem for stem in files if stem not in ids]
    terms = verdict_terms(ws)

    # 2. Check each caption.
    findings: list[Finding] = []
    read = 0
    for case_id in to_lint:
        path = files.get(case_id, caption_path(ws, case_id))
        if case_id not in files:
            findings.append(Finding(case_id, path, "file", "caption-missing", "error", (),
                                    f"case {case_id} is in the selection but has no caption; write one "
                                    f"or run 'cfkit captions draft --model KIND:NAME {case_id}'."))
            continue
        read += 1
        try:
            caption = parse_caption(read_text(path, "caption file", CaptionError), path)
        except CaptionError as exc:
            findings.append(Finding(case_id, path, "file", "malformed", "error", (), str(exc)))
            continue
        case = cases.get(case_id) if case_id in cases else None
        if case is None:
            findings.append(Finding(case_id, path, "file", "unknown-case", "warning", (),
                                    f"no case '{case_id}' in {cases.path}; rename the file or remove it."))
        findings.extend(lint_caption(caption, case, path, verdict=terms))
    return LintReport(findings, to_lint, read, terms)


# ---------------------------------------------------------------------------
# Drafting with a vision-language model

DRAFT_TEMPLATES: tuple[str, ...] = ("draft-system.txt", "draft-user.txt")
_IMAGES_PHRASE = {1: "the attached image", 2: "the two attached images, the first image and then the second image,"}


@dataclass(frozen=True)
class DraftResult:
    """What happened to one case: ``written``, ``kept`` (a caption is already there) or ``failed``."""

    case: str
    path: Path
    status: Literal["written", "kept", "failed"]
    message: str = ""
    findings: tuple[Finding, ...] = ()


def draft_request(ws: Workspace, case: Case, templates: Templates | None = None):
    """The :class:`~cfkit.backends.ProbeRequest` asking for a neutral description of ``case``'s image(s).

    Only the images go to the model: no question, options, title or creator,
    so the draft cannot borrow a name or a verdict from them.
    """
    from cfkit.backends import Generation, ProbeRequest, RequestMeta
    from cfkit.probe import image_data

    templates = templates or load_templates(ws, DRAFT_TEMPLATES)
    images = tuple(image_data(ws.image_root / name) for name in case.images)
    user = _fill(templates["draft-user.txt"], {"images": _IMAGES_PHRASE[len(images)]})
    return ProbeRequest(
        system=templates["draft-system.txt"].strip(), user=user.strip(), images=images, option_ids=(),
        schema=None, generation=Generation(temperature=0.0, max_tokens=400),
        meta=RequestMeta(suite="captions", case_id=case.id, pair_id="", condition="draft"),
    )


def clean_draft(raw: str) -> str:
    """The description in a reply: code fences, a leading label and wrapping quotes removed, spaces tidied."""
    text = re.sub(r"^```[a-zA-Z]*\s*|\s*```$", "", raw.strip()).strip()
    for _ in range(2):  # a label inside quotes, or quotes after a label
        text = re.sub(r"^(description|caption)\s*:\s*", "", text, flags=re.IGNORECASE)
        if len(text) >= 2 and (text[0], text[-1]) in (('"', '"'), ("'", "'"), ("“", "”")):
            text = text[1:-1].strip()
    return " ".join(text.split())


def _kept_message(existing: Caption | None) -> str:
    if existing is None:
        return "kept the existing file (it does not parse; fix or delete it to draft anew)."
    if not existing.drafted:
        return "kept the human caption."
    if existing.reviewed:
        return f"kept the reviewed draft by {existing.author}."
    return f"kept the unreviewed draft by {existing.author}; pass --redraft to replace it."


def draft_captions(ws: Workspace, backend, case_ids: Iterable[str] = (), *, subset: str | Path | None = None,
                   redraft: bool = False) -> list[DraftResult]:
    """Ask ``backend`` for a neutral description of each selected case and save it as an unreviewed draft.

    A caption already on disk is kept, except an unreviewed model draft when
    ``redraft`` is set; a human caption is never replaced. Each draft is linted
    and its findings returned; the evidence text is left for the reviewer, who
    knows the decisive cue. A request that fails is reported and the others go on.
    """
    from cfkit.backends import TransportError, is_async
    from cfkit.files import write_text_atomic

    # 1. Check the inputs.
    capabilities = getattr(backend, "capabilities", None)
    if capabilities is not None and not capabilities.images:
        raise InputError(f"backend {backend.model} cannot see images; draft with a vision-language model "
                         "(e.g. --model openai:gpt-5.5 or hf:Qwen/Qwen3-VL-8B-Instruct).")
    cases = workspace_cases(ws)
    ids = select_cases(ws, cases, case_ids, subset)
    templates = load_templates(ws, DRAFT_TEMPLATES)
    terms = verdict_terms(ws)

    # 2. Decide which cases to ask about.
    results: dict[str, DraftResult] = {}
    todo: list[Case] = []
    for case_id in ids:
        path = caption_path(ws, case_id)
        if path.exists():
            existing = None
            try:
                existing = parse_caption(read_text(path, "caption file", CaptionError), path)
            except CaptionError:
                pass
            if not (redraft and existing is not None and existing.drafted and not existing.reviewed):
                results[case_id] = DraftResult(case_id, path, "kept", _kept_message(existing))
                continue
        case = cases.get(case_id)
        if len(case.images) > 1 and capabilities is not None and not capabilities.multi_image:
            results[case_id] = DraftResult(case_id, path, "failed",
                                           f"not drafted: {backend.model} takes one image per request; case {case_id} has two.")
            continue
        todo.append(case)

    # 3. Ask, clean, lint, save.
    def save(case: Case, reply) -> DraftResult:
        path = caption_path(ws, case.id)
        text = clean_draft(reply.raw or "")
        if reply.refused or not text:
            why = "refused" if reply.refused else "returned an empty reply"
            return DraftResult(case.id, path, "failed", f"not drafted: {backend.model} {why}.")
        caption = Caption(neutral=text, author=backend.model, reviewed=False)
        write_text_atomic(path, dump_caption(caption), overwrite=redraft)
        findings = tuple(f for f in lint_caption(caption, case, path, verdict=terms)
                         if f.rule not in ("evidence-missing", "unreviewed-draft"))
        message = "drafted; review it, add the evidence text, then set 'reviewed: true'."
        return DraftResult(case.id, path, "written", message, findings)

    def failed(case: Case, exc: Exception) -> DraftResult:
        return DraftResult(case.id, caption_path(ws, case.id), "failed", f"not drafted: the request failed: {exc}")

    if is_async(backend):
        import asyncio

        async def ask_all() -> None:
            try:
                for case in todo:
                    try:
                        results[case.id] = save(case, await backend.answer(draft_request(ws, case, templates)))
                    except TransportError as exc:
                        results[case.id] = failed(case, exc)
            finally:
                close = getattr(backend, "aclose", None)
                if close is not None:
                    await close()

        asyncio.run(ask_all())
    else:
        for case in todo:
            try:
                results[case.id] = save(case, backend.answer(draft_request(ws, case, templates)))
            except TransportError as exc:
                results[case.id] = failed(case, exc)
    return [results[i] for i in ids]
