"""Probe runs: build a suite's requests, send only what is missing, store every reply.

A run is one model on one suite. Its id is derived from the model, the suite,
the backend settings that can change answers and the templates' hash, so
running the same command again continues (or re-checks) the same run.

For each request the runner, in order:

1. keeps the run's stored reply when it was made from the identical request
   and is not a transport failure;
2. otherwise answers from the response cache (``responses`` table), keyed by a
   SHA-256 over backend kind, model, answer-changing options and the exact
   request (texts, image bytes, option ids, schema, decoding);
3. otherwise sends it, with at most ``concurrency`` requests in flight, and
   commits the reply as soon as it arrives.

So a rerun makes no model call, and a run stopped by Ctrl-C, a crash or a
``kill -9`` resumes with only the missing requests. A run that ended complete
also records a digest of its inputs (:func:`inputs_sha256`); running the same
command on unchanged inputs then returns at once, without rendering a prompt. Replies are parsed with
:func:`cfkit.parse.parse_answer`; transport failures are stored as error
``transport`` with a null answer and retried on the next run.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cfkit import __version__
from cfkit.backends import (
    Backend, Capabilities, Generation, ImageData, ProbeRequest, Reply, RequestMeta, TransportError, is_async,
)
from cfkit.cases import Case, CaseSet, load_cases
from cfkit.errors import ImageError, InputError, SpecError
from cfkit.store import Store, now, to_json
from cfkit.workspace import Workspace

SUITES: dict[str, tuple[str, ...]] = {
    "contextcanvas": ("image",),
    "counterfactual": ("original", "edit"),
    "modality": ("text", "neutral", "evidence", "image"),
}
CONFIDENCE = ("low", "medium", "high")
DEFAULT_MAX_TOKENS = 512
#: Image types sent to models as they are; others are re-encoded as PNG.
SENDABLE_MIME = frozenset({"image/png", "image/jpeg", "image/webp", "image/gif"})


# ---------------------------------------------------------------------------
# Requests


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


def image_data(path: Path) -> ImageData:
    """An image file as sent to a model: its exact bytes and MIME type, read from the content.

    PNG, JPEG, WebP and GIF go as they are (so the cache key covers the very
    bytes sent); other formats are decoded by :func:`cfkit.images.open_image`
    and re-encoded as PNG. A file that is not an image is an :class:`ImageError`.
    """
    import io

    from PIL import Image, UnidentifiedImageError

    from cfkit.images import decode_image, png_bytes

    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ImageError(f"image {path}: not found. Put the file there or fix the path.") from None
    except OSError as exc:
        raise ImageError(f"image {path}: cannot be read ({exc.strerror}).") from exc
    try:
        with Image.open(io.BytesIO(data)) as header:  # reads the header only
            mime = header.get_format_mimetype()
    except (UnidentifiedImageError, OSError, ValueError) as exc:
        raise ImageError(f"image {path}: not a readable image file (corrupt or unknown format).") from exc
    if mime in SENDABLE_MIME:
        return ImageData(data, mime)
    return ImageData(png_bytes(decode_image(data, source=str(path))), "image/png")


def side_by_side(paths: list[Path], labels: list[str]) -> ImageData:
    """Two images as one labelled PNG sheet, for backends that take a single image.

    Each panel keeps its aspect ratio at a common height, with its label in a
    white band above it, in the order the prompt names them.
    """
    from PIL import Image, ImageDraw, ImageFont

    from cfkit.images import open_image, png_bytes

    images = [open_image(p) for p in paths]
    height = min(max(im.height for im in images), 1024)
    panels = [im.resize((max(1, round(im.width * height / im.height)), height), Image.Resampling.BICUBIC)
              for im in images]
    gap, band = 16, 40
    sheet = Image.new("RGB", (sum(p.width for p in panels) + gap * (len(panels) + 1), height + band + gap),
                      (255, 255, 255))
    draw = ImageDraw.Draw(sheet)
    font = ImageFont.load_default(size=24)
    x = gap
    for panel, label in zip(panels, labels, strict=True):
        draw.text((x, 8), label, fill=(0, 0, 0), font=font)
        sheet.paste(panel, (x, band))
        x += panel.width + gap
    return ImageData(png_bytes(sheet), "image/png")


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
        from cfkit.captions import load_templates

        self.ws = ws
        self.suite = suite
        self.capabilities = capabilities
        self.generation = Generation(temperature=0.0, max_tokens=max_tokens)
        self.templates = load_templates(ws)
        self._image_cache: dict[Path, ImageData] = {}  # cases often share an image file

    def item(self, case: Case, condition: str, *, pair_id: str = "", images: list[Path] | None = None,
             caption=None) -> ProbeItem:
        from cfkit.captions import render_prompt

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
    from cfkit.captions import load_caption, read_subset, templates_sha256

    if suite not in SUITES:
        raise InputError(f"suite '{suite}' is not one of {', '.join(SUITES)}.")
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
        subset = ws.probes_dir / ws.config.probe.modality_subset
        if not subset.is_file():
            raise InputError(f"modality subset {subset} not found. Write one case id a line there, "
                             "or set [probe] modality_subset in cfkit.toml.")
        for case_id in read_subset(subset, cases):
            case = cases.get(case_id)
            gold[gold_label(case, case.gold)] += 1
            caption = load_caption(ws, case.id)  # read once for the neutral and evidence conditions
            for condition in SUITES["modality"]:
                items.append(builder.item(case, condition, caption=caption))
    else:
        if store is None:
            raise InputError("the counterfactual suite needs the store, to find each pair's edit.")
        for pair_items, pair_skip in _counterfactual(ws, store, cases, builder, accepted_only):
            items.extend(pair_items)
            if pair_skip is not None:
                skipped.append(pair_skip)
        for item in items:
            gold[gold_label(item.case, _pair_gold(ws, item))] += 1
    return ProbePlan(suite=suite, items=tuple(items), skipped=tuple(skipped),
                     templates_sha256=templates_sha256(ws), gold_labels=gold)


def _pair_gold(ws: Workspace, item: ProbeItem) -> str:
    from cfkit.specs import load_spec

    labels = load_spec(ws, item.pair_id).spec.labels
    label = labels.original if item.condition == "original" else labels.edit
    return item.case.option_for_label(label) or item.case.gold


def _counterfactual(ws: Workspace, store: Store, cases: CaseSet, builder: _RequestBuilder, accepted_only: bool):
    """(items, skipped-or-None) per spec file, in spec order."""
    from cfkit.edit import select_edit
    from cfkit.specs import load_spec_file, spec_files

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
        edit = select_edit(ws, store, spec.id, require_accepted=accepted_only)
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


# ---------------------------------------------------------------------------
# Cache keys and run ids


def cache_key(backend: Backend, request: ProbeRequest) -> str:
    """SHA-256 over backend kind, model, answer-changing options and the exact request.

    Backends whose answers depend on where a request comes from rather than on
    its content (replay, baselines) have ``meta`` included as well.
    """
    material: dict[str, Any] = {
        "backend": backend.kind,
        "model": backend.model,
        "identity": backend.cache_identity,
        "request": request.fingerprint(),
    }
    if not backend.capabilities.cacheable:
        material["meta"] = asdict(request.meta)
    blob = json.dumps(material, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def run_id_for(backend: Backend, suite: str, templates_sha256: str) -> str:
    """A readable, stable run id: ``suite-model-hash``; the hash covers what changes answers."""
    material = json.dumps({"model": backend.model, "suite": suite, "identity": backend.cache_identity,
                           "templates": templates_sha256}, sort_keys=True, default=str)
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", backend.model).strip("-")[:48]
    return f"{suite}-{slug}-{hashlib.sha256(material.encode()).hexdigest()[:8]}"


# ---------------------------------------------------------------------------
# Running


@dataclass
class RunProgress:
    """Where a run stands, passed to the progress callback after every reply."""

    total: int
    done: int = 0  # replies in the store, including those kept from before
    sent: int = 0  # requests sent in this invocation
    errors: int = 0  # transport failures in this invocation
    cost_usd: float = 0.0  # spent in this invocation
    priced: bool = False


@dataclass(frozen=True)
class RunSummary:
    """What one invocation of a run did."""

    run_id: str
    model: str
    suite: str
    status: str  # done | incomplete | interrupted | failed
    total: int
    kept: int  # replies already stored for identical requests
    from_cache: int  # answered from the response cache
    sent: int
    errors: int  # transport failures left for the next run
    invalid: int  # replies without a valid answer (parse errors, refusals), in the whole run
    cost_usd: float | None
    skipped: tuple[SkippedPair, ...]
    stopped: str | None = None  # why sending stopped early (budget)
    notes: tuple[str, ...] = ()


class _Budget:
    """Stops sending before the spent cost plus the requests in flight could pass ``limit``.

    A request's cost is estimated as the most expensive one seen so far; the
    first request is sent alone to learn it.
    """

    def __init__(self, limit: float):
        self.limit = limit
        self.spent = 0.0
        self.largest = 0.0
        self.seen = 0
        self.in_flight = 0

    def admit(self) -> bool:
        if self.seen == 0:
            return self.in_flight == 0 and self.limit > 0
        return self.spent + (self.in_flight + 1) * self.largest <= self.limit

    def record(self, cost: float | None) -> None:
        self.seen += 1
        if cost is not None:
            self.spent += cost
            self.largest = max(self.largest, cost)


def run_probe(store: Store, backend: Backend, plan: ProbePlan, *, concurrency: int | None = None,
              max_cost: float | None = None, on_progress: Callable[[RunProgress], None] | None = None,
              inputs_sha256: str | None = None) -> RunSummary:
    """Ask ``backend`` every request of ``plan`` that has no stored reply; see the module docstring.

    ``inputs_sha256`` (from :func:`inputs_sha256`) is recorded when the run
    ends complete, so the next identical command can skip planning.

    Raises :class:`BackendError` (after recording the run as failed) when the
    backend cannot go on, e.g. a rejected key.
    """
    # 1. Check the inputs.
    if concurrency is None:
        concurrency = 4 if backend.capabilities.remote else 1
    if concurrency < 1:
        raise InputError(f"--concurrency {concurrency}: must be at least 1.")
    if max_cost is not None and not backend.priced:
        raise InputError(f"--max-cost needs prices, and {backend.model} has none. Give them as "
                         "-o price_in=USD_PER_M_INPUT_TOKENS -o price_out=USD_PER_M_OUTPUT_TOKENS.")

    # 2. Open (or continue) the run.
    run_id = run_id_for(backend, plan.suite, plan.templates_sha256)
    _open_run(store, run_id, backend, plan)
    keys = {item.key: cache_key(backend, item.request) for item in plan.items}

    # 3. Keep what is stored; answer from the cache what can be.
    stored = {(r["case_id"], r["pair_id"], r["condition"]): (r["cache_key"], r["error"])
              for r in store.query("SELECT case_id, pair_id, condition, cache_key, error FROM replies "
                                   "WHERE run_id = ?", (run_id,))}
    pending = [item for item in plan.items
               if stored.get(item.key, (None, "transport"))[1] == "transport" or stored[item.key][0] != keys[item.key]]
    notes: set[str] = set()
    stale = sorted(set(stored) - set(keys))
    if stale:
        # E.g. a pair whose edit was rejected since: its old replies would be reported as if current.
        # The raw responses stay in the cache.
        with store.transaction() as conn:
            conn.executemany("DELETE FROM replies WHERE run_id = ? AND case_id = ? AND pair_id = ? AND condition = ?",
                             [(run_id, *key) for key in stale])
        names = ", ".join(" ".join(part for part in key if part) for key in stale[:5])
        notes.add(f"removed {len(stale)} stored replies no longer in the suite ({names}"
                  f"{', …' if len(stale) > 5 else ''})")
    kept = len(plan.items) - len(pending)
    from_cache = 0
    to_send: list[ProbeItem] = []
    cached = _cached_responses(store, [keys[i.key] for i in pending]) if backend.capabilities.cacheable else {}
    for item in pending:
        reply = cached.get(keys[item.key])
        if reply is None:
            to_send.append(item)
        else:
            _record(store, run_id, item, keys[item.key], reply, cache_as=None)
            from_cache += 1

    # 4. Send the rest.
    progress = RunProgress(total=len(plan.items), done=kept + from_cache, priced=backend.priced)
    if on_progress:
        on_progress(progress)
    sender = _Sender(store, run_id, backend, keys, progress, on_progress,
                     _Budget(max_cost) if max_cost is not None else None)
    sender.notes.update(notes)
    status = "failed"
    try:
        asyncio.run(sender.send_all(to_send, concurrency))
        status = "done"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        counts = _close_run(store, run_id, status, sender.stopped, plan, sorted(sender.notes), inputs_sha256)
    return RunSummary(
        run_id=run_id, model=backend.model, suite=plan.suite, status=counts["status"], total=len(plan.items),
        kept=kept, from_cache=from_cache, sent=progress.sent, errors=progress.errors, invalid=counts["invalid"],
        cost_usd=progress.cost_usd if backend.priced else None, skipped=plan.skipped, stopped=sender.stopped,
        notes=tuple(sorted(sender.notes)),
    )


class _Sender:
    """Sends requests with a bounded number in flight and records each reply as it arrives."""

    def __init__(self, store: Store, run_id: str, backend: Backend, keys: dict, progress: RunProgress,
                 on_progress: Callable[[RunProgress], None] | None, budget: _Budget | None):
        self.store = store
        self.run_id = run_id
        self.backend = backend
        self.keys = keys
        self.progress = progress
        self.on_progress = on_progress
        self.budget = budget
        self.stopped: str | None = None
        self.notes: set[str] = set()
        self._async = is_async(backend)

    async def send_all(self, items: list[ProbeItem], concurrency: int) -> None:
        queue = iter(items)
        try:
            if self.budget is not None:
                # Learn what one request costs before sending several at once.
                first = next(queue, None)
                if first is not None:
                    await self._one(first)
            workers = [asyncio.create_task(self._worker(queue)) for _ in range(concurrency)]
            try:
                await asyncio.gather(*workers)
            except BaseException:
                for task in workers:
                    task.cancel()
                await asyncio.gather(*workers, return_exceptions=True)
                raise
        finally:
            closer = getattr(self.backend, "aclose", None)
            if closer is not None:
                await closer()

    async def _worker(self, queue) -> None:
        while self.stopped is None:
            item = next(queue, None)
            if item is None:
                return
            await self._one(item)

    async def _one(self, item: ProbeItem) -> None:
        budget = self.budget
        if budget is not None:
            if not budget.admit():
                self.stopped = (f"--max-cost {budget.limit:g} USD would be exceeded (spent {budget.spent:.4f} USD "
                                "in this invocation); raise it and run again to continue")
                return
            budget.in_flight += 1
        key = self.keys[item.key]
        try:
            if self._async:
                reply = await self.backend.answer(item.request)
            else:
                reply = await asyncio.to_thread(self.backend.answer, item.request)
        except TransportError as exc:
            _record_transport(self.store, self.run_id, item, key, str(exc))
            self.progress.errors += 1
            reply = None
        finally:
            if budget is not None:
                budget.in_flight -= 1
        self.progress.sent += 1
        if reply is not None:
            _record(self.store, self.run_id, item, key, reply,
                    cache_as=self.backend if self.backend.capabilities.cacheable else None)
            self.progress.done += 1
            self.notes.update(reply.notes)
            if reply.cost_usd is not None:
                self.progress.cost_usd += reply.cost_usd
            if budget is not None:
                budget.record(reply.cost_usd)
        if self.on_progress:
            self.on_progress(self.progress)


# ---------------------------------------------------------------------------
# The store: runs, responses, replies


def _open_run(store: Store, run_id: str, backend: Backend, plan: ProbePlan) -> None:
    options = {"options": backend.options.model_dump(mode="json") if hasattr(backend, "options") else {},
               "identity": backend.cache_identity}
    notes = {"skipped": [asdict(s) for s in plan.skipped]}
    with store.transaction() as conn:
        conn.execute(
            "INSERT INTO runs (id, model, suite, options, cfkit_version, templates_sha256, started_at, status, "
            "n_requests, notes) VALUES (?, ?, ?, ?, ?, ?, ?, 'running', ?, ?) "
            "ON CONFLICT(id) DO UPDATE SET status = 'running', finished_at = NULL, n_requests = excluded.n_requests, "
            "cfkit_version = excluded.cfkit_version, notes = excluded.notes",
            (run_id, backend.model, plan.suite, to_json(options), __version__, plan.templates_sha256, now(),
             len(plan.items), to_json(notes)),
        )


def _close_run(store: Store, run_id: str, status: str, stopped: str | None, plan: ProbePlan,
               notes: list[str], inputs_digest: str | None = None) -> dict[str, Any]:
    """Recount the run's replies and record how this invocation ended."""
    wanted = {item.key for item in plan.items}
    rows = store.query("SELECT case_id, pair_id, condition, answer, error FROM replies WHERE run_id = ?", (run_id,))
    present = [r for r in rows if (r["case_id"], r["pair_id"], r["condition"]) in wanted]
    errors = sum(1 for r in present if r["error"] == "transport")
    invalid = sum(1 for r in present if r["answer"] is None and r["error"] != "transport")
    done = len(present) - errors
    if status == "done" and (errors or done < len(plan.items) or stopped):
        status = "incomplete"
    cost = store.query("SELECT SUM(s.cost_usd) FROM replies r JOIN responses s ON s.cache_key = r.cache_key "
                       "WHERE r.run_id = ?", (run_id,))[0][0]
    previous = store.query("SELECT notes FROM runs WHERE id = ?", (run_id,))
    record = json.loads(previous[0]["notes"] or "{}") if previous else {}
    record["backend_notes"] = notes
    record["stopped"] = stopped
    record["inputs_sha256"] = inputs_digest if status == "done" else None
    with store.transaction() as conn:
        conn.execute("UPDATE runs SET status = ?, finished_at = ?, n_done = ?, n_errors = ?, cost_usd = ?, "
                     "notes = ? WHERE id = ?", (status, now(), done, errors, cost, to_json(record), run_id))
    return {"status": status, "done": done, "errors": errors, "invalid": invalid}


