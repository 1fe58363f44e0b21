"""Planning a probe run: every request of a suite, rendered for one backend.

Errors in the inputs (a missing caption, an unknown case in the subset file, an
unreadable image) stop here, before any request is sent. Counterfactual pairs
that cannot be asked (no usable edit, a spec that does not load) are listed as
skipped, with why.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from cfkit.backends import Capabilities, Generation, ImageData, ProbeRequest, RequestMeta
from cfkit.cases import Case, CaseSet
from cfkit.dataset import load_cases
from cfkit.captions import load_caption
from cfkit.errors import CaseError, SpecError, UsageError
from cfkit.images import image_data, side_by_side
from cfkit.prompts import load_templates, render_prompt, templates_sha256
from cfkit.specs import load_spec, load_spec_file, spec_files
from cfkit.store import Store, edits
from cfkit.subsets import modality_subset_path, read_subset
from cfkit.vocabulary import SUITE_CONDITIONS
from cfkit.workspace import Workspace

CONFIDENCE = ("low", "medium", "high")
DEFAULT_MAX_TOKENS = 512


def answer_schema(option_ids: Iterable[str]) -> dict[str, Any]:
    """The JSON schema a reply is asked to follow: one option id, a short reason, a confidence."""
    return {
        "type": "object",
        "properties": {
            "answer": {"type": "string", "enum": list(option_ids)},
            "reason": {"type": "string"},
            "confidence": {"type": "string", "enum": list(CONFIDENCE)},
        },
        "required": ["answer", "reason", "confidence"],
        "additionalProperties": False,
    }


@dataclass(frozen=True)
class ProbeItem:
    """One request of a suite, with the case it asks about."""

    case: Case
    pair_id: str
    condition: str
    request: ProbeRequest

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.case.id, self.pair_id, self.condition)


@dataclass(frozen=True)
class SkippedPair:
    """A counterfactual pair left out of a run, and why."""

    pair_id: str
    reason: str


@dataclass(frozen=True)
class ProbePlan:
    """Every request of one suite, in order, and the pairs that could not be asked."""

    suite: str
    items: tuple[ProbeItem, ...]
    skipped: tuple[SkippedPair, ...]
    templates_sha256: str
    gold_labels: Counter  # for baseline:majority; "yes"/"no" for two-option cases, else the option id


def gold_label(case: Case, option_id: str) -> str:
    """"yes"/"no" for a two-option case's option, else the option id itself."""
    if case.yes_option is None:
        return option_id
    return "yes" if option_id == case.yes_option else "no"


class _RequestBuilder:
    """Renders prompts and images into requests for one backend."""

    def __init__(self, ws: Workspace, suite: str, capabilities: Capabilities, max_tokens: int):
        self.ws = ws
        self.suite = suite
        self.capabilities = capabilities
        self.generation = Generation(temperature=0.0, max_tokens=max_tokens)
        self.templates = load_templates(ws)
        self._image_cache: dict[Path, ImageData] = {}  # cases often share an image file

    def item(self, case: Case, condition: str, *, pair_id: str = "", images: list[Path] | None = None,
             caption=None) -> ProbeItem:
        prompt_condition = "image" if condition in ("original", "edit") else condition
        prompt = render_prompt(self.ws, case, prompt_condition, images=images, templates=self.templates,
                               caption=caption if condition in ("neutral", "evidence") else None)
        request = ProbeRequest(
            system=prompt.system,
            user=prompt.user,
            images=self._images(list(prompt.images)),
            option_ids=tuple(case.option_ids),
            schema=answer_schema(case.option_ids),
            generation=self.generation,
            meta=RequestMeta(suite=self.suite, case_id=case.id, pair_id=pair_id, condition=condition,
                             yes_option=case.yes_option),
        )
        return ProbeItem(case=case, pair_id=pair_id, condition=condition, request=request)

    def _images(self, paths: list[Path]) -> tuple[ImageData, ...]:
        if not paths or not self.capabilities.images:
            return ()
        if len(paths) > 1 and not self.capabilities.multi_image:
            labels = ["First image", "Second image"][: len(paths)]
            return (side_by_side(paths, labels),)
        return tuple(self._image(p) for p in paths)

    def _image(self, path: Path) -> ImageData:
        if path not in self._image_cache:
            self._image_cache[path] = image_data(path)
        return self._image_cache[path]


