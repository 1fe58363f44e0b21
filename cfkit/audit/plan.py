"""Planning an audit: choose the cases, freeze one blinded item per (run, case) reply, record the inputs' hashes.

The audit grades ContextCanvas replies (suite ``contextcanvas``, condition
``image``), as the paper's Table S8 does. By default every case that every
given run answered is audited; ``--cases FILE`` names them; ``--balanced N``
samples N two-option cases, half with gold Yes and half with gold No (an odd
N gives the extra case to No), with the plan's seed.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cfkit.audit.masking import mask_identity
from cfkit.cases import Case, CaseSet
from cfkit.errors import CaseError, ImageError, NotFoundError, UsageError
from cfkit.files import read_text
from cfkit.plural import agree, plural
from cfkit.store import Store, audit_labels, audits, now, runs, to_json
from cfkit.store.audits import AuditItem, AuditPlan, ItemImage, content_digest
from cfkit.store.runs import ReplyRecord, RunRecord
from cfkit.subsets import read_subset, resolve_subset, workspace_cases
from cfkit.workspace import Workspace

#: The suite and condition an audit grades.
AUDIT_SUITE, AUDIT_CONDITION = "contextcanvas", "image"
#: Independent annotators per item (the paper's two evaluators).
ANNOTATORS = 2


@dataclass(frozen=True)
class PlanResult:
    """What planning froze."""

    plan: AuditPlan
    items: int
    models: int
    cases: int
    masked: int  # strings masked over all items


def plan_audit(ws: Workspace, store: Store, run_refs: Sequence[str], *, cases_file: str | Path | None = None,
               balanced: int | None = None, seed: int = 0, mask: Sequence[str] = (), force: bool = False) -> PlanResult:
    """Freeze a new audit of the given runs' replies.

    Steps: 1. check the request; 2. find the runs; 3. read their replies;
    4. choose the cases; 5. build the items (masked, hashed); 6. store it all
    in one transaction.
    """
    # 1. the request
    if not run_refs:
        raise UsageError("give the runs to audit: --run RUN (repeatable; see 'cfkit runs list').")
    if cases_file is not None and balanced is not None:
        raise UsageError("give --cases FILE or --balanced N, not both.")
    if balanced is not None and balanced < 2:
        raise UsageError(f"--balanced {balanced}: give at least 2 cases (half gold Yes, half gold No).")
    if seed < 0:
        raise UsageError(f"--seed {seed}: give a seed of 0 or more.")
    # 2. the runs
    found = _find_runs(store, run_refs)
    _refuse_unfinished(store, force)
    cases = workspace_cases(ws)
    # 3. their replies
    replies = {run.id: _usable_replies(store, run) for run in found}
    notes: list[str] = []
    # 4. the cases
    selection: dict[str, object]
    subset_sha = None
    if cases_file is not None:
        path = resolve_subset(ws, cases_file)
        chosen = read_subset(path, cases)
        subset_sha = hashlib.sha256(read_text(path, "subset file", CaseError).encode("utf-8")).hexdigest()
        for run in found:
            lacking = [c for c in chosen if c not in replies[run.id]]
            if lacking:
                raise NotFoundError(f"run {run.id} has no usable reply for case {lacking[0]}"
                                    f"{f' and {len(lacking) - 1} more' if len(lacking) > 1 else ''} of {path}; "
                                    f"finish the run with 'cfkit probe run -m {run.model} -s {AUDIT_SUITE}' or drop "
                                    "the case from the file.")
        selection = {"mode": "cases", "file": _in_workspace(ws, path), "sha256": subset_sha}
    else:
        common = [c.id for c in cases if all(c.id in replies[r.id] for r in found)]
        left = len(cases) - len(common)
        if left:
            notes.append(f"{plural(left, 'case')} left out: not answered (or failed in transport) in every run")
        if balanced is not None:
            chosen = _balanced(cases, common, balanced, seed, notes)
            selection = {"mode": "balanced", "n": balanced}
        else:
            chosen = common
            selection = {"mode": "all"}
    if not chosen:
        raise NotFoundError("no case was answered by every run; nothing to audit. See 'cfkit runs show RUN'.")
    # 5. the items
    models = [run.model for run in found]
    image_sha = {name: _image_sha256(cases, name) for c in chosen for name in cases.get(c).images}
    ids = _fresh_ids(store, len(chosen) * len(found))
    order = np.random.default_rng(seed).permutation(len(ids))
    plan_id = f"audit-{now()[:10].replace('-', '')}-{secrets.token_hex(3)}"
    items: list[AuditItem] = []
    for run in found:
        for case_id in chosen:
            index = len(items)
            items.append(_item(plan_id, ids[index], int(order[index]), run, cases.get(case_id),
                               replies[run.id][case_id], image_sha, models, mask))
    inputs = {
        "cases": {"path": _in_workspace(ws, cases.path), "sha256": hashlib.sha256(cases.path.read_bytes()).hexdigest()},
        "runs": [{"id": run.id, "model": run.model, "replies_sha256": _replies_digest(replies[run.id], chosen)}
                 for run in found],
        "mask": list(mask),
    }
    if subset_sha is not None:
        inputs["subset"] = {"path": selection["file"], "sha256": subset_sha}
    plan = AuditPlan(id=plan_id, created_at=now(), seed=seed, annotators=ANNOTATORS, selection=selection,
                     inputs=inputs, notes=notes)
    # 6. store it
    audits.create(store, plan, items)
    return PlanResult(plan, len(items), len(found), len(chosen), sum(i.masked for i in items))


def _refuse_unfinished(store: Store, force: bool) -> None:
    """A second audit while one is still being labelled is usually a mistake; --force starts it anyway."""
    plans = audits.list_plans(store)
    if not plans or force:
        return
    latest = plans[0]
    items = audits.items(store, latest.id)
    final = audit_labels.finals(store, latest.id)
    if len(final) < len(items):
        raise UsageError(f"audit {latest.id} is not finished ({len(final)} of {plural(len(items), 'item')} "
                         f"{agree(len(final), 'have')} a final label); "
                         "finish it, or pass --force to plan another (commands then act on the newest unless given "
                         "--audit ID).")


def _find_runs(store: Store, refs: Sequence[str]) -> list[RunRecord]:
    found: list[RunRecord] = []
    for ref in refs:
        run = runs.find_run(store, ref)
        if run.suite != AUDIT_SUITE:
            raise UsageError(f"run {run.id} is a {run.suite} run; the audit grades {AUDIT_SUITE} replies "
                             f"(the paper's Table S8). Give a run of 'cfkit probe run -s {AUDIT_SUITE}'.")
        if any(r.id == run.id for r in found):
            raise UsageError(f"run {run.id} is given twice; give each run once.")
        twin = next((r for r in found if r.model == run.model), None)
        if twin is not None:
            raise UsageError(f"runs {twin.id} and {run.id} are both of model {run.model}; audit one run per model.")
        found.append(run)
    return found


def _usable_replies(store: Store, run: RunRecord) -> dict[str, ReplyRecord]:
    """A run's image-condition replies by case, without transport failures (no reply arrived for those)."""
    return {r.case_id: r for r in runs.replies(store, run.id)
            if r.condition == AUDIT_CONDITION and not r.pair_id and r.error != "transport"}