def _cached_responses(store: Store, keys: list[str]) -> dict[str, Reply]:
    found: dict[str, Reply] = {}
    for start in range(0, len(keys), 500):
        chunk = keys[start:start + 500]
        rows = store.query(f"SELECT cache_key, raw, usage, latency_s, cost_usd, refused FROM responses "
                           f"WHERE cache_key IN ({','.join('?' * len(chunk))})", tuple(chunk))
        for r in rows:
            found[r["cache_key"]] = Reply(raw=r["raw"], usage=json.loads(r["usage"] or "{}"),
                                          latency_s=r["latency_s"] or 0.0, cost_usd=r["cost_usd"],
                                          refused=bool(r["refused"]))
    return found


def read_reply(reply: Reply, case: Case) -> dict[str, Any]:
    """The stored fields of a reply: answer, parse, error, reason, confidence, detail."""
    if reply.known is not None:
        k = reply.known
        return {"answer": k.answer, "parse": k.parse, "error": k.error, "reason": k.reason,
                "confidence": k.confidence, "detail": None}
    if reply.refused:
        return {"answer": None, "parse": None, "error": "refused", "reason": reply.raw, "confidence": None,
                "detail": "the model declined to answer"}
    from cfkit.parse import parse_answer

    parsed = parse_answer(reply.raw, case.options)
    return {"answer": parsed.answer, "parse": parsed.rule, "error": parsed.error, "reason": parsed.reason,
            "confidence": parsed.confidence, "detail": parsed.detail or None}