def plan_suite(ws: Workspace, suite: str, capabilities: Capabilities, *, store: Store | None = None,
               max_tokens: int = DEFAULT_MAX_TOKENS, accepted_only: bool = False,
               cases: CaseSet | None = None) -> ProbePlan:
    """Every request of ``suite`` for a backend with ``capabilities``.

    Errors in the inputs (a missing caption, an unknown case in the subset
    file) stop here, before any request is sent.
    """
    if suite not in SUITE_CONDITIONS:
        raise UsageError(f"suite '{suite}' is not one of {', '.join(SUITE_CONDITIONS)}.")
    if cases is None:
        cases = load_cases(ws.cases_path, ws.image_root)
    builder = _RequestBuilder(ws, suite, capabilities, max_tokens)
    items: list[ProbeItem] = []
    skipped: list[SkippedPair] = []
    gold: Counter = Counter()
    if suite == "contextcanvas":
        for case in cases:
            items.append(builder.item(case, "image"))
            gold[gold_label(case, case.gold)] += 1
    elif suite == "modality":
        subset = modality_subset_path(ws)
        if not subset.is_file():
            raise CaseError(f"modality subset {subset} not found. Write one case id a line there, "
                             "or set [probe] modality_subset in cfkit.toml.")
        for case_id in read_subset(subset, cases):
            case = cases.get(case_id)
            gold[gold_label(case, case.gold)] += 1
            caption = load_caption(ws, case.id)  # read once for the neutral and evidence conditions
            for condition in SUITE_CONDITIONS["modality"]:
                items.append(builder.item(case, condition, caption=caption))
    else:
        if store is None:
            raise UsageError("the counterfactual suite needs the store, to find each pair's edit.")
        for pair_items, pair_skip in _counterfactual(ws, store, cases, builder, accepted_only):
            items.extend(pair_items)
            if pair_skip is not None:
                skipped.append(pair_skip)
        for item in items:
            gold[gold_label(item.case, _pair_gold(ws, item))] += 1
    return ProbePlan(suite=suite, items=tuple(items), skipped=tuple(skipped),
                     templates_sha256=templates_sha256(ws), gold_labels=gold)


def _pair_gold(ws: Workspace, item: ProbeItem) -> str:
    labels = load_spec(ws, item.pair_id).spec.labels
    label = labels.original if item.condition == "original" else labels.edit
    return item.case.option_for_label(label) or item.case.gold


def _counterfactual(ws: Workspace, store: Store, cases: CaseSet, builder: _RequestBuilder, accepted_only: bool):
    """(items, skipped-or-None) per spec file, in spec order."""
    for path in spec_files(ws):
        try:
            spec = load_spec_file(path).spec
        except SpecError as exc:
            yield [], SkippedPair(path.stem, f"invalid spec ({exc})")
            continue
        if spec.case not in cases:
            yield [], SkippedPair(spec.id, f"case '{spec.case}' is not in {cases.path}")
            continue
        case = cases.get(spec.case)
        if len(case.images) != 1:
            yield [], SkippedPair(spec.id, f"case {case.id} has {len(case.images)} images; pairs edit one image")
            continue
        edit = edits.selected(store, spec.id, require_accepted=accepted_only)
        if edit is None:
            need = "an accepted edit" if accepted_only else "an accepted edit or one whose check passed"
            yield [], SkippedPair(spec.id, f"no usable edit ({need}); run 'cfkit edit {spec.id}' and "
                                           f"'cfkit review {spec.id}'")
            continue
        edited = edit.composite_path
        if edited is None or not Path(edited).is_file():
            yield [], SkippedPair(spec.id, f"edit {edit.id}'s composite image {edited} is missing; "
                                           f"run 'cfkit edit {spec.id}' again")
            continue
        yield [builder.item(case, "original", pair_id=spec.id),
               builder.item(case, "edit", pair_id=spec.id, images=[edited])], None
