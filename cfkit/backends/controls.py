"""Model controls: the decoding settings a user may set with ``-o``, checked once for every backend.

``-o temperature=0``, ``-o top_p=0.9``, ``-o seed=7``, ``-o reasoning_effort=low``,
``-o max_completion_tokens=800`` and ``-o extra_body='{"top_k": 20}'`` are not
backend options: they are the request's :class:`~cfkit.backends.Generation`,
so they enter every request's cache key and the run's settings (its id), and
``cfkit runs show`` lists them under ``generation``. A backend says which it
can honour in its class attribute ``controls``; a control it does not take is
refused with one line naming those it does, never silently dropped.

``extra_body`` is a JSON object laid over the request body as it is (a
server's own parameters: vLLM's ``top_k``, ``chat_template_kwargs`` …). It may
not set what cfkit builds itself (the model, the messages, the answer schema)
nor repeat a control that has its own ``-o`` key.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from cfkit.errors import OptionError

#: Every control's ``-o`` key.
CONTROL_KEYS = ("temperature", "top_p", "seed", "reasoning_effort", "max_completion_tokens", "extra_body")
#: Body keys ``extra_body`` may not set: cfkit builds them, or a control has its own key.
RESERVED_BODY_KEYS = frozenset({"model", "messages", "response_format", "system", "stream", "n",
                                "max_tokens", "max_completion_tokens", "temperature", "top_p", "seed",
                                "reasoning_effort"})
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")


def _model_controls() -> type:
    from typing import Literal

    from pydantic import Field, field_validator

    from cfkit.options import PluginOptions

    class ModelControls(PluginOptions):
        """The controls' rules (``cfkit probe backends`` lists them with each backend that takes them)."""

        temperature: float | None = Field(None, ge=0, le=2, description="sampling temperature (default 0: greedy)")
        top_p: float | None = Field(None, gt=0, le=1, description="nucleus sampling mass")
        seed: int | None = Field(None, ge=0, le=2**63 - 1, description="sampling seed, where the server honours one")
        reasoning_effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = Field(
            None, description="how hard a reasoning model thinks: none, minimal, low, medium, high, xhigh")
        max_completion_tokens: int | None = Field(None, ge=1, le=1_000_000,
                                                  description="longest reply in tokens (the same as --max-tokens)")
        extra_body: str | None = Field(None, description="a JSON object laid over the request body (server-specific "
                                                         "parameters, e.g. '{\"top_k\": 20}')")

        @field_validator("extra_body", mode="before")
        @classmethod
        def _json_object(cls, value: Any) -> str | None:
            if value is None:
                return None
            if isinstance(value, str):
                try:
                    value = json.loads(value)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"not JSON ({exc.msg} at character {exc.pos})") from None
            if not isinstance(value, dict) or not value:
                raise ValueError("must be a non-empty JSON object, e.g. '{\"top_k\": 20}'")
            taken = sorted(RESERVED_BODY_KEYS & set(value))
            if taken:
                raise ValueError(f"may not set {', '.join(taken)} (cfkit builds it, or it has its own -o key)")
            return json.dumps(value, sort_keys=True, ensure_ascii=False, allow_nan=False)

    ModelControls.__module__, ModelControls.__qualname__ = __name__, "ModelControls"
    return ModelControls


def __getattr__(name: str) -> Any:
    """``ModelControls`` (a pydantic model) is built when first asked for: a run given no control needs none."""
    if name == "ModelControls":
        if "ModelControls" not in globals():
            globals()["ModelControls"] = _model_controls()
        return globals()["ModelControls"]
    raise AttributeError(f"module 'cfkit.backends.controls' has no attribute {name!r}")


class NoControls:
    """The controls of a command that gives none: each None, as ``ModelControls()`` holds them. (A plain class with
    no state: a dataclass costs about a millisecond to build at import.)"""

    __slots__ = ()
    temperature = top_p = seed = reasoning_effort = max_completion_tokens = extra_body = None


NO_CONTROLS = NoControls()


def split_controls(options: Mapping[str, Any], accepted: frozenset[str] | tuple[str, ...], *,
                   kind: str, own: frozenset[str] | set[str] = frozenset()) -> tuple[Any, dict[str, Any]]:
    """``options`` (``-o`` values) split into the controls, checked, and the backend's own options.

    A key the backend's ``Options`` has itself (``own``: ``baseline:random`` has its ``seed``) stays the
    backend's. A control the backend ``kind`` does not take is refused with the ones it does (by a backend
    that takes none, as any unknown option is: with its own options).
    """
    if not accepted:  # a backend without controls: they are unknown options, refused with its own list
        return NO_CONTROLS, dict(options)
    given = {k: v for k, v in options.items() if k in CONTROL_KEYS and k not in own}
    rest = {k: v for k, v in options.items() if k not in given}
    refused = sorted(set(given) - set(accepted))
    if refused:
        key = refused[0]
        takes = ", ".join(k for k in CONTROL_KEYS if k in accepted) or "none"
        raise OptionError(f"backend '{kind}' does not take -o {key}={given[key]} (model controls it takes: "
                          f"{takes}). See 'cfkit probe backends'.")
    if not given:
        return NO_CONTROLS, rest
    from pydantic import ValidationError

    try:
        controls = __getattr__("ModelControls").model_validate(given)
    except ValidationError as exc:
        problem = exc.errors()[0]
        key = str(problem["loc"][0]) if problem["loc"] else "?"
        message = problem["msg"].removeprefix("Value error, ")
        raise OptionError(f"-o {key}={given.get(key)}: {message}. See 'cfkit probe backends'.") from exc
    return controls, rest


def applied(generation: Any, controls: Any) -> Any:
    """``generation`` with the controls that were given (temperature, top_p, seed, effort, extra body) set;
    the token limit is resolved with ``--max-tokens`` before (:func:`cfkit.probe.protocol.resolve_protocol`)."""
    changes: dict[str, Any] = {}
    for key in ("temperature", "top_p", "seed", "reasoning_effort", "extra_body"):
        value = getattr(controls, key)
        if value is not None:
            changes[key] = value
    return replace(generation, **changes) if changes else generation


def extra_body(generation: Any) -> dict[str, Any]:
    """The ``extra_body`` object of ``generation`` (empty when none was given)."""
    return json.loads(generation.extra_body) if generation.extra_body else {}