def _record(store: Store, run_id: str, item: ProbeItem, key: str, reply: Reply, *,
            cache_as: Backend | None) -> None:
    """Store one reply of the run (and, for a fresh response of a cacheable backend, the response)."""
    fields = read_reply(reply, item.case)
    with store.transaction() as conn:
        if cache_as is not None:
            conn.execute(
                "INSERT OR IGNORE INTO responses (cache_key, backend, model, raw, usage, latency_s, cost_usd, "
                "refused, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (key, cache_as.kind, cache_as.model, reply.raw, to_json(reply.usage), reply.latency_s,
                 reply.cost_usd, int(reply.refused), now()),
            )
        _write_reply(conn, run_id, item, key, reply.raw, fields)


def _record_transport(store: Store, run_id: str, item: ProbeItem, key: str, message: str) -> None:
    fields = {"answer": None, "parse": None, "error": "transport", "reason": None, "confidence": None,
              "detail": message}
    with store.transaction() as conn:
        _write_reply(conn, run_id, item, key, None, fields)


def _write_reply(conn, run_id: str, item: ProbeItem, key: str, raw: str | None, fields: dict[str, Any]) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO replies (run_id, case_id, pair_id, condition, cache_key, answer, parse, error, "
        "reason, confidence, raw, detail, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (run_id, item.case.id, item.pair_id, item.condition, key, fields["answer"], fields["parse"],
         fields["error"], fields["reason"], fields["confidence"], raw, fields["detail"], now()),
    )


