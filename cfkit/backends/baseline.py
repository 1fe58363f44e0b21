"""``baseline:always-no | always-yes | majority | random`` — reference answerers that read no content.

They show what a model would score without looking: ``always-no`` and
``always-yes`` answer the case's No / Yes option as the request lists it
(``meta.yes_option``; in the swap suite's ``swapped-order`` that is the other
id, so they answer the option whose text is No / Yes in either order),
``majority`` answers the
suite's most frequent gold label (given once by the runner, never per
request), ``random`` picks an option uniformly with a seeded generator that
depends only on the seed and the request's case, pair and condition, so the
answers do not change with concurrency or order.

A case without ``yes_option`` (three options) has no Yes or No: ``always-no``
and ``always-yes`` decline it, and ``majority`` answers that case type's most
frequent gold option id.
"""

from __future__ import annotations

import hashlib
import json
import random
from typing import ClassVar

from pydantic import Field

from cfkit.backends import Backend, BackendContext, BackendOptions, Capabilities, KnownAnswer, ProbeRequest, Reply
from cfkit.errors import UsageError
from cfkit.majority import majority_answer, majority_choice

RULES = ("always-no", "always-yes", "majority", "random")


class BaselineOptions(BackendOptions):
    seed: int = Field(0, description="seed of baseline:random")


class BaselineBackend(Backend):
    """Answers without reading the question or the image."""

    kind: ClassVar[str] = "baseline"
    capabilities: ClassVar[Capabilities] = Capabilities(images=False, multi_image=True, json_schema=False,
                                                        remote=False, cacheable=False)
    Options: ClassVar[type[BaselineOptions]] = BaselineOptions
    #: Entries of cache_identity that follow from the suite's cases rather than from a setting.
    derived_identity: ClassVar[tuple[str, ...]] = ("majority",)

    def __init__(self, name: str, options: BaselineOptions, context: BackendContext | None = None):
        if name not in RULES:
            raise UsageError(f"unknown baseline '{name}'. Choose one of: {', '.join(RULES)} (e.g. baseline:always-no).")
        context = context or BackendContext()
        if name == "majority" and not context.gold_labels:
            raise UsageError("baseline:majority needs the suite's gold labels; run it through 'cfkit probe run'.")
        self.name = name
        self.model = f"{self.kind}:{name}"
        self.options = options
        self.priced = False
        self._majority = majority_choice(context.gold_labels)
        # What decides the answers: the seed, or the majority labels (which change with the cases).
        self.cache_identity = {"seed": options.seed} if name == "random" else (
            {"majority": list(self._majority)} if name == "majority" else {})

    def _choose(self, request: ProbeRequest) -> str | None:
        meta = request.meta
        no_option = next((o for o in request.option_ids if o != meta.yes_option), None) if meta.yes_option else None
        if self.name == "always-yes":
            return meta.yes_option
        if self.name == "always-no":
            return no_option
        if self.name == "majority":
            return majority_answer(self._majority, meta.yes_option, request.option_ids)
        key = f"{self.options.seed}\0{meta.case_id}\0{meta.pair_id}\0{meta.condition}".encode()
        rng = random.Random(int.from_bytes(hashlib.sha256(key).digest()[:8], "big"))
        return rng.choice(list(request.option_ids))

    async def answer(self, request: ProbeRequest) -> Reply:
        choice = self._choose(request)
        if choice is None:
            reason = f"baseline {self.name} has no answer for a case without a Yes/No option"
            return Reply(raw=reason, refused=True,
                         known=KnownAnswer(answer=None, parse=None, error="refused", reason=reason))
        reason = f"baseline {self.name}"
        raw = json.dumps({"answer": choice, "reason": reason, "confidence": "low"})
        return Reply(raw=raw, known=KnownAnswer(answer=choice, parse="json", error=None, reason=reason,
                                                confidence="low"))