def _balanced(cases: CaseSet, common: list[str], n: int, seed: int, notes: list[str]) -> list[str]:
    binary = [cases.get(c) for c in common if cases.get(c).yes_option is not None]
    yes = [c.id for c in binary if c.gold == c.yes_option]
    no = [c.id for c in binary if c.gold != c.yes_option]
    want_yes, want_no = n // 2, n - n // 2
    if len(yes) < want_yes or len(no) < want_no:
        raise UsageError(f"--balanced {n} needs {want_yes} gold-Yes and {want_no} gold-No two-option cases answered "
                         f"by every run; there are {len(yes)} and {len(no)}. Ask for fewer.")
    rng = np.random.default_rng(seed)
    picked = set(rng.choice(yes, want_yes, replace=False).tolist()) | set(rng.choice(no, want_no, replace=False).tolist())
    if len(binary) < len(common):
        notes.append(f"--balanced draws from two-option cases only: {plural(len(common) - len(binary), 'other case')} left out")
    return [c for c in common if c in picked]


def _image_sha256(cases: CaseSet, name: str) -> str:
    path = cases.image_root / name
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        raise ImageError(f"image {path}: not found; annotators must see every audited image. Put it there or "
                         "leave its case out with --cases FILE.") from None
    except OSError as exc:
        raise ImageError(f"image {path}: cannot be read ({exc.strerror}).") from exc