# ---------------------------------------------------------------------------
# Reading runs back


@dataclass(frozen=True)
class RunRecord:
    """One row of the runs table."""

    id: str
    model: str
    suite: str
    status: str
    started_at: str
    finished_at: str | None
    n_requests: int
    n_done: int
    n_errors: int
    cost_usd: float | None
    cfkit_version: str
    templates_sha256: str | None
    options: dict[str, Any]
    notes: dict[str, Any]


def _run_record(row) -> RunRecord:
    return RunRecord(
        id=row["id"], model=row["model"], suite=row["suite"], status=row["status"], started_at=row["started_at"],
        finished_at=row["finished_at"], n_requests=row["n_requests"], n_done=row["n_done"],
        n_errors=row["n_errors"], cost_usd=row["cost_usd"], cfkit_version=row["cfkit_version"],
        templates_sha256=row["templates_sha256"], options=json.loads(row["options"] or "{}"),
        notes=json.loads(row["notes"] or "{}"),
    )


def list_runs(store: Store) -> list[RunRecord]:
    """Every run, newest first."""
    return [_run_record(r) for r in store.query("SELECT * FROM runs ORDER BY started_at DESC, id")]


def find_run(store: Store, ref: str) -> RunRecord:
    """The run whose id is ``ref`` or starts with it (when only one does)."""
    rows = store.query("SELECT * FROM runs WHERE id = ?", (ref,))
    if not rows:
        rows = store.query("SELECT * FROM runs WHERE substr(id, 1, ?) = ?", (len(ref), ref))
    if len(rows) == 1:
        return _run_record(rows[0])
    if not rows:
        known = [r["id"] for r in store.query("SELECT id FROM runs ORDER BY started_at DESC LIMIT 5")]
        listing = ", ".join(known) if known else "none yet; start one with 'cfkit probe run'"
        raise InputError(f"no run '{ref}' in {store.path} (recent runs: {listing}). See 'cfkit runs list'.")
    raise InputError(f"run '{ref}' matches {len(rows)} runs ({', '.join(r['id'] for r in rows[:5])}); "
                     "give more of the id.")


