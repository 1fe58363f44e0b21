"""What identifies a request and a run: cache keys, run settings, run ids, input digests, versions.

A run's identity is everything that can change an answer: the backend, the
model, the resolved endpoint, every generation setting, the answer-changing
options (the backend's ``cache_identity``: for hf the snapshot commit and file
hashes), the protocol preset, and the requests (templates, cases, captions and
the selection through each request's texts; images through each image file's
path, size and modification time: :func:`request_key`). All of it is known
before any image is read, so a run opens and sends its first request at once.
Changing any of them makes a new run; a run's stored replies are never
replaced by answers to other questions.

A request's cache key (:func:`cache_key`) covers the bytes of its images
instead: it is taken from the bytes read to send the request (or from the
store's digest of a file whose path, size and mtime are unchanged), so the
response cache never answers one image with a reply to another. What a run id
promises about an image is what the digest cache already trusts: a file with
the same path, size and mtime is the same file. A file rewritten in place with
its size and mtime kept (which a tool must do on purpose) stays in the same
run, but its replies record the digest and cache key of the bytes sent.
"""

from __future__ import annotations

import hashlib
import json
import os
from json.encoder import encode_basestring as _encode_text
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cfkit import __version__
from cfkit.backends import Backend, Capabilities, Generation, ProbeRequest, as_backend
from cfkit.workspace import Workspace

if TYPE_CHECKING:
    from cfkit.cases import CaseSet
    from cfkit.probe.image_refs import Digests

# What renders requests (captions, prompts, images) is imported where an inputs digest is taken: a rerun that
# finds its run finished decides by stat alone (inputs_unchanged) and needs none of it.

#: The distributions whose versions every run records (those not installed are left out).
RECORDED_LIBRARIES = ("openai", "httpx", "transformers", "torch", "diffusers", "huggingface_hub")