def _fresh_ids(store: Store, count: int) -> list[str]:
    """``count`` random item ids no item of any audit has: 8 hex digits, nothing derived from run or case."""
    ids: list[str] = []
    while len(ids) < count:
        batch = list(dict.fromkeys(secrets.token_hex(4) for _ in range(count - len(ids))))
        taken = audits.item_ids_taken(store, batch) | set(ids)
        ids += [i for i in batch if i not in taken]
    return ids


def _item(plan_id: str, item_id: str, position: int, run: RunRecord, case: Case, reply: ReplyRecord,
          image_sha: dict[str, str], models: list[str], mask: Sequence[str]) -> AuditItem:
    text = reply.reason if reply.reason and reply.reason.strip() else (reply.raw or "")
    masked = mask_identity(text, models=models, extra=[*mask, run.id])
    options = tuple((o.id, o.text) for o in case.options)
    images = tuple(ItemImage(name, image_sha[name]) for name in case.images)
    fields = dict(case_id=case.id, question=case.question, options=options, gold=case.gold,
                  yes_option=case.yes_option, rationale=case.rationale, images=images, answer=reply.answer,
                  parse=reply.parse, error=reply.error, response=masked.text)
    return AuditItem(id=item_id, audit_id=plan_id, position=position, run_id=run.id, model=run.model,
                     masked=masked.count, content_sha256=content_digest(**fields), **fields)


def _in_workspace(ws: Workspace, path: Path) -> str:
    """``path`` relative to the workspace when it is inside it (the plan stays true when the folder moves)."""
    try:
        return path.resolve().relative_to(ws.root.resolve()).as_posix()
    except ValueError:
        return str(path)


def _replies_digest(replies: dict[str, ReplyRecord], chosen: list[str]) -> str:
    """SHA-256 of the audited replies of one run as they were read (case, answer, parse, error, reason, raw)."""
    rows = [[c, replies[c].answer, replies[c].parse, replies[c].error, replies[c].reason, replies[c].raw]
            for c in sorted(chosen)]
    return hashlib.sha256(to_json(rows).encode("utf-8")).hexdigest()


def input_drift(ws: Workspace, store: Store, plan: AuditPlan) -> list[str]:
    """What changed in the plan's inputs since it was frozen (the audited items themselves never change)."""
    changed: list[str] = []
    recorded = plan.inputs.get("cases", {})
    # The cases the workspace reads now, wherever the plan's file was: a workspace copied or moved elsewhere is
    # compared with its own cases file, never with the one at the path it was planned at.
    path = ws.cases_path
    try:
        if hashlib.sha256(path.read_bytes()).hexdigest() != recorded.get("sha256"):
            changed.append(f"the cases file {path} changed")
    except OSError:
        changed.append(f"the cases file {path} is gone")
    chosen = sorted({i.case_id for i in audits.items(store, plan.id)})
    for entry in plan.inputs.get("runs", []):
        run = runs.get_run(store, entry["id"])
        if run is None:
            changed.append(f"run {entry['id']} is gone from the store")
            continue
        now_replies = _usable_replies(store, run)
        if any(c not in now_replies for c in chosen):
            changed.append(f"run {run.id} no longer has every audited reply")
        elif _replies_digest(now_replies, chosen) != entry["replies_sha256"]:
            changed.append(f"run {run.id} was rerun or changed")
    return changed
