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
import re
from collections.abc import Mapping
from dataclasses import asdict
from importlib import metadata
from typing import Any

from cfkit import __version__
from cfkit.backends import Backend, Capabilities, Generation, ProbeRequest
from cfkit.captions import caption_path
from cfkit.cases import CaseSet
from cfkit.probe.image_refs import Digests
from cfkit.prompts import templates_sha256
from cfkit.workspace import Workspace

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
    derived = set(getattr(backend, "derived_identity", ()))
    identity = {k: v for k, v in backend.cache_identity.items() if k not in derived}
    return {"backend": backend.kind, "model": backend.model, "endpoint": getattr(backend, "endpoint", None),
            "generation": asdict(generation), "identity": identity, "protocol": protocol}


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
    found.update(getattr(backend, "versions", None) or {})
    return found


def inputs_sha256(ws: Workspace, suite: str, capabilities: Capabilities, generation: Generation, cases: CaseSet,
                  case_ids: list[str], selection: Mapping[str, Any], digests: Digests | None = None) -> str | None:
    """A digest of everything the contextcanvas or modality requests are rendered from.

    That is: the cfkit version, the suite, the backend's capabilities, the
    generation settings, the selection, the templates, cfkit.toml, the cases
    file, the selected case ids, and the bytes of each selected case's caption
    file and images. Equal digests mean identical requests, so a run with the
    same settings that ended complete with this digest needs no planning at all.
    Counterfactual requests also depend on review decisions in the store; they
    get None and are always planned. Image files are known through
    ``digests`` (:class:`~cfkit.probe.image_refs.Digests`): an unchanged file
    is not read again.
    """
    if suite == "counterfactual":
        return None
    digest = hashlib.sha256()

    def add(label: str, data: bytes) -> None:
        digest.update(label.encode() + b"\0" + len(data).to_bytes(8, "big") + data)

    settings = {"version": __version__, "suite": suite, "capabilities": asdict(capabilities),
                "generation": asdict(generation), "selection": dict(selection),
                "config": ws.config.model_dump(mode="json"), "root": str(ws.root), "cases": case_ids}
    add("settings", json.dumps(settings, sort_keys=True, default=str).encode())
    add("templates", templates_sha256(ws).encode())
    add("cases", ws.cases_path.read_bytes())
    if suite == "modality":
        for case_id in case_ids:
            path = caption_path(ws, case_id)
            add(f"caption {case_id}", path.read_bytes() if path.is_file() else b"\0missing")
    paths = list(dict.fromkeys(p for case_id in case_ids for p in cases.image_paths(cases.get(case_id))))
    present = {p for p in paths if p.is_file()}
    digests = digests or Digests(None)
    digests.prefetch([p for p in paths if p in present])
    for path in paths:
        add(f"image {path}", bytes.fromhex(digests.sha256(path)) if path in present else b"\0missing")
    return digest.hexdigest()