@dataclass(frozen=True)
class ConditionCounts:
    """Replies of one condition of a run."""

    condition: str
    replies: int
    answered: int
    invalid: int  # no valid answer read (parse errors, refusals)
    transport: int  # no reply yet
    answers: dict[str, int]  # option id -> count


def run_breakdown(store: Store, run_id: str) -> list[ConditionCounts]:
    """Per condition: how many replies, answered, invalid, failed, and the answer distribution."""
    rows = store.query("SELECT condition, answer, error FROM replies WHERE run_id = ?", (run_id,))
    by_condition: dict[str, list] = {}
    for r in rows:
        by_condition.setdefault(r["condition"], []).append(r)
    order = [c for conditions in SUITES.values() for c in conditions]
    result = []
    for condition in sorted(by_condition, key=lambda c: (order.index(c) if c in order else len(order), c)):
        group = by_condition[condition]
        answers = Counter(r["answer"] for r in group if r["answer"] is not None)
        result.append(ConditionCounts(
            condition=condition, replies=len(group), answered=sum(answers.values()),
            invalid=sum(1 for r in group if r["answer"] is None and r["error"] != "transport"),
            transport=sum(1 for r in group if r["error"] == "transport"), answers=dict(sorted(answers.items())),
        ))
    return result


def export_run(store: Store, run_id: str) -> str:
    """The run's replies as predictions JSONL (DESIGN.md's Predictions format)."""
    from cfkit.predictions import dump_predictions, predictions_from_store

    return dump_predictions(predictions_from_store(store, [run_id]))


