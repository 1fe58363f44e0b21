"""A run's cache keys and request keys, the same as :mod:`cfkit.probe.identity` gives, at a fraction of the cost.

:func:`~cfkit.probe.identity.cache_key` hashes the JSON text (sorted keys,
UTF-8 kept) of the backend kind, model and answer-changing options and of the
request's fingerprint. Most of that text is the same for every request of a
run: the backend's part, the generation settings and the answer schema; only
the images, the option ids and the two prompts differ. Serialising it all
again for each request was two thirds of a key's cost (about 40 of 61 us),
paid on the event loop for every request sent.

:class:`RunKeys` serialises the shared part once, as a template with a
placeholder where each per-request value goes (the JSON encoder writes a
nested value exactly as it writes that value alone), and for each request
splices in the JSON of its own values: the bytes hashed are the very bytes
:mod:`~cfkit.probe.identity` hashes, so keys stored by any earlier run still
match. A template is checked once against the full computation when it is
made; a request with settings or a schema it has no template for, a backend
whose keys cover a request's ``meta``, or a fingerprint of another shape is
keyed by :mod:`~cfkit.probe.identity` itself.
"""

from __future__ import annotations

import copy
import hashlib
import json
import uuid
from collections.abc import Sequence
from dataclasses import replace
from json.encoder import encode_basestring
from typing import Any

from cfkit.backends import Backend, ProbeRequest, as_backend
from cfkit.probe.identity import cache_key, json_text, request_key

#: The fingerprint's fields that differ between a run's requests; the others go into a template.
_SPLICED = ("images", "option_ids", "system", "user")
#: The fields a fingerprint has (one of another shape is keyed the full way).
_FIELDS = frozenset({"system", "user", "images", "option_ids", "schema", "generation"})
#: Templates kept per kind of key: a run has one answer schema per option set, and few option sets.
MAX_TEMPLATES = 16
#: The rule a request key's material names (:func:`cfkit.probe.identity.request_key`).
_REQUEST_RULE = "files by path, size and mtime"


def _identities_json(images) -> str | None:
    """:func:`~cfkit.probe.identity.json_text` of the images' identities (``ImageRef.identity``) where each is one
    file without labels, written straight from its fields (the common case: a request key's images at planning);
    None otherwise."""
    parts = []
    for image in images:
        files = getattr(image, "files", None)
        if getattr(image, "labels", None) != () or files is None or len(files) != 1:
            return None
        state = files[0]
        if type(state.path) is not str or type(state.size) is not int or type(state.mtime_ns) is not int:
            return None
        parts.append(f"[{encode_basestring(image.kind)}, {encode_basestring(image.mime)}, "
                     f"[[{encode_basestring(state.path)}, {int.__repr__(state.size)}, "
                     f"{int.__repr__(state.mtime_ns)}]], []]")
    return "[" + ", ".join(parts) + "]"


def _digests_json(images, shas: list) -> str | None:
    """:func:`~cfkit.probe.identity.json_text` of ``[[image.mime, sha], ...]`` (a cache key's images) written
    straight from the texts, or None when one of them is not text."""
    parts = []
    for image, sha in zip(images, shas):
        mime = image.mime
        if type(mime) is not str or type(sha) is not str:
            return None
        parts.append(f"[{encode_basestring(mime)}, {encode_basestring(sha)}]")
    return "[" + ", ".join(parts) + "]"


class _Template:
    """The key material's JSON text with a gap for each spliced field, for one (generation, schema, backend part).

    It keeps copies of what it was made from (a dict changed in place later
    is not this template's any more) and serves a request only when they are
    equal to the request's and the backend's of the moment."""

    __slots__ = ("generation", "schema", "backend", "pieces", "order")

    def __init__(self, generation: Any, schema: Any, backend: tuple, pieces: list[str], order: list[str]):
        self.generation = generation  # frozen
        self.schema = copy.deepcopy(schema)
        self.backend = copy.deepcopy(backend)  # (kind, model, answer-changing options)
        self.pieces = pieces  # len(order) + 1 pieces of text around the gaps
        self.order = order  # the spliced fields in the order the text holds them

    def serves(self, generation: Any, schema: Any, backend: tuple) -> bool:
        return (self.generation is generation or self.generation == generation) and self.schema == schema \
            and self.backend == backend

    def text(self, values: dict[str, str]) -> str:
        pieces = self.pieces
        out = [pieces[0]]
        for i, name in enumerate(self.order):
            out.append(values[name])
            out.append(pieces[i + 1])
        return "".join(out)


