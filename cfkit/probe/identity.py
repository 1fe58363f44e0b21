"""What identifies a request and a run: cache keys, run ids and the digest of a run's inputs."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict
from pathlib import Path
from typing import Any

from cfkit import __version__
from cfkit.backends import Backend, Capabilities, ProbeRequest
from cfkit.captions import caption_path
from cfkit.cases import CaseSet
from cfkit.prompts import templates_sha256
from cfkit.subsets import modality_subset_path, read_subset
from cfkit.workspace import Workspace


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
        subset = modality_subset_path(ws)
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
