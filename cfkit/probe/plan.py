"""Planning a probe run: every request of a suite, rendered for one backend.

Errors in the inputs (a missing caption, an unknown case in the subset file, an
unreadable image) stop here, before any request is sent. Counterfactual pairs
that cannot be asked (no usable edit, a spec that does not load), and cases the
swap suite does not ask (:mod:`~cfkit.swap`), are listed as skipped, with
why. A :class:`Selection` narrows a suite to part of it (a smoke
test: ``--limit N``, ``--cases FILE``; ``--accepted-only``,
``--reviewed-only``); the plan also lists what it asks about that no person
has reviewed (pairs whose edit was never accepted, drafted captions not yet
read).
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Mapping
from typing import Any, Iterable

from cfkit.backends import Capabilities, Generation, ProbeRequest, RequestMeta
from cfkit.cases import Case, CaseSet, asked_digests
from cfkit.dataset import load_cases
from cfkit.errors import CaseError, SpecError, UsageError
from cfkit.majority import gold_label
from cfkit import swap
from cfkit.plural import plural
from cfkit.probe.image_refs import Digests, FileState, ImageRef
from cfkit.probe.selection import Selection
from cfkit.prompts import load_templates, prompt_templates, render_prompt, template_digests, templates_sha256
from cfkit.store import Store
from cfkit.vocabulary import MODALITY_CONDITIONS, SUITE_CONDITIONS, SWAP_CONDITIONS
from cfkit.workspace import Workspace

# Captions, specs, subset files and the edit rooms of the store load where a suite uses them: a contextcanvas
# run's path to its first request needs none of them (captions and specs are pydantic models, built at import).

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


@dataclass(frozen=True, slots=True)
class ProbeItem:
    """One request of a suite, with the case it asks about (and, for an 'edit' question, the edit shown)."""

    case: Case
    pair_id: str
    condition: str
    request: ProbeRequest
    edit_id: int | None = None
    image_sha256: str | None = None  # of the one image file the question shows (sent or not: the backend decides);
    #                                  None in a lazy plan until the request is sent (taken from the bytes sent)
    image_file: FileState | None = None  # that file as planned (path, size, mtime): what the run id covers
    #: (case id, pair id, condition): the item's place in the suite. Made once, so the run's maps by place
    #: (cache keys, leases, settled replies) share one tuple per request instead of each building its own.
    key: tuple[str, str, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", (self.case.id, self.pair_id, self.condition))


@dataclass(frozen=True)
class SkippedPair:
    """A counterfactual pair (or a case the swap suite does not ask) left out of a run, and why.

    ``pair_id`` is the pair's id, or the case's id when ``unit`` is "case".
    """

    pair_id: str
    reason: str
    unit: str = "pair"


@dataclass(frozen=True)
class ProbePlan:
    """Every request of one suite, in order, and the pairs that could not be asked."""

    suite: str
    items: tuple[ProbeItem, ...]
    skipped: tuple[SkippedPair, ...]  # pairs (counterfactual) or cases (swap) that could not be asked
    templates_sha256: str
    gold_labels: Counter  # for baseline:majority; "yes"/"no" for two-option cases, else the option id
    generation: Generation = Generation()
    selection: Selection = Selection()
    unreviewed: tuple[str, ...] = ()  # pairs asked with an edit no person accepted; cases asked with a caption a
    #                                   model drafted and no person reviewed
    left_out: tuple[str, ...] = field(default=())  # units of the suite the selection left out
    captions: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # modality: case -> condition -> digest
    #                                   of the caption texts its prompt shows (cfkit.caption_digests)
    templates: Mapping[str, str] = field(default_factory=dict)  # each probe template its requests were rendered
    #                                   from -> its digest (cfkit.prompts.template_digests): what the report compares

    def asked(self) -> dict[str, str]:
        """Per case the plan asks, a digest of what a model is shown of it (:func:`cfkit.cases.asked_digests`):
        what a run keeps when it ends, for the report to tell an answer to an earlier version of the case."""
        return asked_digests(item.case for item in self.items)

    def asked_pairs(self) -> list[str]:
        """The pairs the plan asks (counterfactual; none in other suites), each once: what a run keeps when it
        ends, for the report to tell a pair added since from one of a case the run asked."""
        return list(dict.fromkeys(item.pair_id for item in self.items if item.pair_id))


class _RequestBuilder:
    """Renders prompts into requests for one backend; images go by reference (:mod:`~cfkit.probe.image_refs`)."""

    def __init__(self, ws: Workspace, suite: str, capabilities: Capabilities, generation: Generation,
                 digests: Digests):
        self.ws = ws
        self.suite = suite
        self.capabilities = capabilities
        self.generation = generation
        self.digests = digests
        self.templates = load_templates(ws)
        self.used: set[tuple[str, ...]] = set()  # the templates each request was rendered from (a few distinct)
        self._schemas: dict[tuple[str, ...], tuple[tuple[str, ...], dict[str, Any]]] = {}  # per option set

    def item(self, case: Case, condition: str, *, pair_id: str = "", images: list[Path] | None = None,
             caption=None, edit_id: int | None = None) -> ProbeItem:
        # Only the modality conditions change the visual slot; every other suite shows the image.
        prompt_condition = condition if condition in MODALITY_CONDITIONS else "image"
        prompt = render_prompt(self.ws, case, prompt_condition, images=images, templates=self.templates,
                               caption=caption if condition in ("neutral", "evidence") else None)
        self.used.add(prompt_templates(prompt_condition, len(prompt.images)))
        option_ids = tuple(case.option_ids)
        if option_ids not in self._schemas:
            self._schemas[option_ids] = (option_ids, answer_schema(option_ids))
        option_ids, schema = self._schemas[option_ids]  # one tuple and one schema per option set, not per request
        request = ProbeRequest(
            system=sys.intern(prompt.system),  # the same text for every request of a run: held once
            user=prompt.user,
            images=self._images(list(prompt.images)),
            option_ids=option_ids,
            schema=schema,
            generation=self.generation,
            meta=RequestMeta(suite=self.suite, case_id=case.id, pair_id=pair_id, condition=condition,
                             yes_option=case.yes_option),
        )
        shown = list(prompt.images)
        if len(shown) != 1:
            return ProbeItem(case=case, pair_id=pair_id, condition=condition, request=request, edit_id=edit_id)
        # A file the request sends is hashed from the bytes read to send it; one it does not send, now.
        sent = any(isinstance(i, ImageRef) and i.kind == "file" and i.files[0].path == str(shown[0])
                   for i in request.images)
        return ProbeItem(case=case, pair_id=pair_id, condition=condition, request=request, edit_id=edit_id,
                         image_sha256=self.digests.sha256(shown[0], resolve=not sent),
                         image_file=self.digests.state(shown[0]))

    def digests_used(self) -> dict[str, str]:
        """The digest of each template the requests made so far were rendered from."""
        return template_digests(self.templates, (name for names in self.used for name in names))

    def _images(self, paths: list[Path]) -> tuple[ImageRef, ...]:
        if not paths or not self.capabilities.images:
            return ()
        return self.digests.refs(paths, as_sheet=not self.capabilities.multi_image)


def unreviewed_draft(caption) -> bool:
    """A caption a model drafted and no person has reviewed yet (what the caption lint warns about)."""
    return caption.drafted and not caption.reviewed


def suite_case_ids(ws: Workspace, suite: str, cases: CaseSet, selection: Selection | None = None) -> list[str]:
    """The cases a contextcanvas, modality or swap run asks about, before any selection, in order.

    Modality: the subset as every command reads it (:func:`cfkit.subsets.modality_cases`): ``--subset``,
    ``--all-cases`` or the configured file, which must exist.
    """
    if suite == "swap":
        return swap.swap_case_ids(cases)
    if suite == "modality":
        from cfkit.subsets import modality_cases

        selection = selection or Selection()
        return modality_cases(ws, cases, subset=selection.subset, all_cases=selection.all_cases)
    return list(cases.ids)


#: Where a suite's cases come from, for a --cases message.
_SUITE_CASES = {"modality": "the modality subset", "contextcanvas": "the cases file"}


def select_case_ids(ws: Workspace, suite: str, cases: CaseSet, selection: Selection) -> tuple[list[str], list[str]]:
    """(the cases a contextcanvas, modality or swap run asks, the cases its selection leaves out).

    ``--cases`` first (every listed case must belong to the suite), then
    ``--reviewed-only`` (modality), then ``--limit``.
    """
    ids = suite_case_ids(ws, suite, cases, selection)
    if selection.cases is not None:
        from cfkit.subsets import read_subset

        wanted = read_subset(selection.cases, cases)
        outside = [c for c in wanted if c not in set(ids)]
        if outside:
            why = (f"it has {swap.swap_problem(cases.get(outside[0]))}" if suite == "swap"
                   else f"it is not in {_SUITE_CASES[suite]}")
            raise CaseError(f"--cases {selection.cases}: case {outside[0]} is not part of the {suite} suite: {why}. "
                            "Remove it from the file.")
        keep = set(wanted)
        ids = [c for c in ids if c in keep]
    if suite == "modality":
        from cfkit.captions import require_captions

        # Every caption this run reads is there, or one line says how many are not (before anything is sent).
        require_captions(ws, ids if selection.reviewed_only or selection.limit is None else ids[: selection.limit])
    if selection.reviewed_only and suite == "modality":
        from cfkit.captions import load_caption

        ids = [c for c in ids if not unreviewed_draft(load_caption(ws, c))]
    if selection.limit is not None:
        ids = ids[: selection.limit]
    chosen = set(ids)
    return ids, [c for c in suite_case_ids(ws, suite, cases, selection) if c not in chosen]


def plan_suite(ws: Workspace, suite: str, capabilities: Capabilities, *, store: Store | None = None,
               generation: Generation | None = None, selection: Selection = Selection(),
               cases: CaseSet | None = None, max_tokens: int | None = None,
               digests: Digests | None = None, lazy: bool = False) -> ProbePlan:
    """Every request of ``suite`` for a backend with ``capabilities``, narrowed by ``selection``.

    Errors in the inputs (a missing caption, an unknown case in the subset
    file, an unreadable image) stop here, before any request is sent.
    ``max_tokens`` is a shortcut for ``generation=Generation(max_tokens=…)``.
    Images are held by reference: ``digests`` (by default one over ``store``)
    knows what each file holds, and what it learns is remembered in the store.
    With ``lazy`` an image file not known yet is only checked (header and end
    marker), and its digest is taken when its request is sent.
    """
    if suite not in SUITE_CONDITIONS:
        raise UsageError(f"suite '{suite}' is not one of {', '.join(SUITE_CONDITIONS)}.")
    if generation is None:
        generation = Generation(max_tokens=max_tokens or DEFAULT_MAX_TOKENS)
    if cases is None:
        cases = load_cases(ws.cases_path, ws.image_root)
    if digests is None:
        digests = Digests(store, lazy=lazy)
    builder = _RequestBuilder(ws, suite, capabilities, generation, digests)
    items: list[ProbeItem] = []
    skipped: list[SkippedPair] = []
    unreviewed: list[str] = []
    left_out: list[str] = []
    captions: dict[str, dict[str, str]] = {}
    gold: Counter = Counter()
    # The image condition's files, as the header checks found them: the same Path objects all the way, so the
    # plan's lookups by path do not rebuild and rehash a path per request (where the cases' image folder is the
    # workspace's, the folder the prompt names them in).
    own_paths = cases.image_root == ws.image_root
    if suite == "contextcanvas":
        case_ids, left_out = select_case_ids(ws, suite, cases, selection)
        checked = [p for c in case_ids for p in cases.image_paths(cases.get(c))]
        digests.prefetch(checked)
        shown = iter(checked)  # each case's files, in the order they were checked
        for case in (cases.get(c) for c in case_ids):
            own = [next(shown) for _ in case.images]
            items.append(builder.item(case, "image", images=own if own_paths else None))
            gold[gold_label(case, case.gold)] += 1
        del checked, shown
    elif suite == "modality":
        from cfkit.caption_digests import condition_digests
        from cfkit.captions import load_caption

        case_ids, left_out = select_case_ids(ws, suite, cases, selection)
        digests.prefetch([p for c in case_ids for p in cases.image_paths(cases.get(c))])
        for case in (cases.get(c) for c in case_ids):
            gold[gold_label(case, case.gold)] += 1
            caption = load_caption(ws, case.id)  # read once for the neutral and evidence conditions
            if unreviewed_draft(caption):
                unreviewed.append(case.id)
            captions[case.id] = condition_digests(caption.neutral, caption.evidence)
            for condition in SUITE_CONDITIONS["modality"]:
                items.append(builder.item(case, condition, caption=caption))
    elif suite == "swap":
        case_ids, left_out = select_case_ids(ws, suite, cases, selection)
        skipped = [SkippedPair(c.id, problem, unit="case") for c in cases
                   if (problem := swap.swap_problem(c)) is not None]
        for case in (cases.get(c) for c in case_ids):
            gold[gold_label(case, case.gold)] += 1  # the same Yes/No label in both orders
            for condition in SWAP_CONDITIONS:
                # The item carries the case as its prompt lists it, so the reply is read against those options.
                items.append(builder.item(swap.as_listed(case, condition), condition))
    else:
        if store is None:
            raise UsageError(f"the counterfactual suite has no requests in {ws.root}: no edit is recorded yet (there "
                             f"is no store at {ws.db_path}); make the edits with 'cfkit edit --pending', then run "
                             "again.")
        from cfkit.subsets import read_subset

        wanted = set(read_subset(selection.cases, cases)) if selection.cases is not None else None
        asked = 0
        for pair_id, pair_items, pair_skip, accepted in _counterfactual(ws, store, cases, builder,
                                                                       selection.accepted_only):
            if pair_skip is not None:
                skipped.append(pair_skip)
                continue
            if (wanted is not None and pair_items[0].case.id not in wanted) or (
                    selection.limit is not None and asked >= selection.limit):
                left_out.append(pair_id)
                continue
            asked += 1
            items.extend(pair_items)
            if not accepted:
                unreviewed.append(pair_id)
        for item in items:
            gold[gold_label(item.case, _pair_gold(ws, item))] += 1
    digests.save()
    return ProbePlan(suite=suite, items=tuple(items), skipped=tuple(skipped),
                     templates_sha256=templates_sha256(ws), gold_labels=gold, generation=generation,
                     selection=selection, unreviewed=tuple(unreviewed), left_out=tuple(left_out),
                     captions=captions, templates=builder.digests_used())


def _pair_gold(ws: Workspace, item: ProbeItem) -> str:
    from cfkit.specs import load_spec

    labels = load_spec(ws, item.pair_id).spec.labels
    label = labels.original if item.condition == "original" else labels.edit
    return item.case.option_for_label(label) or item.case.gold


def _counterfactual(ws: Workspace, store: Store, cases: CaseSet, builder: _RequestBuilder, accepted_only: bool):
    """(pair id, items, skipped-or-None, accepted by a person) per spec file, in spec order."""
    from cfkit.specs import load_spec_file, spec_files
    from cfkit.store import edits, reviews

    for path in spec_files(ws):
        try:
            spec = load_spec_file(path).spec
        except SpecError as exc:
            yield path.stem, [], SkippedPair(path.stem, f"invalid spec ({exc})"), False
            continue
        if spec.case not in cases:
            yield spec.id, [], SkippedPair(spec.id, f"case '{spec.case}' is not in {cases.path}"), False
            continue
        case = cases.get(spec.case)
        if len(case.images) != 1:
            yield spec.id, [], SkippedPair(spec.id, f"case {case.id} has {plural(len(case.images), 'image')}; pairs edit one "
                                                    "image"), False
            continue
        edit = edits.selected(store, spec.id, require_accepted=accepted_only)
        if edit is None:
            yield spec.id, [], SkippedPair(spec.id, why_no_edit(store, spec.id, accepted_only)), False
            continue
        edited = edit.composite_path
        if edited is None or not Path(edited).is_file():
            yield spec.id, [], SkippedPair(spec.id, f"edit {edit.id}'s composite image {edited} is not there any "
                                                    "more (deleted or moved since the edit wrote it); make a new edit "
                                                    f"with 'cfkit edit {spec.id}', or put the file back"), False
            continue
        changed = edit.changed_file(cases.image_paths(case)[0], builder.digests.sha256, variants=("composite",))
        if changed is not None:
            yield spec.id, [], SkippedPair(spec.id, f"changed file: {changed}; make a new edit with 'cfkit edit "
                                                    f"{spec.id}', or put the earlier file back"), False
            continue
        decision = reviews.on_edit(store, edit.id)
        accepted = decision is not None and decision.decision == "accept"
        yield spec.id, [builder.item(case, "original", pair_id=spec.id),
                        builder.item(case, "edit", pair_id=spec.id, images=[edited], edit_id=edit.id)], None, accepted


def why_no_edit(store: Store, spec_id: str, accepted_only: bool = False) -> str:
    """Why pair ``spec_id`` has no edit a probe can use, as its newest edit stands: none made, the edit failed,
    rejected in review, its preservation check failed or has not run, or (``--accepted-only``) not accepted."""
    from cfkit.store import checks, edits, reviews

    newest = edits.newest(store, spec_id)
    if newest is None:
        return f"no edit yet; run 'cfkit edit {spec_id}'"
    ok = edits.ok_edits(store, spec_id)
    if not ok:
        why = f": {newest.error}" if newest.error else ""
        return f"no usable edit: edit #{newest.id} {newest.status}{why}; run 'cfkit edit {spec_id}' again"
    last = ok[-1]
    decision = reviews.on_edit(store, last.id)
    if decision is not None and decision.decision == "reject":
        return f"rejected edit: edit #{last.id} was rejected in review; run 'cfkit edit {spec_id}' for another"
    if accepted_only:
        return f"no accepted edit (--accepted-only): edit #{last.id} is not accepted; run 'cfkit review {spec_id}'"
    check = checks.latest(store, last.id)
    if check is None:
        return (f"no usable edit: edit #{last.id} has no preservation check yet; run 'cfkit check {spec_id}' or "
                f"'cfkit review {spec_id}'")
    why = "; ".join(check.reasons) or check.verdict
    return (f"failed check: edit #{last.id} failed its preservation check ({why}); accept it in 'cfkit review "
            f"{spec_id}', or run 'cfkit edit {spec_id}' again")