class RunKeys:
    """The cache keys and request keys of one backend's requests (see the module docstring)."""

    def __init__(self, backend: Backend):
        self.backend = as_backend(backend)
        # Backends whose keys cover a request's meta (replay, baselines) are keyed the full way.
        self._spliced = bool(self.backend.capabilities.cacheable)
        self._templates: dict[str | None, list[_Template] | None] = {}  # by rule; None: this rule's splicing is off
        self._system: tuple[str | None, str] = (None, "")  # the last system prompt and its JSON

    def cache_key(self, request: ProbeRequest, image_sha256: Sequence[str | None] | None = None) -> str | None:
        """:func:`cfkit.probe.identity.cache_key` of ``request``: the same key."""
        images = request.images
        shas = list(image_sha256) if image_sha256 is not None else [None] * len(images)
        if len(shas) != len(images):
            return cache_key(self.backend, request, image_sha256)  # raises as it does
        shas = [sha if sha is not None else image.sha256 for sha, image in zip(shas, images)]
        if any(sha is None for sha in shas):
            return None
        written = _digests_json(images, shas)
        pairs = None if written is not None else [[image.mime, sha] for image, sha in zip(images, shas)]
        found = self._spliced_key(request, pairs, None, written)
        return found if found is not None else cache_key(self.backend, request, shas)

    def request_key(self, request: ProbeRequest) -> str:
        """:func:`cfkit.probe.identity.request_key` of ``request``: the same key."""
        written = _identities_json(request.images)
        images = None if written is not None else [
            image.identity() if hasattr(image, "identity") else [image.mime, image.sha256] for image in request.images]
        found = self._spliced_key(request, images, _REQUEST_RULE, written)
        return found if found is not None else request_key(self.backend, request)

    # -- splicing -------------------------------------------------------------------------------------------

    def _spliced_key(self, request: ProbeRequest, images: list | None, rule: str | None,
                     images_json: str | None = None) -> str | None:
        if not self._spliced:
            return None
        template = self._template(request, rule)
        if template is None:
            return None
        system = request.system
        if system is not self._system[0] and system != self._system[0]:  # a run's requests share one system prompt
            self._system = (system, json_text(system))
        values = {"images": images_json if images_json is not None else json_text(images),
                  "option_ids": json_text(list(request.option_ids)), "system": self._system[1],
                  "user": encode_basestring(request.user)}
        return hashlib.sha256(template.text(values).encode("utf-8")).hexdigest()

    def _template(self, request: ProbeRequest, rule: str | None) -> _Template | None:
        templates = self._templates.get(rule, [])
        if templates is None:
            return None
        generation, schema, backend = request.generation, request.schema, self._backend_part()
        for template in templates:
            if template.serves(generation, schema, backend):
                return template
        if len(templates) >= MAX_TEMPLATES:
            return None
        template = self._made(request, rule)
        if template is None:
            self._templates[rule] = None  # a fingerprint this module does not know: every key the full way
            return None
        self._templates[rule] = [*templates, template]
        return template

    def _backend_part(self) -> tuple:
        backend = self.backend
        return (backend.kind, backend.model, backend.cache_identity)

    def _made(self, request: ProbeRequest, rule: str | None) -> _Template | None:
        """The template for ``request``'s generation and schema, checked against the full computation."""
        fingerprint = replace(request, images=()).fingerprint()
        if set(fingerprint) != _FIELDS:
            return None
        marks = {name: f"cfkit-splice-{uuid.uuid4().hex}-{name}" for name in _SPLICED}
        backend = self.backend
        material: dict[str, Any] = {"backend": backend.kind, "model": backend.model,
                                    "identity": backend.cache_identity,
                                    "request": fingerprint | {name: mark for name, mark in marks.items()}}
        if rule is not None:
            material["rule"] = rule
        text = json.dumps(material, sort_keys=True, ensure_ascii=False, default=str)
        found = {}
        for name, mark in marks.items():
            quoted = encode_basestring(mark)
            if text.count(quoted) != 1:
                return None
            found[name] = (text.index(quoted), quoted)
        order = sorted(found, key=lambda name: found[name][0])
        pieces, rest = [], text
        for name in order:
            head, _, rest = rest.partition(found[name][1])
            pieces.append(head)
        pieces.append(rest)
        template = _Template(request.generation, request.schema, self._backend_part(), pieces, order)
        # The template must give the very key the full computation gives, or it is not used.
        if rule is None:  # any digest will do: given, it is used as it is, and the image is not read
            shas = ["0" * 64] * len(request.images)
            full = cache_key(backend, request, shas)
            images = [[image.mime, sha] for image, sha in zip(request.images, shas)]
        else:
            full = request_key(backend, request)
            images = [image.identity() if hasattr(image, "identity") else [image.mime, image.sha256]
                      for image in request.images]
        values = {"images": json_text(images), "option_ids": json_text(list(request.option_ids)),
                  "system": json_text(request.system), "user": json_text(request.user)}
        if hashlib.sha256(template.text(values).encode("utf-8")).hexdigest() != full:
            return None
        return template

