"""What identifies a request and a run: cache keys, run settings, run ids, input digests, versions.

A run's identity is everything that can change an answer: the backend, the
model, the resolved endpoint, every generation setting, the answer-changing
options (the backend's ``cache_identity``: for hf the snapshot commit and file
hashes), the protocol preset, and the exact requests (templates, cases,
captions, images and the selection, all through each request's cache key).
Changing any of them makes a new run; a run's stored replies are never
replaced by answers to other questions.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from importlib import metadata
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


def cache_key(backend: Backend, request: ProbeRequest) -> str:
    """SHA-256 over backend kind, model, answer-changing options and the exact request.

    Backends whose answers depend on where a request comes from rather than on
    its content (replay, baselines) have ``meta`` included as well.
    """
    backend = as_backend(backend)
    material: dict[str, Any] = {
        "backend": backend.kind,
        "model": backend.model,
        "identity": backend.cache_identity,
        "request": request.fingerprint(),
    }
    if not backend.capabilities.cacheable:
        material["meta"] = asdict(request.meta)
    return _sha256(material)


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


def requests_sha256(keys: Mapping[tuple[str, str, str], str],
                    shown: Mapping[tuple[str, str, str], tuple[int | None, str | None]] | None = None) -> str:
    """A digest over every planned request: its place in the suite, its cache key, and what it is about.

    ``shown`` maps a place to (edit id, image SHA-256) of the question: a
    backend that takes no images sends the same request for a new edit, yet
    its answers are about that edit, so a new edit still makes a new run.
    """
    shown = shown or {}
    return _sha256(sorted([list(place), key, list(shown.get(place, (None, None)))] for place, key in keys.items()))


def run_id_for(backend: Backend, suite: str, settings_digest: str, requests_digest: str) -> str:
    """A readable, stable run id: ``suite-model-hash``; the hash covers the settings and every request."""
    digest = _sha256({"suite": suite, "settings": settings_digest, "requests": requests_digest})
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", backend.model).strip("-")[:48]
    return f"{suite}-{slug}-{digest[:8]}"


def library_versions(backend: Backend | None = None) -> dict[str, str]:
    """cfkit's version, the installed versions of :data:`RECORDED_LIBRARIES`, and the backend's ``versions``."""
    found = {"cfkit": __version__}
    for name in RECORDED_LIBRARIES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
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


def _file_state(path: Path) -> list[Any]:
    try:
        st = os.stat(path)
    except OSError:
        return [str(path), None, None]
    return [str(path), st.st_size, st.st_mtime_ns]


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
                  suite_case_ids: list[str] | None = None) -> InputsDigest | None:
    """A digest of everything the contextcanvas or modality requests are rendered from, and its manifest.

    That is: the cfkit version, the suite, the backend's capabilities, the
    generation settings, the selection, the templates, cfkit.toml, the cases
    file, the selected case ids, and the bytes of each selected case's caption
    file and images. Equal digests mean identical requests, so a run with the
    same settings that ended complete with this digest needs no planning at all.
    Counterfactual requests also depend on review decisions in the store; they
    get None and are always planned. Image files are known through
    ``digests`` (:class:`~cfkit.probe.image_refs.Digests`): an unchanged file
    is not read again. ``suite_case_ids`` are the suite's cases before the
    selection (their captions decide ``--reviewed-only``).
    """
    if suite == "counterfactual":
        return None
    from cfkit.captions import caption_path
    from cfkit.probe.image_refs import Digests
    from cfkit.prompts import templates_sha256

    digest = hashlib.sha256()
    started = time.time_ns()

    def add(label: str, data: bytes) -> None:
        digest.update(label.encode() + b"\0" + len(data).to_bytes(8, "big") + data)

    settings = _input_settings(ws, suite, capabilities, generation, selection)
    add("settings", json.dumps(settings | {"cases": case_ids}, sort_keys=True, default=str).encode())
    add("templates", templates_sha256(ws).encode())
    add("cases", ws.cases_path.read_bytes())
    files = _input_files(ws, suite, selection)
    if suite == "modality":
        for case_id in case_ids:
            path = caption_path(ws, case_id)
            add(f"caption {case_id}", path.read_bytes() if path.is_file() else b"\0missing")
        files += [caption_path(ws, c) for c in dict.fromkeys([*(suite_case_ids or ()), *case_ids])]
    paths = list(dict.fromkeys(p for case_id in case_ids for p in cases.image_paths(cases.get(case_id))))
    present = {p for p in paths if p.is_file()}
    digests = digests or Digests(None)
    digests.prefetch([p for p in paths if p in present])
    for path in paths:
        add(f"image {path}", bytes.fromhex(digests.sha256(path)) if path in present else b"\0missing")
    manifest = {"settings": _sha256(settings), "at_ns": started,
                "files": [_file_state(p) for p in dict.fromkeys([*files, *paths])]}
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
    from cfkit.store.digests import RACY_S

    if manifest.get("settings") != _sha256(_input_settings(ws, suite, capabilities, generation, selection)):
        return False
    recorded_at = manifest.get("at_ns") or 0
    for path, size, mtime_ns in manifest.get("files", ()):
        now = _file_state(Path(path))
        if now[1:] != [size, mtime_ns]:
            return False
        if mtime_ns is not None and recorded_at - mtime_ns < RACY_S * 1e9 + (1e9 if mtime_ns % 10**9 == 0 else 0):
            return False
    return bool(manifest.get("files"))


def inputs_sha256(ws: Workspace, suite: str, capabilities: Capabilities, generation: Generation, cases: CaseSet,
                  case_ids: list[str], selection: Mapping[str, Any], digests: Digests | None = None) -> str | None:
    """The content digest of :func:`inputs_digest` alone."""
    found = inputs_digest(ws, suite, capabilities, generation, cases, case_ids, selection, digests)
    return found.sha256 if found is not None else None
