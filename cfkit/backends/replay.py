"""``replay:FILE.jsonl`` — answer from a predictions file instead of a model.

Each request is answered with the prediction of the same suite, case, pair and
condition, exactly as recorded (answer, parse rule, error, reason, raw text),
with what the reply said of itself (cut off at the token limit, the server's
model id and build, its reasoning, the server that answered), so replaying an
exported run reproduces its report, its marks of replies that are not clean
included. A file holding several models needs ``-o model=NAME``. The run is
labelled by the model the file names (in tables, plots and the EGA section),
not by the file's path; ``-o label=NAME`` gives it another label (e.g. when
the workspace also holds live runs of that model with other settings). A
request the file has no prediction for fails as a transport error naming the
case, so the gap shows in the run's counts.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import ClassVar

from pydantic import Field

from cfkit.backends import Backend
from cfkit.backends import (
    BackendContext, BackendOptions, Capabilities, KnownAnswer, ProbeRequest, Reply, TransportError,
)
from cfkit.errors import OptionError, PredictionError
from cfkit.plural import plural


class ReplayOptions(BackendOptions):
    model: str | None = Field(None, description="which model's predictions to use when the file holds several")
    label: str | None = Field(None, min_length=1, description="the run's model label in reports (default: the "
                                                              "model the file names)")


class ReplayBackend(Backend):
    """Recorded predictions, served back by (suite, case, pair, condition)."""

    kind: ClassVar[str] = "replay"
    capabilities: ClassVar[Capabilities] = Capabilities(images=False, multi_image=True, json_schema=False,
                                                        remote=False, cacheable=False)
    Options: ClassVar[type[ReplayOptions]] = ReplayOptions
    # The file's digest is an input, not a setting: a model's files of several suites are reported together.
    derived_identity: ClassVar[tuple[str, ...]] = ("sha256",)

    def __init__(self, name: str, options: ReplayOptions, context: BackendContext | None = None):
        from cfkit.predictions import load_predictions

        context = context or BackendContext()
        path = Path(name).expanduser()
        if not path.is_absolute() and not path.exists() and context.root is not None:
            path = context.root / path
        if not path.is_file():
            raise PredictionError(f"replay file {name} not found. Give a predictions JSONL, e.g. from 'cfkit runs export'.")
        predictions = load_predictions([path])
        models = sorted({p.model for p in predictions})
        if options.model is not None:
            if options.model not in models:
                raise PredictionError(f"replay file {path} has no predictions of model '{options.model}'. "
                                 f"Models there: {', '.join(models) or 'none'}.")
            predictions = [p for p in predictions if p.model == options.model]
        elif len(models) > 1:
            raise OptionError(f"replay file {path} holds {plural(len(models), 'model')} ({', '.join(models)}); "
                             "choose one with -o model=NAME.")
        self.name = name
        self.model = options.label or options.model or (models[0] if models else f"{self.kind}:{name}")
        self.path = path
        self.replayed_from = str(path)
        self.options = options
        self.priced = False
        # The file's content, not only its name: replaying an edited file must not reuse the old replies.
        self.cache_identity = {"model": options.model, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
        self._by_key = {(p.suite, p.case, p.pair or "", p.condition): p for p in predictions}

    async def answer(self, request: ProbeRequest) -> Reply:
        meta = request.meta
        prediction = self._by_key.get((meta.suite, meta.case_id, meta.pair_id, meta.condition))
        if prediction is None:
            pair = f" pair {meta.pair_id}" if meta.pair_id else ""
            raise TransportError(f"replay: {self.path} has no {meta.suite} prediction for case {meta.case_id}"
                                 f"{pair} condition {meta.condition}.")
        known = KnownAnswer(answer=prediction.answer, parse=prediction.parse, error=prediction.error,
                            reason=prediction.reason, confidence=prediction.confidence)
        # What the recorded reply said about itself stays with it: a reply cut off at the token limit is still
        # cut off when replayed (the run and its report say so), and the server's model and reasoning are kept.
        return Reply(raw=prediction.raw, known=known, truncated=bool(prediction.truncated),
                     server_model=prediction.server_model, system_fingerprint=prediction.system_fingerprint,
                     reasoning=prediction.reasoning, endpoint=prediction.endpoint)
