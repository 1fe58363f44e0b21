"""The caption lint: a Neutral or Evidence text must not name the work nor state the verdict.

A caption must not name the work (title, creator, the caption's
``identity_terms``, option texts that name things) nor say what the verdict is
(:data:`VERDICT_TERMS`, extended by ``<workspace>/probes/verdict-words.txt``).
Matching is whole-word, case- and accent-insensitive.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Literal

from cfkit.captions import Caption, caption_files, caption_path, parse_caption
from cfkit.cases import Case
from cfkit.errors import CaptionError, ConfigError
from cfkit.files import read_text
from cfkit.prompts import display_path
from cfkit.subsets import select_cases, workspace_cases
from cfkit.workspace import Workspace

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
_LEADING_ARTICLE = re.compile(r"^(the|a|an)\s+", re.IGNORECASE)
_WORD = re.compile(r"[^\W_]+")


# ── term matching ──────────────────────────────────────────────────────────

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


# ── the lint ───────────────────────────────────────────────────────────────

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
        where = display_path(self.file, root) if root is not None else str(self.file)
        words = f" {', '.join(repr(w) for w in self.words)}:" if self.words else ""
        return f"{where}: {self.field}: {self.rule}:{words} {self.message}"

    def as_dict(self, root: Path | None = None) -> dict:
        return {"case": self.case, "file": display_path(self.file, root) if root is not None else str(self.file),
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
            for line in read_text(path, "verdict word list", ConfigError).splitlines():
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


def lint_captions(ws: Workspace, case_ids: Iterable[str] = (), *, subset: str | Path | None = None,
                  all_cases: bool = False) -> LintReport:
    """Lint the captions of the selected cases (see :func:`cfkit.subsets.select_cases`).

    With ``all_cases``, every caption file in the workspace is linted as well,
    and captions of unknown cases are reported.
    """
    # 1. Decide what to check.
    cases = workspace_cases(ws)
    explicit = list(case_ids)
    ids = select_cases(ws, cases, explicit, subset, all_cases=all_cases)
    files = {p.stem: p for p in caption_files(ws)}
    to_lint = list(ids)
    if all_cases:
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
