"""Protocol presets: the decoding and transport settings a run is asked with, by name.

``default`` is cfkit's own: temperature 0, ``--max-tokens`` (512 unless given),
each backend's own timeouts and retries. ``paper`` is what the AesCanvas
supplement states for its evaluation (Section S2.4.1, arXiv 2608.26713):

- API models: temperature 0, four concurrent requests, a 180-second timeout,
  at most three transport retries (four attempts), and the output-token limit
  the paper gives for that model: 800 for GPT-5.2 and Gemini 3.1 Pro, 500 for
  Qwen3.7-Plus. For any other API model the paper states none, so
  ``--max-tokens`` must be given.
- Local models: greedy decoding, at most 256 new tokens, images fitted to
  448 x 448 (RGB, padded or resized).

Model controls (``-o temperature``, ``top_p``, ``seed``, ``reasoning_effort``,
``max_completion_tokens``, ``extra_body``; :mod:`cfkit.backends.controls`) are
laid over a preset's generation settings. ``paper`` fixes temperature 0 and
the token limit, so a control that contradicts them is refused; the
supplement states no top_p, seed or reasoning effort for the ContextCanvas
evaluator (its notes on reasoning concern the CritiqueCanvas runs), so those
are the user's, and the run records them as given.

A preset's backend options are applied where the backend has them (a local
model has no timeout); what could not be applied is recorded with the run.
A value given on the command line that contradicts the preset is refused
rather than silently winning or losing. The run records the preset's name,
which is part of its settings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from cfkit.backends import Generation
from cfkit.backends.controls import NO_CONTROLS, applied
from cfkit.errors import UsageError
from cfkit.plural import plural

PROTOCOLS = ("default", "paper")
PAPER_SOURCE = "AesCanvas supplement, Section S2.4.1 (arXiv 2608.26713)"
DEFAULT_MAX_TOKENS = 512

#: Output-token limits the paper states for its API models (ContextCanvas evaluator), by model name.
PAPER_API_MAX_TOKENS = {"gpt-5.2": 800, "gemini-3.1-pro": 800, "qwen3.7-plus": 500}
PAPER_API_OPTIONS = {"timeout": 180.0, "max_retries": 3}
PAPER_API_CONCURRENCY = 4
PAPER_LOCAL_MAX_TOKENS = 256
PAPER_LOCAL_OPTIONS = {"image_size": 448}


@dataclass(frozen=True)
class Protocol:
    """The resolved settings of a preset for one backend and model."""

    name: str
    generation: Generation
    options: dict[str, Any] = field(default_factory=dict)  # backend options the preset sets (and the backend has)
    concurrency: int | None = None  # None: the backend's default, or -j
    not_applicable: tuple[str, ...] = ()  # preset options this backend does not take

    def record(self) -> dict[str, Any]:
        """What the run records about the preset."""
        return {"name": self.name, "source": PAPER_SOURCE if self.name == "paper" else "cfkit defaults",
                "generation": self.generation.record(),
                "options": self.options, "concurrency": self.concurrency,
                "not_applicable": list(self.not_applicable)}


def paper_max_tokens(model_name: str) -> int | None:
    """The output-token limit the paper states for an API model name (a provider prefix, ``-preview`` or a date
    snapshot suffix allowed), or None."""
    last = model_name.rsplit("/", 1)[-1].lower()
    for name, limit in PAPER_API_MAX_TOKENS.items():
        if re.fullmatch(re.escape(name) + r"(-preview|-\d{4}-\d{2}-\d{2})?", last):
            return limit
    return None


def resolve_protocol(name: str, *, remote: bool, model_name: str, option_names: set[str],
                     max_tokens: int | None, concurrency: int | None, options: dict[str, Any],
                     controls: Any = None) -> Protocol:
    """The settings of preset ``name`` for a backend (``remote``: an API) and model; ``max_tokens``,
    ``concurrency``, ``options`` and ``controls`` are what the command line gave (None or absent: not given)."""
    if name not in PROTOCOLS:
        raise UsageError(f"--protocol {name}: choose one of {', '.join(PROTOCOLS)}.")
    controls = controls or NO_CONTROLS  # (the checked ModelControls when any was given)
    if controls.max_completion_tokens is not None:
        if max_tokens is not None and max_tokens != controls.max_completion_tokens:
            raise UsageError(f"--max-tokens {max_tokens} and -o max_completion_tokens="
                             f"{controls.max_completion_tokens} disagree; keep one.")
        max_tokens = controls.max_completion_tokens
    if name == "default":
        return Protocol("default", applied(Generation(max_tokens=max_tokens or DEFAULT_MAX_TOKENS), controls),
                        concurrency=concurrency)
    if controls.temperature is not None and controls.temperature != 0:
        raise UsageError(f"--protocol paper decodes at temperature 0; drop -o temperature={controls.temperature:g} "
                         "or the preset.")
    if remote:
        stated = paper_max_tokens(model_name)
        wanted_options, wanted_concurrency = PAPER_API_OPTIONS, PAPER_API_CONCURRENCY
        if stated is None and max_tokens is None:
            known = ", ".join(f"{m} {n}" for m, n in PAPER_API_MAX_TOKENS.items())
            raise UsageError(f"--protocol paper: the paper states output-token limits only for {known}; give "
                             f"--max-tokens for {model_name}.")
        limit = stated if stated is not None else max_tokens
    else:
        wanted_options, wanted_concurrency, limit = PAPER_LOCAL_OPTIONS, None, PAPER_LOCAL_MAX_TOKENS
    assert limit is not None
    if max_tokens is not None and max_tokens != limit:
        raise UsageError(f"--protocol paper sets --max-tokens {limit} for {model_name}; drop --max-tokens "
                         f"{max_tokens} or the preset.")
    if concurrency is not None and wanted_concurrency is not None and concurrency != wanted_concurrency:
        raise UsageError(f"--protocol paper sends {plural(wanted_concurrency, 'request')} at once; drop -j {concurrency} "
                         "or the preset.")
    chosen: dict[str, Any] = {}
    for key, value in wanted_options.items():
        if key not in option_names:
            continue
        if key in options and str(options[key]) != str(value) and _number(options[key]) != value:
            raise UsageError(f"--protocol paper sets -o {key}={value:g}; drop -o {key}={options[key]} or the preset.")
        chosen[key] = value
    skipped = tuple(sorted(k for k in wanted_options if k not in option_names))
    return Protocol("paper", applied(Generation(temperature=0.0, max_tokens=limit), controls), chosen,
                    wanted_concurrency if wanted_concurrency is not None else concurrency, skipped)


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None