# ---------------------------------------------------------------------------
# One call for the command line


def inputs_sha256(ws: Workspace, suite: str, capabilities: Capabilities, max_tokens: int,
                  cases: CaseSet) -> str | None:
    """A digest of everything the contextcanvas or modality requests are rendered from.

    That is: the cfkit version, the suite, the backend's capabilities, the
    token limit, the templates, cfkit.toml, the cases file, the subset file,
    and the bytes of each case's caption file and images. Equal digests mean
    identical requests, so a run that ended complete with this digest needs no
    planning at all. Counterfactual requests also depend on review decisions
    in the store; they get None and are always planned.
    """
    if suite == "counterfactual":
        return None
    from cfkit.captions import caption_path, read_subset, templates_sha256

    digest = hashlib.sha256()

    def add(label: str, data: bytes) -> None:
        digest.update(label.encode() + b"\0" + len(data).to_bytes(8, "big") + data)

    settings = {"version": __version__, "suite": suite, "capabilities": asdict(capabilities),
                "max_tokens": max_tokens, "config": ws.config.model_dump(mode="json"), "root": str(ws.root)}
    add("settings", json.dumps(settings, sort_keys=True).encode())
    add("templates", templates_sha256(ws).encode())
    add("cases", ws.cases_path.read_bytes())
    case_ids = list(cases.ids)
    if suite == "modality":
        subset = ws.probes_dir / ws.config.probe.modality_subset
        if not subset.is_file():
            return None  # plan_suite reports it
        add("subset", subset.read_bytes())
        case_ids = read_subset(subset, cases)
        for case_id in case_ids:
            path = caption_path(ws, case_id)
            add(f"caption {case_id}", path.read_bytes() if path.is_file() else b"\0missing")
    seen: set[Path] = set()
    for case_id in case_ids:
        for path in cases.image_paths(cases.get(case_id)):
            if path not in seen:
                seen.add(path)
                add(f"image {path}", hashlib.sha256(path.read_bytes()).digest() if path.is_file() else b"\0missing")
    return digest.hexdigest()