def _sha256(data: Any) -> str:
    blob = json.dumps(data, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _key(backend: Backend, request: ProbeRequest, images: list[Any], rule: str | None = None) -> str:
    """The key's formula (docs/formats.md "Run ids and cache keys"). A run's many keys go through
    :class:`cfkit.probe.cache_keys.RunKeys`, which serialises what its requests share once and falls back here."""
    backend = as_backend(backend)
    # The fingerprint without its images (whose digests would be taken again from bytes already hashed), then
    # the images as the caller knows them.
    fingerprint = replace(request, images=()).fingerprint() | {"images": images}
    material: dict[str, Any] = {
        "backend": backend.kind,
        "model": backend.model,
        "identity": backend.cache_identity,
        "request": fingerprint,
    }
    if rule is not None:
        material["rule"] = rule
    if not backend.capabilities.cacheable:
        material["meta"] = asdict(request.meta)
    return _sha256(material)


def cache_key(backend: Backend, request: ProbeRequest, image_sha256: Sequence[str | None] | None = None) -> str | None:
    """SHA-256 over backend kind, model, answer-changing options and the exact request (its images' bytes).

    Backends whose answers depend on where a request comes from rather than on
    its content (replay, baselines) have ``meta`` included as well.
    ``image_sha256`` gives the digest of each image's bytes where the caller
    has it (the bytes were read to send them); otherwise each image's own.
    None while an image's bytes are not known yet (a lazy plan's image not sent).
    """
    shas = list(image_sha256) if image_sha256 is not None else [None] * len(request.images)
    shas = [sha if sha is not None else image.sha256 for sha, image in zip(shas, request.images, strict=True)]
    if any(sha is None for sha in shas):
        return None
    return _key(backend, request, [[image.mime, sha] for image, sha in zip(request.images, shas)])


def request_key(backend: Backend, request: ProbeRequest) -> str:
    """The key a run's id covers for ``request``: as :func:`cache_key`, but each image held by reference is
    known by its files' path, size and mtime (``ImageRef.identity``), not by its bytes; known before any read."""
    images = [image.identity() if hasattr(image, "identity") else [image.mime, image.sha256]
              for image in request.images]
    return _key(backend, request, images, rule="files by path, size and mtime")


def run_settings(backend: Backend, generation: Generation, protocol: str | None = None) -> dict[str, Any]:
    """The settings a run records and that decide whether two runs may be reported as one model.

    Backend kind, model, the resolved endpoint (``backend.endpoint`` when the
    backend has one), the generation settings, the answer-changing options (less
    the entries a backend marks ``derived_identity``: they follow from the
    suite's cases) and the protocol preset. Inputs (cases, captions, edits) are
    not settings: a newer run with the same settings supersedes an older one.
    """
    backend = as_backend(backend)
    derived = set(backend.derived_identity)
    identity = {k: v for k, v in backend.cache_identity.items() if k not in derived}
    return {"backend": backend.kind, "model": backend.model, "endpoint": backend.endpoint,
            "generation": generation.record(), "identity": identity, "protocol": protocol}


def settings_sha256(settings: Mapping[str, Any]) -> str:
    return _sha256(dict(settings))


def requests_sha256(places: Iterable[tuple[tuple[str, str, str], str, tuple[int | None, Any]]]) -> str:
    """A digest over every planned request: its place in the suite, its key (:func:`request_key`), and what it
    is about, from ``places``: (place, request key, (edit id, the shown image file as [path, size, mtime])) of
    each request, in the order of their places, each place once.

    That is the SHA-256 of the JSON list of ``[place, key, [edit id, file]]``, written straight into the hash
    as each is given, without the list of them all that a run of 12,000 requests would hold at once. The edit
    and file are there because a backend that takes no images sends the same request for a new edit, yet its
    answers are about that edit, so a new edit still makes a new run.
    """
    digest = hashlib.sha256(b"[")
    first = True
    for place, key, shown in places:
        # json.dumps writes an item of a list as it writes that item alone, with ", " between items.
        text = _place_text(place, key, shown)
        digest.update((text if first else ", " + text).encode("utf-8"))
        first = False
    digest.update(b"]")
    return digest.hexdigest()


def _place_text(place: tuple, key: Any, shown: tuple) -> str:
    """:func:`json_text` of ``[list(place), key, list(shown)]``, written in one step where it has the shape a
    plan gives (three texts, a text, an edit id or None and a file as [text, int, int] or None), which is a
    third of the cost of the general writer; any other shape goes to :func:`json_text`."""
    if type(place) is tuple and len(place) == 3 and type(shown) is tuple and len(shown) == 2:
        (case, pair, condition), (edit, file) = place, shown
        if (type(case) is str and type(pair) is str and type(condition) is str and type(key) is str
                and (edit is None or type(edit) is int)):
            head = (f"[[{_encode_text(case)}, {_encode_text(pair)}, {_encode_text(condition)}], {_encode_text(key)}, "
                    f"[{'null' if edit is None else int.__repr__(edit)}, ")
            if file is None:
                return head + "null]]"
            if type(file) is list and len(file) == 3:
                path, size, mtime = file
                if type(path) is str and type(size) is int and type(mtime) is int:
                    return head + f"[{_encode_text(path)}, {int.__repr__(size)}, {int.__repr__(mtime)}]]]"
    return json_text([list(place), key, list(shown)])


def json_text(value: Any) -> str:
    """``json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)``, written directly for text, whole
    numbers, None and lists of them (a request's place, key, edit and file; the fields a cache key splices): the
    encoder's set-up cost more than the writing. Anything else is left to json.dumps, which writes an item of a
    list as it writes that item alone."""
    kind = type(value)
    if kind is str:
        return _encode_text(value)
    if kind is list:
        return "[" + ", ".join(map(json_text, value)) + "]"
    if kind is int:
        return int.__repr__(value)
    if value is None:
        return "null"
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def run_id_for(backend: Backend, suite: str, settings_digest: str, requests_digest: str) -> str:
    """A readable, stable run id: ``suite-model-hash``; the hash covers the settings and every request."""
    digest = _sha256({"suite": suite, "settings": settings_digest, "requests": requests_digest})
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", backend.model).strip("-")[:48]
    return f"{suite}-{slug}-{digest[:8]}"


def library_versions(backend: Backend | None = None) -> dict[str, str]:
    """cfkit's version, the installed versions of :data:`RECORDED_LIBRARIES`, and the backend's ``versions``."""
    from cfkit.registry import installed_version

    found = {"cfkit": __version__}
    for name in RECORDED_LIBRARIES:
        version = installed_version(name)
        if version is not None:
            found[name] = version
    found.update((backend.versions if backend is not None else None) or {})
    return found


@dataclass(frozen=True)
class InputsDigest:
    """What a run's requests are rendered from: a content digest, and the files it was taken from.

    ``manifest`` lets a rerun tell, with one ``stat`` per file and without
    reading or parsing any of them, that nothing changed
    (:func:`inputs_unchanged`): the digest of the settings that are not files,
    and each file's path, size and mtime (None for a file that was absent).
    """

    sha256: str
    manifest: dict[str, Any]


def _file_state(path: Path | str, stats: dict[str, list] | None = None) -> list[Any]:
    """[path, size, mtime] of ``path`` (None, None when it cannot be stat'ed); an entry found is put in ``stats``
    by the path's text."""
    text = str(path)
    try:
        st = os.stat(path)
    except OSError:
        return [text, None, None]
    entry = [text, st.st_size, st.st_mtime_ns]
    if stats is not None:
        stats[text] = entry
    return entry


def image_texts(cases: CaseSet, case_ids: list[str]) -> list[str]:
    """The image files of ``case_ids`` as text, each once, in order: ``str(cases.image_paths(case))`` of each,
    joined as text where that gives the same (no :class:`~pathlib.Path` built and hashed per image)."""
    root = str(cases.image_root)
    found: dict[str, None] = {}
    get = cases.get
    for case_id in case_ids:
        for name in get(case_id).images:
            plain = "//" not in name and not name.endswith("/") and "/." not in "/" + name
            found[f"{root}/{name}" if plain and root != "/" else str(cases.image_root / name)] = None
    return list(found)


def _input_settings(ws: Workspace, suite: str, capabilities: Capabilities, generation: Generation,
                    selection: Mapping[str, Any]) -> dict[str, Any]:
    return {"version": __version__, "suite": suite, "capabilities": asdict(capabilities),
            "generation": generation.record(), "selection": dict(selection),
            "config": ws.config.model_dump(mode="json"), "root": str(ws.root)}


def _input_files(ws: Workspace, suite: str, selection: Mapping[str, Any]) -> list[Path]:
    """The files other than captions and images that decide which requests a run makes."""
    from cfkit.prompts import PROBE_TEMPLATES
    from cfkit.subsets import modality_subset_path

    files = [ws.config_path, ws.cases_path, *(ws.probes_dir / "templates" / name for name in PROBE_TEMPLATES)]
    if suite == "modality" and not selection.get("all_cases") and not selection.get("subset"):
        files.append(modality_subset_path(ws))
    for key in ("cases", "subset"):
        if selection.get(key):
            files.append(Path(selection[key]["path"]))
    return files


def inputs_digest(ws: Workspace, suite: str, capabilities: Capabilities, generation: Generation, cases: CaseSet,
                  case_ids: list[str], selection: Mapping[str, Any], digests: Digests | None = None,
                  suite_case_ids: list[str] | None = None,
                  stats: dict[str, list] | None = None) -> InputsDigest | None:
    """A digest of everything the contextcanvas or modality requests are rendered from, and its manifest.

    That is: the cfkit version, the suite, the backend's capabilities, the
    generation settings, the selection, the templates, cfkit.toml, the cases
    file, the selected case ids, the bytes of each selected case's caption
    file, and each image file's path, size and mtime (as the run id knows
    images: no image is read). Equal digests mean the same requests, so a run
    with the same settings that ended complete with this digest needs no
    planning at all. Counterfactual requests also depend on review decisions
    in the store; they get None and are always planned. ``digests`` is not
    used (kept for callers). ``suite_case_ids`` are the suite's cases before
    the selection (their captions decide ``--reviewed-only``). Each image's
    manifest entry is put in ``stats`` (by path as text), where given, so
    that the plan needs no second ``stat`` of the file and holds the
    manifest's entry rather than a copy
    (:class:`~cfkit.probe.image_refs.Digests`).
    """
    if suite == "counterfactual":
        return None
    from cfkit.prompts import templates_sha256

    digest = hashlib.sha256()
    started = time.time_ns()

    def add(label: str, data: bytes) -> None:
        digest.update(label.encode() + b"\0" + len(data).to_bytes(8, "big") + data)

    settings = _input_settings(ws, suite, capabilities, generation, selection)
    add("settings", json.dumps(settings | {"cases": case_ids}, sort_keys=True, default=str).encode())
    add("templates", templates_sha256(ws).encode())
    # The cases file as the plan parsed it (read once, by load_cases), not as it may be by now: an edit saved
    # while the run read it must not be recorded as what the run asked.
    read = cases.read if cases.path == ws.cases_path else None
    add("cases", (read.sha256 if read else hashlib.sha256(ws.cases_path.read_bytes()).hexdigest()).encode())
    files = _input_files(ws, suite, selection)
    if suite == "modality":
        from cfkit.captions import caption_path  # (a pydantic model at import: only where captions are asked)

        for case_id in case_ids:
            path = caption_path(ws, case_id)
            add(f"caption {case_id}", path.read_bytes() if path.is_file() else b"\0missing")
        files += [caption_path(ws, c) for c in dict.fromkeys([*(suite_case_ids or ()), *case_ids])]
    images = [_file_state(p, stats) for p in image_texts(cases, case_ids)]
    for state in images:
        add(f"image {state[0]}", b"\0missing" if state[1] is None else f"{state[1]} {state[2]}".encode())
    states = [_file_state(p) for p in dict.fromkeys(files)]
    if read is not None:  # the cases file as it was opened to be parsed
        states = [[s[0], read.size, read.mtime_ns] if s[0] == str(ws.cases_path) else s for s in states]
    manifest = {"settings": _sha256(settings), "at_ns": started, "files": states + images}
    return InputsDigest(digest.hexdigest(), manifest)


def inputs_unchanged(ws: Workspace, suite: str, capabilities: Capabilities, generation: Generation,
                     selection: Mapping[str, Any], manifest: Mapping[str, Any]) -> bool:
    """Whether the inputs recorded in ``manifest`` (:class:`InputsDigest`) are as they were, by ``stat`` alone.

    True only when the settings that are not files are the same and every
    file has its recorded size and mtime (an absent one is still absent),
    with no mtime so close to when the manifest was taken that a rewrite in
    the same clock tick could hide. Then the inputs digest would be the same,
    and nothing needs to be read or parsed.
    """
    from cfkit.probe.shortcut import files_unchanged

    if manifest.get("settings") != _sha256(_input_settings(ws, suite, capabilities, generation, selection)):
        return False
    return files_unchanged(manifest)


def inputs_sha256(ws: Workspace, suite: str, capabilities: Capabilities, generation: Generation, cases: CaseSet,
                  case_ids: list[str], selection: Mapping[str, Any], digests: Digests | None = None) -> str | None:
    """The content digest of :func:`inputs_digest` alone."""
    found = inputs_digest(ws, suite, capabilities, generation, cases, case_ids, selection, digests)
    return found.sha256 if found is not None else None