def _finished(store: Store, backend: Backend, suite: str, templates: str, digest: str) -> RunRecord | None:
    """The run of ``backend`` on ``suite`` when it ended complete from inputs with ``digest``."""
    rows = store.query("SELECT * FROM runs WHERE id = ?", (run_id_for(backend, suite, templates),))
    if not rows:
        return None
    record = _run_record(rows[0])
    complete = record.status == "done" and record.n_done == record.n_requests and record.n_errors == 0
    return record if complete and record.notes.get("inputs_sha256") == digest else None


def probe_suite(ws: Workspace, store: Store, model: str, suite: str, *, options: dict[str, Any] | None = None,
                concurrency: int | None = None, max_cost: float | None = None,
                max_tokens: int = DEFAULT_MAX_TOKENS, accepted_only: bool = False,
                on_progress: Callable[[RunProgress], None] | None = None) -> RunSummary:
    """``cfkit probe run``: plan ``suite`` for ``model`` ("KIND:NAME"), build the backend, run.

    Steps: 1. when the same run already ended complete from identical inputs
    (:func:`inputs_sha256`), report it and stop; 2. plan, so bad inputs stop
    the run before a request is sent; 3. build the backend, giving it the
    suite's gold-label distribution (only ``baseline:majority`` reads it);
    4. run.
    """
    from cfkit.backends import BackendContext, backend_class, load_backend, split_model
    from cfkit.captions import templates_sha256

    kind, _ = split_model(model)
    capabilities = backend_class(kind).capabilities
    cases = load_cases(ws.cases_path, ws.image_root)

    # 1. Nothing to do?
    digest = inputs_sha256(ws, suite, capabilities, max_tokens, cases) if capabilities.cacheable else None
    if digest is not None:
        backend = load_backend(model, options or {}, context=BackendContext(suite=suite, root=ws.root))
        finished = _finished(store, backend, suite, templates_sha256(ws), digest)
        if finished is not None:
            invalid = store.query("SELECT COUNT(*) FROM replies WHERE run_id = ? AND answer IS NULL",
                                  (finished.id,))[0][0]
            progress = RunProgress(total=finished.n_requests, done=finished.n_requests, priced=backend.priced)
            if on_progress:
                on_progress(progress)
            return RunSummary(run_id=finished.id, model=finished.model, suite=suite, status="done",
                              total=finished.n_requests, kept=finished.n_requests, from_cache=0, sent=0, errors=0,
                              invalid=invalid, cost_usd=0.0 if backend.priced else None, skipped=())

    # 2. Plan.
    plan = plan_suite(ws, suite, capabilities, store=store, max_tokens=max_tokens, accepted_only=accepted_only,
                      cases=cases)
    if not plan.items:
        skipped = "; ".join(f"{s.pair_id}: {s.reason}" for s in plan.skipped[:3])
        raise InputError(f"the {suite} suite has no requests in {ws.root}"
                         + (f" (every pair was skipped: {skipped})." if skipped else "."))

    # 3. The backend, then 4. the run.
    context = BackendContext(suite=suite, gold_labels=plan.gold_labels, root=ws.root)
    backend = load_backend(model, options or {}, context=context)
    if concurrency is None and backend.capabilities.remote:
        concurrency = ws.config.probe.concurrency
    return run_probe(store, backend, plan, concurrency=concurrency, max_cost=max_cost, on_progress=on_progress,
                     inputs_sha256=digest)


def run_failures(store: Store, run_id: str) -> list[dict[str, Any]]:
    """Replies without a valid answer: case, pair, condition, error and why."""
    rows = store.query("SELECT case_id, pair_id, condition, error, detail FROM replies "
                       "WHERE run_id = ? AND answer IS NULL ORDER BY case_id, pair_id, condition", (run_id,))
    return [{"case": r["case_id"], "pair": r["pair_id"], "condition": r["condition"], "error": r["error"] or "?",
             "detail": r["detail"]} for r in rows]
